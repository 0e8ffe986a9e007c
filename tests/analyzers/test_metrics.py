"""Every metric on the hand-built two-step trace, against values worked out by hand.

The trace (tests/tracebuilder.py two_step_trace, built as inline frames), in µs: steps [1000,2000) and [2000,3000);
kernels gemm [1250,1650) (2.0 blocks/SM, occ 50), nccl [1600,1800) on stream 20 (0.5, 25),
elementwise [2100,2300) (0.25, 10), reduce [2310,2410) (1.5, 30); memcpy HtoD pageable
[1650,1700) 1 MB; memset [2420,2430); data loader [1000,1200); launches of 10 µs each.
"""

from __future__ import annotations

import pytest

from rightsize.analyzers.analysis import analyze_trace
from rightsize.analyzers.metrics import hta, kernels, tb_plugin
from rightsize.analyzers.metrics.steps import find_steps
from tests.framebuilder import FrameBuilder
from tests.tracebuilder import BASE_NS, two_step_trace

US = 1000  # ns per µs


@pytest.fixture(scope="module")
def trace():
    b = FrameBuilder(base_ns=BASE_NS, rank=0, world_size=2, backend="nccl")
    return two_step_trace(b).trace("two.json")


def test_steps_are_device_aware_and_complete(trace):
    steps = find_steps(trace)
    assert steps.count == 2
    assert steps.device_aware and steps.dropped == 0
    assert (steps.start_ns - BASE_NS).tolist() == [1000 * US, 2000 * US]
    assert (steps.end_ns - BASE_NS).tolist() == [2000 * US, 3000 * US]


def test_breakdown_priority_subtracted(trace):
    b = tb_plugin.breakdown(trace, find_steps(trace))
    assert b.per_step_ns["kernel"] == (400 * US, 300 * US)
    assert b.per_step_ns["memcpy"] == (50 * US, 0)
    assert b.per_step_ns["memset"] == (0, 10 * US)
    assert b.per_step_ns["communication"] == (100 * US, 0)
    assert b.per_step_ns["runtime"] == (10 * US, 20 * US)
    assert b.per_step_ns["dataloader"] == (200 * US, 0)
    assert b.per_step_ns["cpu_exec"] == (40 * US, 80 * US)
    assert b.per_step_ns["other"] == (200 * US, 590 * US)
    means = (b.kernel, b.memcpy, b.memset, b.communication, b.runtime, b.dataloader,
             b.cpu_exec, b.other)
    assert means == (0.35, 0.025, 0.005, 0.05, 0.015, 0.1, 0.06, 0.395)
    assert sum(means) == pytest.approx(b.step) and b.step == 1.0
    assert b.to_json()["kernel"] == 0.35 and "per_step_ns" not in b.to_json()


def test_gpu_metrics(trace):
    [dev] = tb_plugin.device_metrics(trace, find_steps(trace))
    assert dev.device == 0
    assert dev.gpu_util_pct == pytest.approx(42.5, abs=1e-12)  # 850 of 2000 µs
    assert dev.sm_efficiency_pct == pytest.approx(31.25, abs=1e-12)  # 625 of 2000 µs
    assert dev.achieved_occupancy_pct == pytest.approx(100 / 3, abs=1e-12)  # 30000 / 900
    assert dev.kernel_ns == 900 * US and dev.kernel_ms == 0.9
    assert dev.to_json() == {"gpu_util_pct": 42.5, "sm_efficiency_pct": 31.25,
                             "achieved_occupancy_pct": 33.3333, "kernel_ms": 0.9}


def test_hta_temporal_drops_last_step(trace):
    t = hta.temporal_breakdown(trace)
    assert (t.span_us, t.idle_us, t.compute_us, t.non_compute_us) == (550, 0, 400, 150)
    full = hta.temporal_breakdown(trace, drop_last_step=False)
    assert (full.span_us, full.idle_us, full.compute_us, full.non_compute_us) == (1180, 320, 700, 160)
    assert full.pct(full.idle_us) == pytest.approx(100 * 320 / 1180)
    assert full.to_json() == {"idle_pct": 27.1186, "compute_pct": 59.322, "non_compute_pct": 13.5593,
                              "span_ms": 1.18, "idle_by_stream": []}


def test_hta_idle_by_stream(trace):
    idle = {s.stream: s for s in hta.idle_breakdown(trace, drop_last_step=False)}
    assert (idle[7].host_wait_ms, idle[7].kernel_wait_ms, idle[7].other_ms) == (0.4, 0.02, 0)
    assert idle[20].idle_ms == 0
    kept = {s.stream: s for s in hta.idle_breakdown(trace)}
    assert kept[7].idle_ms == 0


