"""Tuning rules gated by the evidence: each fires only where its precondition holds, on the
right streams, names what the GPU supports, and carries a what-if that can be checked."""

from __future__ import annotations

import pytest

from rightsize.analyzers.diagnosis.advise import Measures, precision_advice, recommend
from rightsize.analyzers.document.metrics import StreamIdle
from rightsize.pipeline import analyze_document
from rightsize.vocab import Bound
from tests.conftest import shared_path
from tests.framebuilder import FrameBuilder

RESNET = "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz"
QWEN = "tracelens-h100-Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100 = [{"device": 0, "name": "NVIDIA H100 80GB HBM3", "sm_count": 132,
         "memory_bytes": 80 * 2**30, "compute_major": 9, "compute_minor": 0}]


def _ids(doc) -> list[str]:
    return [r.id for r in doc.recommendations]


def test_no_rule_fires_on_an_inconclusive_verdict():
    m = Measures(gpu_util_pct=10.0, gpu_idle_pct=90.0, framework_pct=90.0, host_wait_pct=80.0)
    # the idle GPU of a host-bound step is the host rules' to explain: no "low utilization"
    assert {r.id for r in recommend(m, Bound.HOST)} == {"host-wait", "host-bound"}
    assert recommend(m, Bound.INCONCLUSIVE) == []


def test_host_advice_only_on_a_host_bound_step():
    m = Measures(dataloader_pct=40.0, gpu_util_pct=60.0, host_wait_pct=38.4,
                 framework_pct=10.0)
    assert "host-wait" not in {r.id for r in recommend(m, Bound.DATALOADER)}
    assert "host-wait" in {r.id for r in recommend(m, Bound.HOST)}


def test_what_if_removes_the_share_the_action_addresses():
    [r] = recommend(Measures(dataloader_pct=30.0, gpu_util_pct=70.0), Bound.DATALOADER, 200.0)
    assert r.id == "dataloader-stall"
    # all of the 60 ms wait at best (and as the point), half of it at worst
    assert (r.what_if.step_ms, r.what_if.step_ms_low, r.what_if.step_ms_high) == (140, 140, 170)
    assert "all of it at best, half at worst" in r.what_if.assumes
    [h] = [x for x in recommend(Measures(framework_pct=60.0), Bound.HOST,
                                                 100.0) if x.id == "host-bound"]
    # host overhead: half of the 60 ms goes, three quarters at best, a quarter at worst
    assert (h.what_if.step_ms, h.what_if.step_ms_low, h.what_if.step_ms_high) == (70, 55, 85)
    [m] = recommend(Measures(memory_pct=80.0), Bound.MEMORY, 100.0)
    assert (m.id, m.what_if.step_ms, m.what_if.step_ms_low, m.what_if.step_ms_high) == (
        "memory-bound-kernels", 80, 60, 90)  # a quarter of 80 ms; half at best, an eighth
    assert recommend(Measures(dataloader_pct=30.0), None)[0].what_if is None  # no step given


def test_low_utilization_promises_only_the_time_the_gpu_waits_on_the_host():
    """GPU utilization 30% of a 100 ms step, 30% in exposed copies and 40% waiting on the host:
    more work per step or less host work fills the host's 40 ms (half of it, three quarters at
    best, a quarter at worst), not the copies' 30 ms, which the PCIe rule addresses."""
    m = Measures(gpu_util_pct=30.0, gpu_idle_pct=70.0, host_idle_pct=40.0, pcie_pct=30.0)
    [low] = [r for r in recommend(m, Bound.COMPUTE, 100.0) if r.id == "low-gpu-utilization"]
    assert (low.what_if.step_ms, low.what_if.step_ms_low, low.what_if.step_ms_high) == (
        80, 70, 90)
    # train_pcie.py --pin on an H200: 92.9% of the 5.2 ms step in pinned copies, the host
    # 0.6%: the GPU is idle, but not for the host, so the rule stays silent (it promised 47%)
    m = Measures(gpu_util_pct=6.7, gpu_idle_pct=93.3, host_idle_pct=0.58, pcie_pct=92.9)
    assert [r.id for r in recommend(m, Bound.PCIE, 5.217)] == ["pcie-bound"]


