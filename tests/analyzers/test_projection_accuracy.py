"""The projection-accuracy harness on the shared cross-GPU timings and one trace pair (the
figures docs/sizing.md reports; a regression in the projection or the fitted rates fails)."""

from __future__ import annotations

import importlib.util
import json
import math
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
    assert doc["mean_abs_error_pct"] <= 7.0  # 6.72 with the shipped rates
    # 33.41: the 30% target is not met; the four pairs above it are inconsistencies between
    # NeuSight's own L4 measurements (README, "How accurate the projection is")
    assert doc["max_abs_error_pct"] <= 34.0
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


def _fit_rates():
    spec = importlib.util.spec_from_file_location("fit_rates", REPO / "benchmarks" / "fit_rates.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fit_rates"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_carry_is_the_slope_of_one_gpus_deviation_on_anothers():
    fr = _fit_rates()
    from rightsize.analyzers.sizing.rates import kernel_s, parse_rates
    from rightsize.catalog import load_catalog

    catalog = load_catalog()
    entry = {"vendor": "NVIDIA", "floor_us": 2.0, "stream_fraction": 0.8,
             "gemm_max": {"fp16": 0.7}, "gemm_half_flops": {"fp16": 1e9}}
    gpus = {"H100 SXM": entry, "A100 80GB SXM": entry}
    table = parse_rates({"gpus": gpus, "error_pct": 0.0, "procedure": ""})
    samples = []
    # log(measured / model): (0.2 on H100, 0.1 on A100) and (-0.4, -0.2); over both orders
    # sum(xy) = 2 x (0.02 + 0.08) = 0.2, sum(xx) = 0.04 + 0.16 + 0.01 + 0.04 = 0.25: 0.8
    for name, flops, devs in (("a", 1e11, (0.2, 0.1)), ("b", 4e11, (-0.4, -0.2))):
        for gpu, dev in zip(gpus, devs):
            model = kernel_s(catalog.gpu(gpu), table.rates[gpu], flops, 1e6, "fp16")
            op = fr.Op(name, "gemm", flops, 1e6, "fp16", model * 1e3 * math.exp(dev), 1.0)
            samples.append(fr.Sample(gpu, "vidur/x", op))
    assert fr.fit_carry(samples, gpus, catalog) == {"gemm": 0.8}
