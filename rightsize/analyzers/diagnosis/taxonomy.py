"""Kernel-name and op-name taxonomies, kept as data (``data/kernel_taxonomy.csv``).

The last-resort signal for splitting kernel time into compute- and memory-bound: what a kernel
does, read from its name (GEMM, convolution, attention vs elementwise, reduction, copy...).
Also the op-name classes used when a trace has no GPU (CPU-only runs).

Inputs: names; outputs: polars expressions / dicts. Pure.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

import polars as pl

from rightsize.vocab import WorkClass


@dataclass(frozen=True, slots=True)
class NameRule:
    pattern: str
    group: str
    work: WorkClass
    note: str


@cache
def name_rules() -> tuple[NameRule, ...]:
    text = resources.files("rightsize.analyzers.diagnosis").joinpath("data/kernel_taxonomy.csv").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return tuple(
        NameRule(r["pattern"], r["group"], WorkClass(r["class"]), r["note"])
        for r in csv.DictReader(io.StringIO("\n".join(lines)))
    )


def classify_names(names: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(group, class) expressions for kernel names: the first matching rule wins."""
    group: pl.Expr = pl.lit(None, pl.String)
    work: pl.Expr = pl.lit(None, pl.String)
    for rule in reversed(name_rules()):  # build inside-out so the first rule is outermost
        hit = names.str.contains(f"(?i){rule.pattern}")
        group = pl.when(hit).then(pl.lit(rule.group)).otherwise(group)
        work = pl.when(hit).then(pl.lit(rule.work.value)).otherwise(work)
    return group, work


# CPU-only traces: ops that do arithmetic-heavy work themselves (BLAS, convolution kernels).
CPU_COMPUTE_OPS = (
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv", "aten::mv",
    "aten::mkldnn_convolution", "aten::_mkldnn_matmul", "aten::mkldnn_rnn_layer",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_fft_r2c", "aten::_fft_c2c",
    "aten::slow_conv2d_forward", "aten::thnn_conv2d", "aten::_slow_conv2d_forward",
    "aten::convolution_backward", "aten::mkldnn_convolution_backward",
)
# Ops that only dispatch to another op: their own (self) time is framework overhead.
WRAPPER_OPS = frozenset({
    "aten::linear", "aten::matmul", "aten::conv1d", "aten::conv2d", "aten::conv3d",
    "aten::convolution", "aten::_convolution", "aten::scaled_dot_product_attention",
    "aten::to", "aten::contiguous", "aten::dropout", "aten::layer_norm", "aten::batch_norm",
    "aten::_batch_norm_impl_index", "aten::group_norm", "aten::softmax", "aten::log_softmax",
    "aten::cross_entropy_loss", "aten::nll_loss_nd", "aten::flatten", "aten::reshape",
    "aten::max_pool2d", "aten::max_pool1d", "aten::max_pool3d",
    # Allocation and tensor metadata (no data touched): framework work, not the op's math.
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros_like",
    "aten::as_strided", "aten::as_strided_", "aten::view", "aten::_reshape_alias", "aten::t",
    "aten::transpose", "aten::permute", "aten::expand", "aten::detach", "aten::detach_",
    "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::resize_",
    "aten::_unsafe_view", "aten::alias", "aten::lift_fresh", "aten::set_",
})