@pytest.mark.parametrize(("gpu", "words"), [
    ("V100 32GB SXM2", ("The Volta GPU has no bf16 or TF32: train under "
                        "torch.autocast(dtype=torch.float16) with torch.amp.GradScaler")),
    ("T4", "The Turing GPU has no bf16 or TF32"),
    ("A100 80GB SXM", "torch.autocast(dtype=torch.bfloat16) (AMP), or allow TF32"),
    ("H100 SXM", "fp8 (Transformer Engine)"),
    ("MI250X", "torch.autocast(dtype=torch.bfloat16) (AMP)."),  # CDNA 2: no TF32, no fp8
])
def test_precision_advice_names_what_the_gpu_supports(gpu, words):
    from rightsize.catalog import load_catalog

    g = load_catalog().gpu(gpu)
    assert words in precision_advice(g)
    assert ("bfloat16" in precision_advice(g)) == g.supports("bf16")
    assert ("TF32" in precision_advice(g).replace("no bf16 or TF32", "")) == g.supports("tf32")


# Every measure past its rule's threshold: each rule fires on some verdict.
EVERY_RULE = Measures(
    dataloader_pct=30.0, gpu_util_pct=20.0, gpu_idle_pct=80.0, host_idle_pct=50.0,
    communication_pct=30.0,
    memory_of_device_pct=95.0, fp32_matmul_pct=50.0, host_wait_pct=40.0, kernel_wait_pct=30.0,
    pageable_h2d_copies=5.0, sync_idle_pct=20.0, fp32_step_pct=20.0, eager_attention_pct=40.0,
    eager_attention_step_pct=20.0, sm_activity_pct=20.0, data_parallel_ops=3.0,
    memory_pct=60.0, host_cpu_work_pct=30.0, framework_pct=60.0, pcie_pct=20.0,
    repeated_work_pct=20.0)
# What a GPU may lack, the words that would advise it, and the words that say it lacks it.
LACKS = {
    "bf16": (lambda g: not g.supports("bf16"), r"bf16|bfloat16|flash_attention_2"),
    "tf32": (lambda g: not g.supports("tf32"), r"tf32|set_float32_matmul_precision"),
    "fp8": (lambda g: not g.supports("fp8"), r"fp8|transformer engine"),
    "mig": (lambda g: not g.has_mig, r"\bmig\b"),
    "nvlink": (lambda g: g.link_name != "NVLink", r"talk over nvlink|nvlink within"),
    "nvjpeg": (lambda g: g.vendor != "NVIDIA", r"decode_jpeg\(device='cuda'\)|dali"),
}
DENIED = r"\bhas no [\w ]+?(?=[:;,.)])"


def test_no_rule_advises_what_the_hardware_lacks_on_any_catalog_gpu():
    """Every rule, on every verdict it allows, on every GPU of the catalog: no advice names a
    precision, partitioning, link or decoder the GPU does not have (bf16 on a V100 was
    advised by the memory-bound rule while the precision rule said Volta has none)."""
    import dataclasses
    import itertools
    import re

    from rightsize.analyzers.diagnosis.advise import rules
    from rightsize.analyzers.job.fabric import interconnect_advice
    from rightsize.analyzers.sizing.placement import parallelism_for
    from rightsize.catalog import load_catalog

    catalog = load_catalog()
    for gpu in catalog.gpus:
        fired: dict[str, str] = {}
        for bound, m, ranks in itertools.product(
                (b for b in Bound if b != Bound.INCONCLUSIVE),
                [dataclasses.replace(EVERY_RULE, gpu_util_pct=u, repeated_work_pct=r)
                 for u in (20.0, None) for r in (20.0, None)], (8, 16)):
            words = {"interconnect": interconnect_advice(gpu, ranks)}
            for r in recommend(m, bound, 100.0, gpu, words):
                fired[f"{r.id} ({bound}, {ranks} ranks)"] = " ".join(
                    (r.title, r.detail, r.what_if.assumes if r.what_if else ""))
        for training in (True, False):
            for n in (8, 16):
                fired[f"placement of {n}"] = " ".join(parallelism_for(training, n, gpu))
        assert {k.split(" ")[0] for k in fired} >= {r["id"] for r in rules()}, gpu.name
        for lack, (lacks, advice) in LACKS.items():
            if not lacks(gpu):
                continue
            for where, text in fired.items():
                said = re.sub(DENIED, "", text).lower()
                assert not re.search(advice, said), (gpu.name, lack, where, text)


