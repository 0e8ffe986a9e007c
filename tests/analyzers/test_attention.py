"""Eager attention found by its shape (bmm -> softmax -> bmm over [B*H, L, L]) and its fused
what-if (diagnosis/attention.py), on a ViT-like trace built as torch writes it."""

from __future__ import annotations

import pytest

from rightsize.analyzers.analysis import Context, analyze_trace
from rightsize.analyzers.diagnosis.attention import fused_rates
from rightsize.catalog import load_catalog
from rightsize.traces.kineto import read_kineto
from rightsize.vocab import Bound
from tests.conftest import shared_path
from tests.tracebuilder import TraceBuilder

L, HEADS, D, HIDDEN, LAYERS = 3137, 12, 64, 768, 12  # ViT-B, patch 4 on 224 px: 56 x 56 + CLS
BF16 = "c10::BFloat16"
ALIGN1 = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_32x2_tn_align1>"
# Kernel times (us) of one layer on an H100, from bandwidth: the score tensor is 12 x 3137^2 x 2
# bytes = 236 MB; the unaligned (L odd) score GEMMs run on align1 kernels, slower than that.
EAGER = (("qk", 420), ("div", 180), ("softmax", 180), ("pv", 450))
OTHER = (("aten::addmm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 12),) * 4 \
    + (("aten::addmm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 25),) * 2 \
    + (("aten::native_layer_norm", "vectorized_layer_norm_kernel", 8),) * 2 \
    + (("aten::gelu", "vectorized_elementwise_kernel<GeluCUDAKernelImpl>", 12),
       ("aten::add", "vectorized_elementwise_kernel<CUDAFunctor_add>", 8),
       ("aten::add", "vectorized_elementwise_kernel<CUDAFunctor_add>", 8))


class _Vit:
    """One step of LAYERS layers: the host launches ahead, the GPU runs the kernels back to back."""

    def __init__(self, fused: bool | tuple[int, ...] = False) -> None:
        self.b = TraceBuilder()
        self.fused = fused
        self.host, self.gpu, self.n = 10.0, 100.0, 0

    def kernel(self, op: str, kernel: str, dur: float, dims=None, types=None, parent=None):
        """``parent``: (name, dims, types) of the op that calls ``op`` (aten::matmul)."""
        self.n += 1
        start = self.host
        if parent is not None:
            self.b.op(parent[0], start, 12, ext=self.n + 10_000, **{
                "Input Dims": parent[1], "Input type": parent[2]})
            start += 1
        args = {} if dims is None else {"Input Dims": dims, "Input type": types}
        self.b.op(op, start, 8, ext=self.n, **args)
        self.b.launch("cudaLaunchKernel", start + 2, 4, corr=self.n, ext=self.n)
        self.b.kernel(kernel, self.gpu, dur, corr=self.n, ext=self.n)
        self.host += 14
        self.gpu += dur + 1

    def attention(self, layer: int) -> None:
        q = [1, HEADS, L, D]
        fused = self.fused is True or (isinstance(self.fused, tuple) and layer in self.fused)
        if fused:
            self.kernel("aten::_flash_attention_forward",
                        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", 90,
                        [[1, L, HEADS, D]] * 3, [BF16] * 3)
            return
        scores = [1, HEADS, L, L]
        start = self.host - 1
        self.kernel("aten::bmm", ALIGN1, dict(EAGER)["qk"], [[HEADS, L, D], [HEADS, D, L]],
                    [BF16, BF16], parent=("aten::matmul", [q, [1, HEADS, D, L]], [BF16, BF16]))
        self.kernel("aten::div", "vectorized_elementwise_kernel<BUnaryFunctor<DivFunctor>>",
                    dict(EAGER)["div"], [scores, []], [BF16, "Scalar"])
        self.kernel("aten::_softmax", "cunn_SoftMaxForward<8, BFloat16>", dict(EAGER)["softmax"],
                    [scores, [], []], [BF16, "Scalar", "Scalar"],
                    parent=("aten::softmax", [scores, [], []], [BF16, "Scalar", ""]))
        self.kernel("aten::bmm", ALIGN1, dict(EAGER)["pv"], [[HEADS, L, L], [HEADS, L, D]],
                    [BF16, BF16], parent=("aten::matmul", [scores, q], [BF16, BF16]))
        # with_stack: the module's Python frame around the chain (HF ViT's eager attention)
        self.b.x("python_function", f"nn.Module: ViTSelfAttention_{layer}", start,
                 self.host - start)

    def build(self, tmp_path):
        for layer in range(LAYERS):
            for op, kernel, dur in OTHER[:4]:
                self.kernel(op, kernel, dur)
            self.attention(layer)
            for op, kernel, dur in OTHER[4:]:
                self.kernel(op, kernel, dur)
        self.b.step(1, 0, self.gpu + 10)  # the step ends with its last kernel
        return analyze_trace(read_kineto(self.b.write(tmp_path / "vit.json")),
                             Context(catalog=load_catalog()))


