"""The compare analyzer on small hand-built pairs: exact matching, attribution and deltas."""

from __future__ import annotations

import dataclasses

import pytest

from rightsize.analyzers.compare import Side, compare_sides, side_times
from rightsize.analyzers.compare.attribution import UNATTRIBUTED
from rightsize.analyzers.document import Document
from rightsize.analyzers.document.metrics import Device, DeviceMetrics, StepStats
from tests.conftest import SAMPLES
from tests.framebuilder import FrameBuilder

BASE = Document.from_json(SAMPLES / "runs" / "train_compute-cpu" / "analysis.json")
CUTLASS = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_align4>(Params)"
CK = "Cijk_Alik_Bljk_S_B_Bias_HA_S_SAV_MT64x64x16(KernelArgs)"
ELTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::ReluFunctor>(int)"


def nvidia_frames():
    """Linear > aten::linear > aten::addmm (cutlass, 800 µs) and aten::relu (100 µs), plus a
    cutlass kernel launched before the capture (200 µs, no op) and one unknown (50 µs)."""
    return (FrameBuilder()
            .x("python_function", "nn.Module: Linear_0", 0, 500)
            .op("aten::linear", 10, 400, ext=1).op("aten::addmm", 20, 300, ext=2)
            .op("aten::relu", 600, 50, ext=3)
            .kernel(CUTLASS, 100, 800, corr=10, ext=2)
            .kernel(ELTWISE, 1000, 100, corr=11, ext=3)
            .kernel(CUTLASS, -400, 200, corr=9)
            .kernel("mystery_kernel", -100, 50, corr=8)
            .trace())


def amd_frames():
    """The same model on another vendor: Linear > aten::linear > aten::mm (CK, 400 µs)."""
    return (FrameBuilder()
            .x("python_function", "nn.Module: Linear_0", 0, 500)
            .op("aten::linear", 10, 400, ext=1).op("aten::mm", 20, 300, ext=2)
            .op("aten::relu", 600, 50, ext=3)
            .kernel(CK, 100, 400, corr=10, ext=2)
            .kernel(ELTWISE, 1000, 100, corr=11, ext=3)
            .trace())


def doc(step_ms=1.0, count=1, spread=0.0, shares=None, device="NVIDIA H100 80GB HBM3",
        gpu="H100 SXM", candidates=()):
    steps = StepStats(count, step_ms, step_ms - spread, step_ms + spread, "profiler_step", True,
                      0, ())
    dev = Device(0, None, device, 132, None, None, True, DeviceMetrics(None, None, None, None))
    diag = dataclasses.replace(BASE.diagnosis, device="gpu", signals=(),
                               shares_pct=shares or {"compute": 100.0})
    sizing = dataclasses.replace(BASE.sizing, current=gpu, candidates=tuple(candidates))
    return dataclasses.replace(BASE, devices=(dev,)).with_sections(steps=steps, diagnosis=diag,
                                                                   sizing=sizing)


def side(d, frames=None):
    if frames is None:
        return Side("doc.json", d)
    return Side("trace", d, frames.kernels, frames.cpu_ops)


def test_ops_attributed_to_outermost_aten_op_under_module():
    t = side_times(nvidia_frames().kernels, nvidia_frames().cpu_ops, steps=1)
    # 0.8 ms launched by addmm plus 0.2 ms inferred by kernel name both go to Linear/aten::linear
    assert t.ops_ms == pytest.approx({"Linear/aten::linear": 1.0, "aten::relu": 0.1,
                                      UNATTRIBUTED: 0.05})
    assert t.ops_bare_ms == pytest.approx({"aten::linear": 1.0, "aten::relu": 0.1,
                                           UNATTRIBUTED: 0.05})
    assert t.inferred_ms == pytest.approx(0.2)
    assert t.total_ms == pytest.approx(1.15)
    assert t.has_modules and t.basis == "kernel"


def test_cross_vendor_pair_matches_by_call_path():
    c = compare_sides(side(doc(step_ms=2.0), nvidia_frames()),
                      side(doc(step_ms=1.5, device="AMD Instinct MI300X", gpu="MI300X"),
                           amd_frames()))
    ops = {o.name: (round(o.a_ms, 6), round(o.b_ms, 6), o.change_pct) for o in c.ops}
    assert ops == {"Linear/aten::linear": (1.0, 0.4, -60.0), "aten::relu": (0.1, 0.1, 0.0),
                   UNATTRIBUTED: (0.05, 0.0, -100.0)}
    # A: 1.1 of 1.15 ms matched (the orphan without a home is not); B: all of 0.5 ms
    assert c.matched_pct == {"a": 95.7, "b": 100.0}
    assert c.matched_by == "call-path"
    # by kernel name alone only the elementwise kernel matches: 0.1 of 1.15 ms, 0.1 of 0.5 ms
    assert c.kernel_matched_pct == {"a": 8.7, "b": 20.0}
    assert c.to_json()["step_ms"] == {"a": 2.0, "b": 1.5, "change_pct": -25.0, "delta_ms": -0.5,
                                      "noise_ms": None, "significant": None}
    # kernels match by normalized name only where the names agree
    kernels = {k.name: (round(k.a_ms, 6), round(k.b_ms, 6)) for k in c.kernels}
    assert kernels["vectorized_elementwise_kernel<4,ReluFunctor>"] == (0.1, 0.1)
    assert kernels["Kernel2<cutlass_80_tensorop_s1688gemm_64x64_align4>"] == (1.0, 0.0)


