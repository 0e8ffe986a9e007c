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

from tests.conftest import shared_path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "benchmarks" / "projection_accuracy.py"


def _run(*args: str) -> dict:
    res = subprocess.run([sys.executable, str(HARNESS), "--json", *args], check=False,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


AMD = {"MI100", "MI210", "MI250 (one GCD)"}  # NeuSight's, specs in benchmarks/data/fit_gpus.csv


def test_timings_in_sample(shared):
    doc = _run(str(shared / "timings"))
    # 18 NeuSight configurations x their GPU pairs (the MI-series too) + Vidur 3 models x TP x
    # 13 token counts x 6
    assert doc["pairs_count"] == 1488 == len(doc["pairs"])
    row = doc["pairs"][0]
    assert set(row) == {"workload", "source", "target", "source_ms", "measured_ms",
                        "projected_ms", "error_pct"}
    nvidia = [r for r in doc["pairs"] if not {r["source"], r["target"]} & AMD]
    errs = [abs(r["error_pct"]) for r in nvidia]
    assert len(nvidia) == 1174 and sum(errs) / len(errs) <= 6.2  # 6.14 with the shipped rates
    # 37.22: the 30% target is not met; the four pairs above it are inconsistencies between
    # NeuSight's own L4 measurements (docs/sizing.md, Validation)
    assert max(errs) <= 38.0
    over = {(r["workload"], r["source"], r["target"]) for r in nvidia if abs(r["error_pct"]) > 30}
    assert over == {("neusight/bert_large-inf-512-8", "L4", "T4"),
                    ("neusight/bert_large-inf-512-8", "L4", "H100 SXM"),
                    ("neusight/bert_large-train-512-2", "A100 80GB PCIe", "L4"),
                    ("neusight/bert_large-train-512-8", "A100 80GB PCIe", "L4")}
    # between vendors (an MI-series GPU and an NVIDIA one): 256 pairs, mean 11.6%; past 40%
    # only GPT-2 large training at batch 4, whose MI210/MI250 end-to-end time is 1.7x their
    # per-op sum (0.92-0.96 in every other configuration)
    cross = [r for r in doc["pairs"] if len({r["source"], r["target"]} & AMD) == 1]
    cerr = [abs(r["error_pct"]) for r in cross]
    assert len(cross) == 256 and sum(cerr) / len(cerr) <= 11.7
    assert {r["workload"] for r in cross if abs(r["error_pct"]) > 40} == {
        "neusight/gpt2_large-train-1024-4"}


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


def _trace_pairs():
    spec = importlib.util.spec_from_file_location("trace_pairs",
                                                  REPO / "benchmarks" / "trace_pairs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["trace_pairs"] = mod
    sys.path.insert(0, str(REPO / "benchmarks"))
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pair_rows():
    """Both directions of the three pairs, projected with the shipped rates and with each
    pair's traces left out of a refit (one computation for the two tests below)."""
    tp = _trace_pairs()
    from timings import fit_catalog

    return tp, tp.rows(shared_path("traces", "kineto"), [shared_path("timings")], fit_catalog())


def test_gpu_part_of_the_trace_pairs_both_ways(pair_rows):
    """The GPU part (steps.gpu_ms: kernels, copies, memsets) of each H100/MI300X pair projected
    by the sizing code onto the other GPU: within 15% of the measured one in all six
    directions, inside its range, and the two directions of a pair agree on the speed ratio
    within their ranges (docs/sizing.md, "Between vendors"). In sample: the shipped rates
    saw the pairs' traces; left out, below."""
    tp, rows = pair_rows
    assert [(r["workload"][:8], r["source"], r["target"]) for r in rows] == [
        (w, a, b) for w in ("Falconsa", "Qwen_Qwe", "gaunerns")
        for a, b in (("H100 SXM", "MI300X"), ("MI300X", "H100 SXM"))]
    assert max(abs(r["error_pct"]) for r in rows) <= 15.0  # 14.2 (bert-small onto the MI300X)
    assert all(r["in_range"] for r in rows)
    assert all(s["agree"] for s in tp.symmetry(rows))


@pytest.mark.slow
def test_gpu_part_with_each_pair_left_out_of_the_rates(pair_rows):
    """The same with the rates refitted without the pair's two traces (the pair a check they
    never saw): five of six directions within 15%; Qwen, the only pair with large GEMMs and
    large elementwise kernels on the MI300X, is 22.4% off onto it (its GEMMs and attention
    ride the MI300X's large-GEMM rate, which its small GEMMs leave undetermined) and 14.7%
    back (its range, error_pct_cross_vendor, is that largest error); the directions agree.
    Before its GEMM and attention kernels launched outside the recorded ops took the shape
    of the same kernel's recorded op: 25.8% and 18.6%."""
    tp, rows = pair_rows
    errs = {(r["workload"][:8], r["source"]): r["left_out_error_pct"] for r in rows}
    assert all(abs(v) <= 15.0 for k, v in errs.items() if k != ("Qwen_Qwe", "H100 SXM"))
    assert errs[("Qwen_Qwe", "H100 SXM")] == pytest.approx(22.4, abs=0.5)
    assert errs[("Qwen_Qwe", "MI300X")] == pytest.approx(-14.7, abs=0.5)
    assert all(r["left_out_in_range"] for r in rows)
    assert all(s["agree"] for s in tp.symmetry(rows, tp.LEFT_OUT))
