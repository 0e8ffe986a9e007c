"""What-ifs over steady-state steps: a one-off step is left out of the removable time and
named (diagnosis/steady.py), the step's duration stays the mean of every step."""

from __future__ import annotations

import pytest

from rightsize.analyzers.analysis import Context, analyze_trace
from rightsize.analyzers.diagnosis.steady import steady
from rightsize.analyzers.thresholds import SIZING
from rightsize.catalog import load_catalog
from tests.framebuilder import FrameBuilder

GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"
MIB = 1 << 20


def _resnet_like(first_copy_us: float = 40_000, first_bytes: int = 400 * MIB):
    """Six training steps of a vision model on an H100, batches copied from pageable memory:
    each step, ``aten::copy_`` (the host blocks in ``cudaMemcpyAsync`` while the driver stages
    the batch) copies 16 MiB in 2 ms, then 30 GEMMs of 3 ms run back to back (a 92.02 ms step).
    Step 0 also copies ``first_bytes`` in ``first_copy_us`` first (a model or a cache moved to
    the GPU once, from pageable memory: a 40 ms one-off in the first profiled step)."""
    b = FrameBuilder()
    t, corr = 0.0, 0
    for s in range(6):
        start = t
        extra = first_copy_us if s == 0 else 0.0
        if extra:
            b.op("aten::copy_", t, extra + 10, ext=1000 + s)
            b.launch("cudaMemcpyAsync", t + 5, extra, corr=900 + s)
            b.memcpy("Memcpy HtoD (Pageable -> Device)", t + 5, extra, corr=900 + s,
                     nbytes=first_bytes)
            t += extra + 10
        b.op("aten::copy_", t, 2020, ext=100 + s)
        b.launch("cudaMemcpyAsync", t + 10, 2000, corr=800 + s)
        b.memcpy("Memcpy HtoD (Pageable -> Device)", t + 10, 2000, corr=800 + s,
                 nbytes=16 * MIB)
        t += 2020
        for k in range(30):
            corr += 1
            b.op("aten::mm", t + 3000 * k, 10, ext=corr)
            b.launch("cudaLaunchKernel", t + 3000 * k + 2, 5, corr=corr)
            b.kernel(GEMM, t + 3000 * k + 10, 2990, corr=corr, ext=corr)
        t += 90_000
        b.step(s, start, t - start)
    return b.trace()


def test_steady_leaves_out_a_one_off_and_keeps_a_pattern():
    durations = [100.0] * 6
    one_off = steady([42.0, 2.0, 2.1, 1.9, 2.0, 2.0], range(5, 11), durations)
    assert one_off.outliers == (5,) and one_off.ms == pytest.approx(2.0)
    assert one_off.median_ms == pytest.approx(2.0)
    # an all-reduce every fourth step of eight is the job's pattern, not two one-offs
    pattern = steady([0, 0, 0, 30, 0, 0, 0, 30], range(8), [100.0] * 8)
    assert pattern.outliers == () and pattern.ms == 7.5
    # a part that varies a little has no outlier; fewer than three steps never do
    assert steady([2.0, 2.5, 1.6], range(3), [100.0] * 3).outliers == ()
    assert steady([40.0, 2.0], range(2), [100.0] * 2).ms == 21.0


def test_the_pinning_what_if_of_a_one_off_copy_is_the_steady_steps():
    rank = analyze_trace(_resnet_like(), Context(catalog=load_catalog()))
    [pin] = [r for r in rank.recommendations if r.id == "pageable-copies"]
    step_ms = rank.diagnosis.step_ns / 6 / 1e6
    # steps 1-5: 92.02 ms; step 0: 40.01 ms more; the mean 98.688333 ms stays "now"
    assert step_ms == pytest.approx((6 * 92.02 + 40.01) / 6)
    # the copies' cost of a steady step: the 2 ms cudaMemcpyAsync that blocks the host over its
    # DMA (step 0: 42 ms); the same 16 MiB pinned, at 84% of the H100's PCIe Gen5 x16
    rate = load_catalog().gpu("H100 SXM").host_link_gbs_per_direction * SIZING.link_achievable_fraction
    pinned_ms = 16 * MIB / rate / 1e6
    # host and idle left around it: 10 us before the launch, 20 us from the DMA's end to the
    # first GEMM, 29 gaps of 10 us between GEMMs
    rest_ms = 0.010 + 0.020 + 29 * 0.010
    assert pin.what_if.step_ms == pytest.approx(step_ms - 2.0 + pinned_ms / 2 - rest_ms / 4)
    assert pin.what_if.step_ms_low == pytest.approx(step_ms - 2.0 - rest_ms / 2)
    assert pin.what_if.step_ms_high == pytest.approx(step_ms - 2.0 + 1.5 * pinned_ms)
    assert pin.what_if.outlier_steps == (0,)
    assert ("steady-state steps only: step 0 (42.0 ms) left out as a one-off of the pageable"
            " copies' cost (median 2.0 ms per step)") in pin.what_if.assumes
    # before: the mean over every step, (42 + 5 x 2) / 6 = 8.67 ms of copies removed, 8.8%
    # of the step instead of the steady 2.0%
    assert 100 * (step_ms - pin.what_if.step_ms) / step_ms < 2.0


def test_without_a_one_off_the_what_if_is_the_mean_as_before():
    rank = analyze_trace(_resnet_like(first_copy_us=0), Context(catalog=load_catalog()))
    [pin] = [r for r in rank.recommendations if r.id == "pageable-copies"]
    assert pin.what_if.outlier_steps == () and "steady-state" not in pin.what_if.assumes
    assert "outlier_steps" not in pin.what_if.to_json()


def test_a_share_what_if_takes_the_steady_steps_and_names_the_one_off():
    from rightsize.analyzers.diagnosis.advise import Measures, recommend
    from rightsize.vocab import Bound

    # six 100 ms steps on average; the loader waits 10 ms a step, 60 ms in the first
    loader = (60.0, 10.0, 10.0, 10.0, 10.0, 10.0)
    m = Measures(dataloader_pct=sum(loader) / 6, gpu_util_pct=70.0,
                 per_step_ms={"dataloader_pct": loader}, step_numbers=(1, 2, 3, 4, 5, 6),
                 step_dur_ms=(150.0, 100.0, 100.0, 100.0, 100.0, 100.0))
    [r] = recommend(m, Bound.DATALOADER, 100.0)
    # all of the steady 10 ms at best and as the point, half of it at worst (not 18.3 ms)
    assert (r.what_if.step_ms, r.what_if.step_ms_low, r.what_if.step_ms_high) == (90, 90, 95)
    assert r.what_if.outlier_steps == (1,)
    assert "step 1 (60.0 ms) left out as a one-off of the data-loader wait (median 10.0 ms" \
        in r.what_if.assumes