def test_identical_sides_change_nothing():
    d = doc(step_ms=3.0, count=4, spread=0.5)
    c = compare_sides(side(d, nvidia_frames()), side(d, nvidia_frames()))
    assert all(o.delta_ms == 0 and o.change_pct in (0.0, None) for o in c.ops)
    assert c.top_changes == ()
    assert c.step.noise_ms == 1.0 and c.step.significant is False
    assert c.to_json()["step_ms"]["change_pct"] == 0.0
    assert c.projection_check is None


def test_dataloader_share_change_is_named_first():
    a = doc(step_ms=100.0, shares={"compute": 40.0, "dataloader": 59.0, "host": 1.0})
    b = doc(step_ms=50.0, shares={"compute": 96.0, "dataloader": 2.0, "host": 2.0})
    c = compare_sides(side(a), side(b))
    first = c.top_changes[0]
    assert (first.kind, first.name) == ("share", "dataloader")
    assert first.reason == "data-loader wait fell 59 -> 1 ms/step (59% -> 2% of the step)"
    assert [s.name for s in c.shares] == ["dataloader", "compute", "host"]


def test_projection_check_when_gpus_differ():
    cand = dataclasses.replace(BASE.sizing.candidates[0], gpu="MI300X", projected_step_ms=20.0,
                               projected_step_ms_low=16.0, projected_step_ms_high=26.0)
    a = doc(step_ms=30.0, candidates=[cand])
    b = doc(step_ms=25.0, device="AMD Instinct MI300X", gpu="MI300X")
    p = compare_sides(side(a), side(b)).projection_check
    assert p is not None
    assert p.to_json() == {"gpu": "MI300X", "projected_ms": 20.0, "measured_ms": 25.0,
                           "error_pct": -20.0, "range_ms": [16.0, 26.0], "within_range": True}


def test_saved_documents_match_by_top_ops():
    op = dataclasses.replace(BASE.top_ops[0], gpu_ms=3.0)
    a = doc().with_sections(top_ops=(op,), top_kernels=())
    c = compare_sides(side(a), side(a))
    assert c.matched_by == "top-ops" and c.matched_pct == {"a": 100.0, "b": 100.0}
    assert any("top-ops" in n for n in c.notes)


def test_group_reason_names_both_devices():
    sig = dataclasses.replace(BASE.diagnosis.signals[0], group="gemm", time_ms=2.0)
    a = doc(step_ms=5.0)
    a = a.with_sections(diagnosis=dataclasses.replace(a.diagnosis, signals=(sig,)))
    b = doc(step_ms=5.0, device="AMD Instinct MI300X", gpu="MI300X")
    b = b.with_sections(diagnosis=dataclasses.replace(
        b.diagnosis, signals=(dataclasses.replace(sig, time_ms=3.0),)))
    g = compare_sides(side(a), side(b)).groups[0]
    assert g.reason == ("GEMMs 1.5x slower on AMD Instinct MI300X vs NVIDIA H100 80GB HBM3: "
                        "2 -> 3 ms/step")


def test_document_is_not_mutated_and_result_is_frozen():
    d = doc()
    before = d.to_json()
    c = compare_sides(side(d), side(d))
    assert d.to_json() == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.notes = ()  # type: ignore[misc]


def test_pct_of_peak_per_group():
    import polars as pl

    from rightsize.analyzers.compare.rates import pct_of_peak
    from rightsize.catalog import load_catalog

    # 494.7 TFLOP in 1 s of bf16 GEMM = half of the H100 SXM's 989.4 dense; an elementwise
    # kernel far under 1% of peak is left out; a kernel without FLOPs does not count
    work = pl.DataFrame({
        "group": ["gemm", "gemm", "elementwise", "gemm"],
        "flops": [400.0e12, 94.7e12, 1e6, None],
        "precision": ["bf16", "bf16", "bf16", "bf16"],
        "dur_ns": [800_000_000, 200_000_000, 1_000_000, 5_000_000]})
    assert pct_of_peak(work, "H100 SXM", load_catalog()) == {"gemm": 50.0}
    assert pct_of_peak(work, "no such GPU", load_catalog()) == {}
    assert pct_of_peak(None, "H100 SXM", load_catalog()) == {}


def test_precision_from_the_classified_work():
    import polars as pl

    work = pl.DataFrame({"precision": ["fp32", "bf16", "bf16", None],
                         "dur_ns": [300, 200, 200, 900]})
    d = doc().with_sections(precision=None)
    c = compare_sides(Side("x", d, work=work), Side("y", d))
    assert (c.a.precision, c.b.precision) == ("bf16", None)  # B: no work, no sizing row


def test_precision_from_the_document_first():
    d = doc()  # the sample's document records fp32 (precision.workload)
    c = compare_sides(side(d), Side("y", d, work=None))
    assert d.precision is not None and c.a.precision == c.b.precision == "fp32"