def test_launch_stats(trace):
    s = hta.launch_stats(trace)
    assert s.launches == 6
    assert s.median_launch_delay_us == 230.0  # delays 30, 80, 190, 270, 330, 390
    assert s.median_cpu_us == 10.0 and s.median_gpu_us == 150.0
    assert (s.short_kernels, s.runtime_outliers, s.launch_delay_outliers) == (0, 0, 4)


def test_tensor_cores_plugin_list_vs_extended(trace):
    tc = kernels.tensor_cores(trace.kernels)
    assert tc.plugin_pct == 0.0  # nvjet is not on the plugin's 2021 list
    assert tc.extended_pct == pytest.approx(100 * 400 / 900)


# Kernels of samples/train_compute.py (fp32 Linear layers) as torch 2.11 ran them on an H100
H100_FP32 = {
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas": 300,  # CUDA-core FFMA: on the plugin's list (xmma_gemm)
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>("
    "cutlass_80_simt_sgemm_128x128_8x4_nt_align1::Params)": 200,
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT": 400,  # a tensor-core GEMM
    "void at::native::vectorized_elementwise_kernel<4>()": 100,
}


def test_fp32_cuda_core_gemms_are_not_tensor_core_kernels_in_the_extended_share():
    import polars as pl

    from rightsize.analyzers.diagnosis.advise import fp32_matmul_pct

    df = pl.DataFrame({"name": list(H100_FP32), "dur_ns": list(H100_FP32.values())})
    tc = kernels.tensor_cores(df)
    assert tc.plugin_pct == 30.0  # the plugin's definition, kept as it is
    assert tc.extended_pct == 40.0  # nvjet only
    assert kernels.tensor_core_flag(df).to_list() == [False, False, True, False]
    work = df.with_columns(work=pl.Series(["compute", "compute", "compute", "memory"]),
                           precision=pl.Series(["fp32", "fp32", "fp32", "fp32"]))
    assert fp32_matmul_pct(work) == 50.0  # both CUDA-core GEMMs: TF32 or bf16 would help


def test_copies_memory_and_communication(trace):
    [c] = kernels.copies(trace.transfers).to_dicts()
    assert (c["direction"], c["host_memory"], c["count"], c["bytes"]) == ("HtoD", "pageable", 1, 10**6)
    assert c["gbps"] == 20.0
    [m] = kernels.memory_peaks(trace.memory)
    assert (m.device, m.peak_allocated_bytes, m.peak_reserved_bytes, m.relative) == (0, 5000, 8192, False)
    comm = kernels.communication(trace.kernels, BASE_NS + 1000 * US, BASE_NS + 3000 * US)
    assert (comm.time_ms, comm.overlapped_ms, comm.overlap_pct) == (0.2, 0.05, 25.0)


def test_top_kernels_and_ops(trace):
    top = kernels.top_kernels(trace.kernels)
    assert top["name"][0].startswith("nvjet") and top["total_ns"][0] == 400 * US
    ops = {r["name"]: r for r in kernels.top_ops(trace).to_dicts()}
    assert ops["aten::mm"]["gpu_ns"] == 400 * US
    assert ops["aten::add"]["gpu_ns"] == 200 * US
    assert ops["aten::copy_"]["gpu_ns"] == 0
    assert ops["aten::mm"]["host_ns"] == 100 * US


def test_summary_has_no_notes_for_complete_trace(trace):
    r = analyze_trace(trace)
    assert r.primary_device == 0
    assert r.notes == ()


def test_timeline_buckets(trace):
    from rightsize.analyzers.metrics.timeline import timeline
    tl = timeline(trace.kernels, BASE_NS + 1000 * US, BASE_NS + 3000 * US)
    assert tl.bucket_ms == 0.01 and len(tl.trace_busy_pct) == 200
    assert tl.t_ms[:3] == (0.0, 0.01, 0.02) and tl.to_json()["t_ms"][199] == 1.99
    assert sum(tl.trace_busy_pct) == pytest.approx(8500.0)  # 850 µs busy of 2000
    assert (tl.trace_busy_pct[24], tl.trace_busy_pct[25], tl.trace_busy_pct[79],
            tl.trace_busy_pct[80]) == (0.0, 100.0, 100.0, 0.0)
    assert tl.nvml_gpu_util_pct is None
