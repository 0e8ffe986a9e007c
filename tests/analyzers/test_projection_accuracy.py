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
    assert doc["mean_abs_error_pct"] <= 8.5  # 8.05 with the shipped rates
    assert doc["max_abs_error_pct"] <= 40.0  # 36.85: the 30% target is not met (README)
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