def test_pageable_rule_counts_only_large_host_to_device_copies():
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.catalog import load_catalog

    def run(direction: str, nbytes: int) -> list[str]:
        b = FrameBuilder(H100)
        b.step(1, 0, 10_000).op("aten::mm", 0, 9000, ext=1)
        for i in range(30):
            b.launch("cudaLaunchKernel", 10 + i * 300, 5, corr=i + 1)
            b.kernel("ampere_sgemm_128x64_nn", 20 + i * 300, 250, corr=i + 1, ext=1)
        b.memcpy(f"Memcpy {direction} (Pageable -> Device)" if direction == "HtoD"
                 else "Memcpy DtoH (Device -> Pageable)", 9500, 100, corr=99, nbytes=nbytes)
        rank = analyze_trace(b.trace(), Context(catalog=load_catalog()))
        return [r.id for r in rank.recommendations]
    assert "pageable-copies" in run("HtoD", 4 << 20)
    assert "pageable-copies" not in run("HtoD", 4 << 10)  # a few KiB: latency, not bandwidth
    assert "pageable-copies" not in run("DtoH", 4 << 20)  # reads back (.item(), .cpu())


def test_host_wait_is_measured_on_the_busiest_compute_stream():
    from rightsize.analyzers.diagnosis.measures import main_stream

    b = FrameBuilder()
    b.kernel("gemm", 0, 500, corr=1, stream=7).kernel("ncclDevKernel_AllReduce", 0, 900, corr=2,
                                                     stream=20)
    b.kernel("gemm", 600, 100, corr=3, stream=9)
    idle = (StreamIdle(7, 0.3, 0.0, 0.0), StreamIdle(9, 0.5, 0.0, 0.0),
            StreamIdle(20, 0.9, 0.0, 0.0))
    assert main_stream(b.trace().kernels, idle) == idle[0]


@pytest.mark.shared
def test_shared_traces_get_the_advice_a_perf_engineer_expects():
    resnet = analyze_document([shared_path("traces", "kineto", RESNET)])
    assert resnet.diagnosis.bound == Bound.DATALOADER
    assert _ids(resnet) == ["dataloader-stall", "fp32-without-tensor-cores", "pageable-copies"]
    fp32 = resnet.recommendations[1]
    assert "The Volta GPU has no bf16 or TF32" in fp32.detail and "bfloat16" not in fp32.detail
    # what-if checked against the trace: the loader wait removed leaves 118.3 ms, and the GPU's
    # own work in that step (kernels + copies + memsets, 100.6 ms) stays below it
    loader = resnet.recommendations[0].what_if
    b = resnet.metrics.breakdown_ms
    assert loader.step_ms == pytest.approx(b.step - b.dataloader, abs=1e-3)
    assert b.kernel + b.memcpy + b.memset < loader.step_ms_low < resnet.steps.mean_ms
    qwen = analyze_document([shared_path("traces", "kineto", QWEN)])
    assert _ids(qwen) == ["memory-bound-kernels"]  # no sync advice while the GPU is 91% busy
    for name in ("hta-trace_filter-sampled_rank-0.json.gz",
                 "hta-negative_queue_length_values_check-rank0.json.gz"):
        doc = analyze_document([shared_path("traces", "kineto", name)])
        for r in doc.recommendations:
            if r.id == "host-wait":  # never over 100% of the span (was 146-250%)
                assert float(r.evidence.split(" ")[0]) <= 100


