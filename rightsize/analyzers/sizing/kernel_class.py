"""The class a kernel is projected by, the same on both vendors.

Input: the kernel's launching op (when known) and the group its name falls in
(``diagnosis/data/kernel_taxonomy.csv``: cuBLAS/CUTLASS ``sm90_xmma``/``cutlass_*`` and
rocBLAS/hipBLASLt Tensile ``Cijk_*`` are GEMMs, MIOpen ``igemm_fwd``/cuDNN ``fprop`` are
convolutions, ``flash_fwd``/ROCm Triton ``attn_fwd`` are fused attention, Triton ``triton_poi``/
``triton_red``/``triton_mm`` elementwise, reductions and GEMMs...). Output: one of
:data:`CLASSES`. Matrix classes (:data:`MATRIX`) are timed by their FLOPs and bytes against the
GEMM curve, fused attention at its own ratio to it; the others by their bytes at the class's
achieved bandwidth (``rates.Rates.class_fraction``). Pure.
"""

from __future__ import annotations

import re

from rightsize.analyzers.diagnosis.roofline import (
    ATTENTION,
    CONV_OPS,
    COPY,
    EMBEDDING,
    NORM,
    REDUCE,
    SOFTMAX,
)

GEMM, BMM, CONV, ATTENTION_CLASS = "gemm", "bmm", "conv", "attention"
SOFTMAX_CLASS, NORM_CLASS, ELEMENTWISE, STRIDED, REDUCTION, COPY_CLASS = (
    "softmax", "norm", "elementwise", "strided", "reduction", "copy")
CLASSES = (GEMM, BMM, CONV, ATTENTION_CLASS, SOFTMAX_CLASS, NORM_CLASS, ELEMENTWISE, STRIDED,
           REDUCTION, COPY_CLASS)
MATRIX = frozenset({GEMM, BMM, CONV, ATTENTION_CLASS})
STREAMING = frozenset(CLASSES) - MATRIX

# Batched matmuls: the score and context GEMMs of attention, and any bmm.
BMM_OPS = frozenset({"aten::bmm", "aten::baddbmm"})
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::matmul", "aten::linear",
                      "aten::_scaled_mm", "aten::_addmm_activation"})
# Kernel-name groups (kernel_taxonomy.csv) -> class; a group not here is elementwise.
GROUP_CLASS = {"gemm": GEMM, "convolution": CONV, "attention": ATTENTION_CLASS,
               "softmax": SOFTMAX_CLASS, "normalization": NORM_CLASS,
               "reduction": REDUCTION, "copy": COPY_CLASS, "gemv": ELEMENTWISE,
               "elementwise": ELEMENTWISE}


def op_class(op: str | None) -> str | None:
    """The class of a launching op, or None when the op says nothing (a wrapper, unknown)."""
    if op is None:
        return None
    if op in BMM_OPS:
        return BMM
    if op in GEMM_OPS:
        return GEMM
    if op in CONV_OPS:
        return CONV
    if op in ATTENTION:
        return ATTENTION_CLASS
    if op in SOFTMAX:
        return SOFTMAX_CLASS
    if op in NORM:
        return NORM_CLASS
    if op in REDUCE:
        return REDUCTION
    if op in COPY or op in EMBEDDING:
        return COPY_CLASS
    return None


# PyTorch's elementwise kernels without vector loads (the TensorIterator path for strided,
# broadcast or casting operands), named alike on CUDA and ROCm: about half the bandwidth of
# the vectorized ones on both vendors (the Qwen traces: H100 0.45 vs 0.85, MI300X 0.43 vs 0.73
# of peak, ops over 8 MiB).
STRIDED_KERNELS = re.compile(
    r"at::native::(?:\(anonymous namespace\)::)?(?:elementwise_kernel|unrolled_elementwise_kernel"
    r"|elementwise_kernel_manual_unroll)\b")


def kernel_class(op: str | None, group: str | None, name: str = "") -> str:
    """The class of a kernel: its op's where that says one, else its name's group (a GEMM op
    launching a split-K reduction is still the GEMM's work); elementwise work on PyTorch's
    non-vectorized kernels is :data:`STRIDED`."""
    klass = op_class(op) or GROUP_CLASS.get(group or "", ELEMENTWISE)
    if klass in (ELEMENTWISE, COPY_CLASS) and STRIDED_KERNELS.search(name):
        return STRIDED
    return klass
