"""Time inside annotated ranges (record_function: Kineto ``user_annotation``; NVTX in Nsight
Systems exports, read into the same frame) is recorded host work: named in the host share's
split, the evidence and the sizing's reason, never "nothing recorded"."""

from __future__ import annotations

import pytest

from rightsize.analyzers.analysis import Context, analyze_trace
from rightsize.catalog import load_catalog
from tests.framebuilder import FrameBuilder

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"


def _capture(first: str = "tokenize", enclosing: bool = True):
    """Three 100 ms steps: ``first`` (a ``record_function`` range with nothing recorded in it)
    over 0-60 ms, 10 ms with nothing recorded at all, then 30 GEMMs of 1 ms launched from an
    ``aten::mm`` (70-100 ms). A ``main`` range encloses the three steps (structure, not
    work)."""
    b = FrameBuilder()
    if enclosing:
        b.x("user_annotation", "main", 0, 300_000)
    corr = 0
    for s in range(3):
        t = 100_000 * s
        b.step(s, t, 100_000)
        b.x("user_annotation", first, t, 60_000)
        b.op("aten::mm", t + 69_900, 100, ext=s + 1)
        for k in range(30):
            corr += 1
            b.launch("cudaLaunchKernel", t + 69_900 + 3 * k, 2, corr=corr, ext=s + 1)
            b.kernel(GEMM, t + 70_000 + 1000 * k, 1000, corr=corr, ext=s + 1)
    return b.trace()


def test_time_in_a_range_is_host_work_named_by_the_range():
    r = analyze_trace(_capture(), Context(catalog=load_catalog()))
    d = r.diagnosis
    # 60 ms of the range and the aten::mm's 0.1 ms are host; 9.9 ms nothing; 30 ms GEMMs
    assert d.shares_pct["host"] == pytest.approx(60.1)
    assert d.shares_pct["idle"] == pytest.approx(9.9)
    assert d.host_work.ranges == ("tokenize",)
    assert d.host_work.ranges_pct == pytest.approx(60.0)
    assert d.host_work.framework_pct == pytest.approx(0.1)
    host = next(e for e in d.evidence if e.startswith("GPU idle while the host runs"))
    assert "inside recorded ranges with nothing finer recorded 60.0%: tokenize" in host
    assert "idle with nothing recorded 9.9%" in host
    assert r.sizing.reason.startswith(
        "60% of each step the GPU waits while the host is inside recorded ranges (tokenize)"
        " with nothing finer recorded: host work a bigger GPU does not shrink")
    # launch-overhead advice is not for this time: the framework share is 0.1%
    assert "host-bound" not in {x.id for x in r.recommendations}


def test_a_range_around_the_whole_step_is_structure_not_work():
    d = analyze_trace(_capture(enclosing=True), Context()).diagnosis
    assert "main" not in d.host_work.ranges
    # without the named range, its 60 ms would be nothing recorded: "main" does not cover it
    bare = analyze_trace(_capture(first="Optimizer.step#SGD.step"), Context()).diagnosis
    assert bare.shares_pct["host"] == pytest.approx(60.1)  # recorded: host, not idle
    # a range torch records around its own Python is framework overhead, not named work
    assert bare.host_work.ranges == () and bare.host_work.framework_pct == pytest.approx(60.1)


def test_jit_compilation_in_ranges_says_start_up_not_a_smaller_gpu():
    r = analyze_trace(_capture(first="KernelExecutor::compileFusion"),
                      Context(catalog=load_catalog()))
    reason = r.sizing.reason
    assert "inside recorded ranges (KernelExecutor::compileFusion)" in reason
    assert "JIT compilation, autotuning or warm-up, which a steady-state step does not repeat" \
        in reason
    assert "nothing recorded on the host" not in reason and "smaller GPU" not in reason
