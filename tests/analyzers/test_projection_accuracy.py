"""The projection-accuracy harness on the shared cross-GPU timings and one trace pair (the
figures docs/sizing.md reports; a regression in the projection or the fitted rates fails)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "benchmarks" / "projection_accuracy.py"


def _run(*args: str) -> dict:
    res = subprocess.run([sys.executable, str(HARNESS), "--json", *args], check=False,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_timings_in_sample(shared):
    doc = _run(str(shared / "timings"))
    # 18 NeuSight configurations x their GPU pairs + Vidur 3 models x TP x 13 token counts x 6
    assert doc["pairs_count"] == 1174 == len(doc["pairs"])
    assert doc["mean_abs_error_pct"] <= 7.0  # 6.70 with the shipped rates
    # 32.62: the 30% target is not met; the four pairs above it are inconsistencies between
    # NeuSight's own L4 measurements (README, "How accurate the projection is")
    assert doc["max_abs_error_pct"] <= 33.0
    over = {(r["workload"], r["source"], r["target"]) for r in doc["pairs"]
            if abs(r["error_pct"]) > 30}
    assert over == {("neusight/bert_large-inf-512-8", "L4", "T4"),
                    ("neusight/bert_large-inf-512-8", "L4", "H100 SXM"),
                    ("neusight/bert_large-train-512-2", "A100 80GB PCIe", "L4"),
                    ("neusight/bert_large-train-512-8", "A100 80GB PCIe", "L4")}
    row = doc["pairs"][0]
    assert set(row) == {"workload", "source", "target", "source_ms", "measured_ms",
                        "projected_ms", "error_pct"}


@pytest.mark.parametrize("name", [
    "gaunernst_bert-small-uncased__1016001.json.gz",
    "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "Falconsai_nsfw_image_detection__1016002.json.gz",  # MI300X: miopen conv argument order
])
def test_trace_pair_both_directions(shared, name):
    k = shared / "traces" / "kineto"
    doc = _run("--pair", str(k / f"tracelens-h100-{name}"), str(k / f"tracelens-mi300-{name}"))
    assert [(r["source"], r["target"]) for r in doc["pairs"]] == [
        ("H100 SXM", "MI300X"), ("MI300X", "H100 SXM")]
    assert doc["max_abs_error_pct"] <= 15.0