@pytest.mark.shared
def test_what_ifs_are_shown_next_to_the_advice():
    from rightsize.reports.render import render

    doc = analyze_document([shared_path("traces", "kineto", RESNET)])
    shown = "if applied: 118.3 ms per step, range 109.5 ms to 148.0 ms"
    # the text gives each rule its fix, then its what-if with the assumption (on its own line)
    text = render(doc, "text")
    advice = text[text.index("  - Feed the GPU faster: the data loader stalls the step\n"):]
    advice = advice[:advice.index("\n  - ", 1)].replace("\n        ", " ")
    assert f"\n    {shown}: the data-loader wait is hidden behind the step" in advice
    page = render(doc, "html")
    assert f'<p class="whatif"><b>{shown}</b> <span class="muted">(assumes the data-loader wait' \
        in page


def _attention_trace(fused: bool):
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.catalog import load_catalog

    b = FrameBuilder(H100)
    b.step(1, 0, 30_000)
    ops = (("aten::_flash_attention_forward", "flash_fwd_kernel", 500),) if fused else (
        ("aten::bmm", "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn", 250),
        ("aten::_softmax", "softmax_warp_forward", 200),
        ("aten::bmm", "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn", 250))
    t, n = 0, 0
    for _ in range(25):
        for op, kernel, dur in (*ops, ("aten::addmm", "sm90_xmma_gemm_bf16bf16", 300)):
            n += 1
            b.op(op, t, 20, ext=n).launch("cudaLaunchKernel", t + 5, 5, corr=n)
            b.kernel(kernel, t + 10, dur, corr=n, ext=n)
            t += dur + 10
    return analyze_trace(b.trace(), Context(catalog=load_catalog()))


def test_eager_attention_gets_fused_attention_advice():
    eager = _attention_trace(fused=False)
    assert eager.diagnosis.bound in (Bound.COMPUTE, Bound.MEMORY)
    [r] = [r for r in eager.recommendations if r.id == "eager-attention"]
    # bmm 250 + softmax 200 + bmm 250 of every 1000 us of kernels
    assert r.evidence.startswith("70.0 % of kernel time (> 20;")
    assert "scaled_dot_product_attention" in r.detail and r.what_if is not None
    fused = _attention_trace(fused=True)
    assert "eager-attention" not in {r.id for r in fused.recommendations}


@pytest.mark.parametrize(("name", "group"), [
    ("attn_fwd", "attention"),  # ROCm Triton flash attention (SDPA on an MI300X)
    ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt256x128x32_wt32x32x8", "convolution"),  # MIOpen
    ("void pytorch_flash::flash_fwd_kernel<...>", "attention"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32", "gemm"),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x128x64", "gemm"),
])
def test_kernel_groups_match_across_vendors(name, group):
    import polars as pl

    from rightsize.analyzers.diagnosis.taxonomy import classify_names

    g, _ = classify_names(pl.col("name"))
    assert pl.DataFrame({"name": [name]}).select(g.alias("g"))["g"][0] == group


@pytest.mark.shared
def test_compare_h100_mi300x_matches_attention_and_convolutions():
    from rightsize.analyzers.compare import Side, compare_sides

    a = analyze_document([shared_path("traces", "kineto",
                                      "tracelens-h100-Falconsai_nsfw_image_detection__1016002.json.gz")])
    b = analyze_document([shared_path("traces", "kineto",
                                      "tracelens-mi300-Falconsai_nsfw_image_detection__1016002.json.gz")])
    groups = {g.name: g for g in compare_sides(Side("a", a), Side("b", b)).groups}
    assert groups["attention"].a_ms > 0 and groups["attention"].b_ms > 0  # never "vanished"
    assert "attn_fwd" not in groups