def _rule(rank):
    return next((r for r in rank.recommendations if r.id == "eager-attention"), None)


# FLOPs of one chain: Q K^T and P V, each 2 x 12 x 3137 x 3137 x 64
CHAIN_FLOPS = 2 * 2 * HEADS * L * L * D  # 30,230,842,368


def test_unfused_vit_attention_is_advised_with_a_fused_what_if(tmp_path):
    rank = _Vit().build(tmp_path)
    assert rank.diagnosis.bound in (Bound.MEMORY, Bound.COMPUTE)
    r = _rule(rank)
    assert r is not None
    eager_us = sum(d for _, d in EAGER) * LAYERS  # 1,230 us a layer
    other_us = sum(d for _, _, d in OTHER) * LAYERS
    assert r.evidence.startswith(f"{100 * eager_us / (eager_us + other_us):.1f} % of kernel time")
    assert r.evidence.startswith("89.7 % of kernel time (> 20;")
    # the score tensor [1, 12, 3137, 3137] in bf16, scores and probabilities: 472,356,912 bytes
    assert ("over 3,137 tokens in ViTSelfAttention (bmm -> softmax -> bmm on [1, 12, 3137, 3137] scores, 12 a step;"
            " a fused kernel never writes those scores and probabilities: 0.44 GiB per layer"
            " less memory at once)") in r.detail
    h100 = fused_rates()["H100 SXM"]
    step_ms = rank.diagnosis.step_ns / 1e6
    flops = CHAIN_FLOPS * LAYERS  # 362,770,108,416 a step
    fused_ms = flops / (h100["tflops"] * 1e12) * 1e3  # 4.019 ms at 90.26 TFLOP/s
    best_ms = flops / (0.35 * 989.4e12) * 1e3  # 1.048 ms
    after = step_ms - eager_us / 1e3
    assert r.what_if.step_ms == pytest.approx(after + fused_ms)
    assert r.what_if.step_ms_low == pytest.approx(after + best_ms)
    assert r.what_if.step_ms_high == pytest.approx(after + 2 * fused_ms)
    assert "362.8 GFLOP a step run at 90 TFLOP/s, measured for the H100 SXM's fused kernel" \
        in r.what_if.assumes
    assert "tracelens-h100-Qwen_Qwen1.5-0.5B-Chat" in r.what_if.assumes


def test_fused_attention_is_not_advised(tmp_path):
    rank = _Vit(fused=True).build(tmp_path)
    assert _rule(rank) is None


def test_a_fused_layer_elsewhere_does_not_hide_eager_ones(tmp_path):
    """Layers 0-5 on SDPA, 6-11 eager: the eager chains still count (the old rule saw the fused
    op and counted nothing)."""
    rank = _Vit(fused=tuple(range(6))).build(tmp_path)
    r = _rule(rank)
    assert r is not None and "6 a step" in r.detail


def test_the_shared_sdpa_traces_get_no_attention_advice():
    """The TraceLens ViT and BERT run flash/attn_fwd kernels: no softmax op, no chain."""
    for name in ("tracelens-h100-Falconsai_nsfw_image_detection__1016002.json.gz",
                 "tracelens-mi300-Falconsai_nsfw_image_detection__1016002.json.gz",
                 "tracelens-h100-Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"):
        rank = analyze_trace(read_kineto(shared_path("traces", "kineto", name)),
                             Context(catalog=load_catalog()))
        assert _rule(rank) is None, name
