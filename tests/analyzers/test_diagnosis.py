"""The verdict on small inline traces (tests/framebuilder.py), one per bound, with exact
shares."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.analyzers.analysis import Context, analyze_trace
from rightsize.analyzers.diagnosis.verdict import DiagnosisThresholds, diagnose
from rightsize.analyzers.metrics.steps import find_steps
from rightsize.catalog import load_catalog
from rightsize.vocab import Bound
from tests.framebuilder import FrameBuilder

GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4>()"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"


def base() -> FrameBuilder:
    b = FrameBuilder()
    b.step(1, 0, 1000)
    return b


# The share rules on traces with a handful of kernels: the kernel-count rule (which would call
# them inconclusive) is tested on its own below.
FEW_KERNELS = DiagnosisThresholds(min_kernels=1)


def run(b: FrameBuilder, **kw):
    kw.setdefault("thresholds", FEW_KERNELS)
    trace = b.trace()
    d, work = diagnose(trace, find_steps(trace), 0 if trace.kernels.height else None, **kw)
    return d, work


def shares(d) -> dict[str, float]:
    return {k: v for k, v in d.shares_pct.items() if v}


def test_compute_bound():
    b = base().kernel(GEMM, 100, 800, corr=1).op("aten::mm", 0, 100).op("aten::add", 900, 100)
    d, _ = run(b)
    assert shares(d) == {"compute": 80.0, "host": 20.0}
    assert d.bound is Bound.COMPUTE
    # 80% busy: 20 points above the 60% line (level 1.0); margin 1.0; names decided (0.7);
    # one step (0.7), all of it recorded (1.0), no variation (1.0).
    assert d.confidence == 0.49
    assert d.signal_pct == {"name": 100.0}


def test_memory_bound():
    b = base().kernel(ELEMENTWISE, 100, 800, corr=1).op("aten::add", 0, 1000)
    d, _ = run(b)
    assert shares(d) == {"memory": 80.0, "host": 20.0} and d.bound is Bound.MEMORY


def test_pcie_bound():
    b = base().memcpy("Memcpy HtoD (Pageable -> Device)", 0, 700, corr=1, nbytes=10**9)
    b.kernel(GEMM, 700, 100, corr=2).op("aten::item", 800, 200)
    d, _ = run(b)
    assert shares(d) == {"pcie": 70.0, "compute": 10.0, "host": 20.0}
    assert d.bound is Bound.PCIE
    # busy 10%: level min(1, 0.5 + 50/40) = 1; margin 0.5 + 0.5 * (70 - 20) / 70; one step.
    assert d.confidence == round((0.5 + 0.5 * 50 / 70) * 0.7, 2)


def test_dataloader_bound():
    b = base().x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                 0, 600)
    b.kernel(GEMM, 600, 300, corr=1).op("aten::mm", 900, 100)
    d, _ = run(b)
    assert shares(d) == {"dataloader": 60.0, "compute": 30.0, "host": 10.0}
    assert d.bound is Bound.DATALOADER
    assert "data-loader wait exposed 60.0%" in d.evidence[0]


def test_host_bound_tiny_kernels():
    b = base().op("aten::add", 0, 1000)
    for i in range(10):
        b.kernel(ELEMENTWISE, 100 * i + 50, 7, corr=i + 1)
    d, _ = run(b)
    assert shares(d) == {"memory": 7.0, "host": 93.0}
    assert d.bound is Bound.HOST  # a GPU busy 7% with tiny kernels is host-bound


def test_communication_bound():
    b = base().kernel(NCCL, 0, 700, corr=1, stream=20).kernel(GEMM, 600, 300, corr=2)
    b.op("aten::mm", 900, 100)
    d, _ = run(b)
    # 600-700 overlaps compute: only 600 us of communication are exposed.
    assert shares(d) == {"communication": 60.0, "compute": 30.0, "host": 10.0}
    assert d.bound is Bound.COMMUNICATION


def test_idle_with_nothing_recorded_counts_toward_host():
    b = base().kernel(GEMM, 0, 300, corr=1).op("aten::mm", 300, 400)
    d, _ = run(b)
    assert shares(d) == {"compute": 30.0, "host": 40.0, "idle": 30.0} and d.bound is Bound.HOST
    # level min(1, 0.5 + 30/40) = 1; margin 1 (no other stall); one step 0.7 x 70% recorded.
    assert d.confidence == 0.49


def test_roofline_signal_beats_names_when_shapes_are_recorded():
    # A "GEMM" kernel launched by a skinny matmul is memory-bound on an H100 (ridge ~295 FLOP/B).
    b = base()
    b.op("aten::mm", 0, 100, ext=7, **{"Input Dims": [[8, 4096], [4096, 4096]],
                                      "Input type": ["c10::BFloat16", "c10::BFloat16"]})
    b.kernel(GEMM, 100, 800, corr=1, ext=7).op("aten::add", 900, 100)
    h100 = load_catalog().gpu("H100 SXM")
    from rightsize.analyzers.diagnosis.advise import ridge_for
    d, work = run(b, ridge=ridge_for(h100))
    assert work.select("work", "signal", "precision").row(0) == ("memory", "roofline", "bf16")
    assert shares(d) == {"memory": 80.0, "host": 20.0} and d.bound is Bound.MEMORY


def test_ncu_signal_decides_first():
    b = base().kernel(ELEMENTWISE, 100, 800, corr=1).op("aten::add", 0, 1000)
    ncu = pl.DataFrame({"kernel_name_normalized": ["vectorized_elementwise_kernel<4>"],
                        "sm_throughput_pct": [91.0], "memory_throughput_pct": [40.0]})
    d, work = run(b, ncu=ncu)
    assert work.select("work", "signal").row(0) == ("compute", "ncu")
    assert d.bound is Bound.COMPUTE and d.confidence == 0.7  # ncu 1.0 x one step 0.7


MS = 1000  # FrameBuilder times are in microseconds


def test_counters_signal_and_nvml_side_by_side():
    b = FrameBuilder()
    b.step(1, 0, 2000 * MS)
    b.kernel(GEMM, 100 * MS, 1600 * MS, corr=1).op("aten::mm", 0, 1000)
    # utilization.gpu changes at every sample, 300 ms apart: a 300 ms driver period, so a value
    # counts from 600 ms into the step (t - 2 periods) to its end; a GPM value counts when the
    # time since the row before lies inside the step
    t_ms = [100, 400, 700, 1000, 1300, 1600, 1900, 2200]
    samples = pl.DataFrame({
        "t_ns": [t * 1_000_000 for t in t_ms], "gpu_index": [0] * 8,
        "gpu_util_pct": [0.0, 50.0, 100.0, 90.0, 100.0, 80.0, 30.0, 0.0],
        "gpm_sm_util_pct": [5.0, 90.0, 90.0, 80.0, 80.0, 70.0, 40.0, 0.0],
        "gpm_tensor_util_pct": [0.0, 10.0, 20.0, 10.0, 20.0, 10.0, 20.0, 0.0],
        "gpm_dram_bw_util_pct": [0.0, 70.0, 60.0, 70.0, 60.0, 70.0, 60.0, 0.0],
    })
    d, work = run(b, samples=samples)
    assert work.select("work", "signal").row(0) == ("memory", "counters")
    nv = d.utilization.nvml
    assert (nv.samples, nv.gpm_samples, nv.utilization_period_ms) == (5, 6, 300.0)
    assert (nv.gpu_util_pct_mean, nv.gpu_util_pct_peak) == (80.0, 100.0)
    assert nv.gpm_sm_util_pct_mean == pytest.approx(75.0)  # 90 90 80 80 70 40
    assert nv.counter("gpm_sm_util", "peak") == 90.0
    assert d.utilization.trace.gpu_busy_pct_mean == 80.0
    assert "NVML utilization.gpu 80.0% (peak 100%, 5 samples averaging step time only) vs " \
        "80.0% of the step with a kernel running in the trace" in d.evidence


def test_steps_recorded_back_to_back_are_one_window_for_the_counters():
    # An H100 inference window: 341 steps with microsecond gaps between them.
    b = FrameBuilder()
    for n in range(20):  # 100 ms steps, 5 us apart
        b.step(n, n * 100 * MS + 5, 100 * MS - 5)
        b.kernel(GEMM, n * 100 * MS + 10, 80 * MS, corr=n + 1)
    samples = pl.DataFrame({"t_ns": [500_000_000, 1_000_000_000, 1_500_000_000],
                            "gpu_index": [0] * 3, "gpu_util_pct": [80.0] * 3})
    d, _ = run(b, samples=samples)
    assert d.utilization.nvml.samples == 3  # each averages time across several steps


def test_counter_samples_of_a_short_window_do_not_count():
    # Seen on an H100: 3 steps of 10.6 ms held one utilization.gpu sample (1%, the time before
    # the window) against 99.4% busy in the trace, and the evidence called them in disagreement.
    b = base().kernel(GEMM, 100, 800, corr=1).op("aten::mm", 0, 1000)
    samples = pl.DataFrame({"t_ns": [600_000], "gpu_index": [0], "gpu_util_pct": [1.0],
                            "gpm_sm_util_pct": [19.9], "gpm_from_ns": [-99_400_000]})
    d, _ = run(b, samples=samples)
    assert d.utilization.nvml.to_json() == {"samples": 0}
    assert not any("NVML" in e for e in d.evidence)


def test_cpu_only_trace_splits_host_op_self_time():
    b = FrameBuilder(devices=[])
    b.step(1, 0, 1000)
    b.op("aten::linear", 0, 600, ext=1)
    b.op("aten::addmm", 50, 500, ext=2, **{"Input Dims": [[512], [512, 512], [512, 512]],
                                          "Input type": ["float", "float", "float"]})
    b.op("aten::empty", 60, 5)  # tiny: dispatch overhead
    b.op("aten::relu", 600, 300, ext=3, **{"Input Dims": [[512, 512]], "Input type": ["float"]})
    d, _work = run(b)
    assert d.device == "cpu"
    # addmm self time 495 us compute; relu 300 memory; linear's own 100 us and the tiny op host.
    assert shares(d) == {"compute": 49.5, "memory": 30.0, "host": 10.5, "idle": 10.0}
    assert d.bound is Bound.COMPUTE


def test_recommendations_and_sizing_in_the_analysis():
    b = base().x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                 0, 600)
    for i in range(20):  # enough kernels for a verdict
        b.kernel(GEMM, 600 + 15 * i, 15, corr=i + 1)
    b.op("aten::mm", 900, 100)
    b.memory(10, 1 << 30, 1 << 30, 2 << 30)
    trace = b.trace()
    r = analyze_trace(trace, Context(catalog=load_catalog()))
    ids = [x.id for x in r.recommendations]
    # data-loader-bound: the idle GPU is the loader's doing, so no "raise the batch size" rule
    assert ids[0] == "dataloader-stall" and "low-gpu-utilization" not in ids
    assert r.sizing is not None and r.sizing.current == "H100 SXM"
    assert "data" in r.sizing.reason.lower()


@pytest.mark.parametrize("measure,value,rule", [
    ("dataloader_pct", 5.1, "dataloader-stall-cpu"), ("gpu_util_pct", 49.0, "low-gpu-utilization"),
    ("communication_pct", 10.5, "exposed-communication"),
    ("memory_of_device_pct", 95.0, "memory-near-capacity"),
    ("fp32_matmul_pct", 20.0, "fp32-without-tensor-cores"), ("host_wait_pct", 25.0, "host-wait"),
    ("kernel_wait_pct", 11.0, "kernel-wait"), ("pageable_h2d_copies", 3.0, "pageable-copies"),
    ("sync_idle_pct", 6.0, "sync-points"), ("sm_activity_pct", 30.0, "low-sm-activity"),
    ("data_parallel_ops", 2.0, "data-parallel"), ("memory_pct", 55.0, "memory-bound-kernels"),
    ("framework_pct", 60.0, "host-bound"), ("pcie_pct", 12.0, "pcie-bound"),
    ("host_cpu_work_pct", 12.0, "host-cpu-work"),
])
def test_each_rule_fires_at_its_threshold(measure, value, rule):
    from rightsize.analyzers.diagnosis.advise import Measures, recommend, rules
    [fired] = recommend(Measures(**{measure: value}))
    assert fired.id == rule and rule in {r["id"] for r in rules()}
    assert "source" not in fired.evidence and f"{value:.1f} " in fired.evidence
    assert measure not in fired.evidence  # read by people: no internal key
    at_threshold = next(r["threshold"] for r in rules() if r["id"] == rule)
    assert recommend(Measures(**{measure: float(at_threshold)})) == []


def test_recommendations_ordered_by_verdict_then_impact():
    from rightsize.analyzers.diagnosis.advise import Measures, recommend
    m = Measures(dataloader_pct=20.0, gpu_util_pct=40.0, gpu_idle_pct=60.0,
                 host_idle_pct=39.0, pageable_h2d_copies=12.0, pcie_pct=1.0)
    assert [r.id for r in recommend(m)] == ["low-gpu-utilization", "dataloader-stall",
                                            "pageable-copies"]
    assert recommend(m, Bound.DATALOADER)[0].id == "dataloader-stall"


def test_the_rule_catalog_names_only_measures_that_exist():
    from rightsize.analyzers.diagnosis.advise import (
        CODE_MEASURES,
        MEASURES,
        RULE_MEASURE_KEYS,
        Measures,
        check_rules,
        rules,
    )
    used = {r[k] for r in rules() for k in RULE_MEASURE_KEYS if k in r}
    # every measure is read by some rule (or by every what-if), every rule's measure exists
    assert used | CODE_MEASURES == MEASURES and not used & CODE_MEASURES
    with pytest.raises(ValueError, match="'x': impact 'gpu_busy' is not a measure"):
        check_rules([{"id": "x", "measure": "sync_idle_pct", "op": ">", "impact": "gpu_busy"}])
    with pytest.raises(TypeError):
        Measures(gpu_busy_pct=1.0)  # type: ignore[call-arg]


def test_mostly_unrecorded_step_is_inconclusive():
    b = base().kernel(GEMM, 0, 300, corr=1).op("aten::mm", 300, 100)
    d, _ = run(b)
    assert shares(d) == {"compute": 30.0, "host": 10.0, "idle": 60.0}
    assert d.bound is Bound.INCONCLUSIVE and d.confidence is None
    first = d.evidence_items[0]
    assert (first.share, first.value, first.threshold) == ("coverage", 40.0, 50.0)
    # host ops are in the trace: the empty time is the job's own waiting, not a missing record
    assert first.text.endswith(
        "; the host side is recorded, so the job spent that time outside PyTorch ops: sleeping, "
        "waiting for input or requests, I/O, or Python that calls no op; record Python "
        "functions too (with_stack=True; rightsize run --with-stack) to see which, or profile "
        "a part of the job that keeps the device busy")


@pytest.mark.parametrize(("extra", "ending"), [
    (None, ("record the host side too (activities=[CPU, CUDA]) and profile steady-state "
            "steps, e.g. steps 10-15 with torch.profiler.schedule(wait=1, warmup=9, active=5)")),
    ("python_function", ("I/O (no recorded Python function covers it either); profile a part "
                         "of the job that keeps the device busy, or size for the work it has")),
])
def test_what_to_record_follows_what_the_trace_holds(extra, ending):
    b = base().kernel(GEMM, 0, 300, corr=1)
    if extra:
        b.op("aten::mm", 300, 100).x(extra, "infer.py(30): main", 300, 100)
    d, _ = run(b)
    assert d.bound is Bound.INCONCLUSIVE
    assert d.evidence_items[0].text.endswith(ending)


def test_a_blocking_python_call_is_waiting_not_host_work():
    # samples/infer.py recorded with --with-stack: main() spans the step, time.sleep most of it;
    # counting main() as host work read 97% framework overhead, a confident host-bound verdict.
    b = base().kernel(GEMM, 0, 300, corr=1).op("aten::mm", 300, 100)
    b.x("python_function", "infer.py(30): main", 0, 1000)
    b.x("python_function", "<built-in function sleep>", 400, 550)
    b.x("python_function", "<built-in method acquire of _thread.lock object at 0x7f>", 950, 40)
    d, _ = run(b)
    assert shares(d) == {"compute": 30.0, "host": 11.0, "idle": 59.0}
    assert d.bound is Bound.INCONCLUSIVE
    assert d.evidence_items[0].text == (
        "inconclusive: 59.0% of the step has no work recorded (device idle, host idle or in a "
        "blocking call): recorded activity covers 41.0%, below the 50% a verdict needs; the job "
        "waits in blocking calls (sleep, locks, select, sockets) for 59.0% of the step, so the "
        "device has no work then; profile a part of the job that keeps the device busy, or size "
        "for the work it has")
    assert any(e.endswith("idle with nothing recorded or waiting (59.0% in sleep, locks, "
                          "select) 59.0%") for e in d.evidence)


def test_too_few_kernels_is_inconclusive_at_the_default_threshold():
    b = base().op("aten::mm", 0, 1000)
    for i in range(19):
        b.kernel(GEMM, 50 * i, 40, corr=i + 1)
    d, _ = run(b, thresholds=DiagnosisThresholds())
    assert d.bound is Bound.INCONCLUSIVE
    assert [(e.share, e.value, e.threshold) for e in d.evidence_items[:1]] == [
        ("kernels", 19.0, 20.0)]
    b.kernel(GEMM, 960, 20, corr=20)
    d, _ = run(b, thresholds=DiagnosisThresholds())
    assert d.bound is Bound.COMPUTE  # 20 kernels: judged


def test_cold_start_is_inconclusive():
    b = base().op("aten::conv2d", 0, 1000)
    b.launch("cudaFree", 0, 300, corr=100)  # context creation behind the first cudaFree
    b.kernel(GEMM, 300, 600, corr=1)
    d, _ = run(b)
    assert d.bound is Bound.INCONCLUSIVE
    e = d.evidence_items[0]
    assert (e.share, e.value, e.threshold) == ("startup", 30.0, 25.0)
    assert "cudaFree 0 ms" in e.text and "skip the first step" in e.text


def test_gpu_job_without_recorded_kernels_is_a_gpu_diagnosis():
    b = base().op("aten::mm", 0, 1000).launch("cudaLaunchKernel", 100, 10, corr=1)
    d, _ = run(b)
    assert d.device == "gpu" and d.bound is Bound.INCONCLUSIVE
    assert d.evidence_items[0].share == "kernels"
    assert "1 kernel launch calls" in d.evidence[0]


def test_nvml_and_trace_disagreeing_is_inconclusive():
    b = FrameBuilder()
    b.step(1, 0, 2000 * MS)
    b.kernel(GEMM, 100 * MS, 1600 * MS, corr=1).op("aten::mm", 0, 1000)
    # a constant value: the documented shortest driver period (1/6 s) is assumed, so samples
    # from 333 ms into the step to its end count: 400, 600, ..., 2000 ms
    samples = pl.DataFrame({"t_ns": [200_000_000 * i for i in range(1, 11)], "gpu_index": [0] * 10,
                            "gpu_util_pct": [20.0] * 10})
    d, _ = run(b, samples=samples)
    assert d.utilization.nvml.samples == 9
    assert d.bound is Bound.INCONCLUSIVE
    e = d.evidence_items[0]
    assert (e.share, e.value, e.threshold) == ("utilization", 60.0, 30.0)


def test_confidence_reflects_steps_coverage_and_variation():
    b = FrameBuilder()
    for n in range(5):
        b.step(n, 1000 * n, 1000).kernel(GEMM, 1000 * n + 100, 800, corr=n + 1)
        b.op("aten::mm", 1000 * n, 100)
    d, _ = run(b)
    # 80% busy, names 0.7; five equal steps (min(1, 0.6 + 0.1 x 5) = 1, no variation), 90%
    # recorded (the last 100 us of each step are idle): 0.7 x 1 x 0.9 x 1
    assert shares(d) == {"compute": 80.0, "host": 10.0, "idle": 10.0}
    assert d.bound is Bound.COMPUTE and d.confidence == 0.63
    assert d.evidence_items[-1].share == "steps" and d.evidence_items[-1].value == 0.0


def test_evidence_items_carry_share_value_threshold():
    b = base().x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                 0, 600)
    b.kernel(GEMM, 600, 300, corr=1).op("aten::mm", 900, 100)
    d, _ = run(b)
    first = d.evidence_items[0]
    assert (first.share, first.value, first.threshold) == ("dataloader", 60.0, 5.0)
    assert d.evidence == tuple(e.text for e in d.evidence_items)
    assert first.to_json() == {"share": "dataloader", "value": 60.0, "threshold": 5.0,
                               "text": d.evidence[0]}


CONV_BWD = {"Input Dims": [[16, 64, 16, 16], [16, 32, 16, 16], [64, 32, 3, 3]] + [[]] * 8,
            "Input type": ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList",
                                                               "Scalar", "ScalarList"],
            "Concrete Inputs": ["", "", "", "[64]", "[1, 1]", "[1, 1]", "[1, 1]", "False",
                                "[0, 0]", "1", "[True, True, True]"]}


def test_cpu_op_self_time_is_work_not_overhead():
    b = FrameBuilder(devices=[])
    b.step(1, 0, 1000)
    b.op("autograd::engine::evaluate_function: ConvolutionBackward0", 0, 500)  # dispatch
    b.op("aten::convolution_backward", 20, 470, ext=1, **CONV_BWD)  # roofline: compute
    b.op("aten::max_pool2d_with_indices", 500, 300)  # no rule: memory-bound by default
    b.op("aten::zeros", 800, 8)  # under the 10 us tiny-op threshold: dispatch
    d, work = run(b)
    assert shares(d) == {"compute": 47.0, "memory": 30.0, "host": 3.8, "idle": 19.2}
    assert d.bound is Bound.COMPUTE
    got = {r["name"]: (r["work"], r["signal"]) for r in work.to_dicts()}
    assert got == {"aten::convolution_backward": ("compute", "roofline"),
                   "aten::max_pool2d_with_indices": ("memory", "default")}