def test_ncu_rows_of_another_gpu_are_left_out_with_a_note():
    import polars as pl

    from rightsize.analyzers.analysis import Context, analyze_trace

    def analyzed(cc: str, name: str):
        b = FrameBuilder(H100)
        b.step(1, 0, 10_000).op("aten::add", 0, 9000)
        for i in range(25):
            b.launch("cudaLaunchKernel", 10 + i * 300, 5, corr=i + 1)
            b.kernel("vectorized_elementwise_kernel<4>", 20 + i * 300, 250, corr=i + 1)
        ncu = pl.DataFrame({"kernel_name_normalized": [name], "compute_capability": [cc],
                            "sm_throughput_pct": [91.0], "memory_throughput_pct": [40.0]})
        rank = analyze_trace(b.trace(), Context(ncu=ncu))
        return rank, set(rank.work["signal"].to_list())

    rank, signals = analyzed("12.0", "vectorized_elementwise_kernel<4>")
    assert "ncu" not in signals
    assert "the Nsight Compute rows were recorded on compute capability 12.0, the trace's GPU " \
        "is 9.0: they are not used" in " ".join(rank.notes)
    rank, signals = analyzed("9.0", "vectorized_elementwise_kernel<4>")
    assert signals == {"ncu"} and not any("Nsight Compute" in n for n in rank.notes)
    rank, signals = analyzed("9.0", "some_other_kernel")
    assert "ncu" not in signals
    assert any(n.startswith("no kernel of the trace matched a kernel of the Nsight Compute")
               for n in rank.notes)


@pytest.mark.parametrize(("name", "precision"), [
    ("volta_scudnn_128x64_relu_xregs_large_nn_v1", "fp32"),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int)", "fp32"),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float)", "fp32"),
    ("volta_hcudnn_128x128_relu_interior_nn_v1", "fp16"),
])
def test_legacy_cudnn_kernels_name_their_precision(name, precision):
    from rightsize.analyzers.metrics.precision import name_precision

    assert name_precision(name) == precision


@pytest.mark.shared
def test_the_v100_resnet_fp32_share_counts_its_legacy_convolutions():
    doc = analyze_document([shared_path("traces", "kineto", RESNET)])
    [fp32] = [r for r in doc.recommendations if r.id == "fp32-without-tensor-cores"]
    # scudnn_*/dgrad_engine<float>/wgrad_alg0_engine<float> kernels are fp32 convolutions on a
    # Volta's CUDA cores: 57.6% of kernel time, not the 21.3% the op dtypes alone gave
    assert fp32.evidence.startswith("57.6 % of kernel time")
    assert doc.precision.unknown_pct == pytest.approx(4.05, abs=0.01)  # was 55.1


def test_memory_bound_advice_on_work_already_in_16_bit():
    """The shared H100 Qwen trace runs 87% of its kernel time in bf16: "use bf16 to halve the
    bytes" was advice it had already taken."""
    from rightsize.analyzers.diagnosis.advise import fewer_bytes
    from rightsize.catalog import load_catalog

    cat = load_catalog()
    assert fewer_bytes(cat.gpu("H100 SXM"), 87.0)["fewer_bytes"].startswith(
        "move to fp8 (Transformer Engine) to halve the bytes again (the work already runs 87%")
    assert fewer_bytes(cat.gpu("A100 80GB SXM"), 87.0)["fewer_bytes"].startswith(
        "keep tensors 16-bit end to end")
    assert fewer_bytes(cat.gpu("V100 32GB SXM2"), 10.0) == {}  # fp32 work: the default words
    doc = analyze_document([shared_path("traces", "kineto", QWEN)])
    [m] = [r for r in doc.recommendations if r.id == "memory-bound-kernels"]
    assert "use bf16" not in m.detail and "fp8 (Transformer Engine)" in m.detail
