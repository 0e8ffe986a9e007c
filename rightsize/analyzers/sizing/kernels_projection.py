"""The measured step's kernels as units of work, and their projection onto another GPU.

Input: classified device work (``diagnose``'s kernels: ``name``, ``dur_ns``, ``external_id``,
``op``, ``flops``, ``bytes``, ``precision``, ``work``). Output: :class:`KernelWork` items, one per
group of kernels with one shape (an op's kernels together when its FLOPs and bytes are known
from recorded shapes; otherwise by kernel group and class), and :func:`project_kernels_ms`,
which projects each with :func:`rightsize.analyzers.sizing.rates.project_kernel_s`.
Communication kernels are left out (their scaling is the sizing's decision). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from rightsize.analyzers.metrics.precision import with_precision
from rightsize.analyzers.sizing.kernel_class import (
    ATTENTION_CLASS,
    COPY_CLASS,
    ELEMENTWISE,
    GEMM,
    MATRIX,
    STRIDED,
    STRIDED_KERNELS,
    kernel_class,
)
from rightsize.analyzers.sizing.rates import Rates, project_kernel_s
from rightsize.catalog import Gpu
from rightsize.vocab import WorkClass

# Kernels of unknown size whose names say matrix or attention math scale as GEMMs, whatever
# their class (a latency-limited attention kernel is still tensor-core work).
MATRIX_NAMES = r"gemm|attn|attention|flash|fmha|cijk_|xmma|conv|mfma|wgmma"
ATTENTION_NAMES = r"attn|attention|flash|fmha"


@dataclass(frozen=True, slots=True)
class KernelWork:
    """Kernels with one shape: ``count`` instances per step taking ``dur_ns`` in all."""

    name: str  # the first kernel's name (or the group)
    kind: str  # its kernel_class (gemm, bmm, conv, attention, softmax, norm, elementwise...)
    flops: float | None  # per instance; None: unknown (scaled by kind)
    bytes: float | None
    precision: str
    dur_ns: float  # all instances of one step together
    count: float  # instances per step
    kernels: int = 1  # kernels per instance (an op may launch several)
    # shape taken from the same kernel's recorded op (its own op recorded none): projected as
    # that shape, but no measurement of the rates (benchmarks/fit_rates.py leaves it out)
    borrowed: bool = False


def kernel_work(work: pl.DataFrame, steps: int,
                architecture: str | None = None) -> tuple[KernelWork, ...]:
    """``work`` of ``steps`` steps as per-step :class:`KernelWork` items, longest first."""
    need = {"name", "dur_ns", "work"}
    if work.height == 0 or steps <= 0 or not need <= set(work.columns):
        return ()
    # Filters and joins copy every column they keep: keep only the ones read here.
    work = work.select(c for c in ("name", "dur_ns", "work", "precision", "flops", "bytes", "op",
                                   "external_id", "group", "ts_ns") if c in work.columns)
    w = with_precision(work, architecture).filter(
        pl.col("work") != WorkClass.COMMUNICATION.value)
    for col, dtype in (("flops", pl.Float64), ("bytes", pl.Float64), ("op", pl.String),
                       ("external_id", pl.Int64), ("group", pl.String)):
        if col not in w.columns:
            w = w.with_columns(pl.lit(None, dtype).alias(col))
    w = w.with_columns(pl.col("kernel_precision").fill_null("fp32"),
                       shaped=pl.col("flops").is_not_null() & pl.col("external_id").is_not_null()
                       & ((pl.col("flops") > 0) | (pl.col("bytes") > 0)))
    known = w.filter(pl.col("shaped"))
    per_op = (known.sort("ts_ns" if "ts_ns" in known.columns else "dur_ns")
              .group_by("external_id")
              .agg(name=pl.col("name").first(), op=pl.col("op").first(),
                   group=pl.col("group").first(),
                   flops=pl.col("flops").first(), bytes=pl.col("bytes").first(),
                   precision=pl.col("kernel_precision").first(), dur_ns=pl.col("dur_ns").sum(),
                   kernels=pl.len()))
    shaped = (per_op.group_by("name", "op", "group", "flops", "bytes", "precision", "kernels")
              .agg(pl.col("dur_ns").sum(), count=pl.len()))
    items = [KernelWork(name, kernel_class(op, group, name), flops, bytes_, prec,
                        dur / steps, cnt / steps, int(kernels))
             for name, op, group, flops, bytes_, prec, kernels, dur, cnt in shaped.iter_rows()]
    unsized, borrowed = _borrow_shapes(w.filter(~pl.col("shaped")), per_op)
    items += [KernelWork(name, kernel_class(op, group, name), flops, bytes_, prec,
                         dur / steps, cnt / steps, 1, borrowed=True)
              for name, op, group, flops, bytes_, prec, dur, cnt in borrowed.iter_rows()]
    rest = (unsized
            .with_columns(pl.coalesce("group", "name").alias("label"),
                          strided=pl.col("name").str.contains(STRIDED_KERNELS.pattern))
            .with_columns(pl.col("label").fill_null(""))
            .group_by("label", "group", "work", "kernel_precision", "strided")
            .agg(pl.col("dur_ns").sum(), count=pl.len()))
    items += [KernelWork(label, _unsized_class(label, group, cls, strided), None, None,
                         prec, dur / steps, cnt / steps)
              for label, group, cls, prec, strided, dur, cnt in rest.iter_rows()]
    return tuple(sorted(items, key=lambda k: (-k.dur_ns, k.name)))


def _borrow_shapes(unsized: pl.DataFrame,
                   per_op: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kernels still without a shape, matrix kernels given one). A matrix or attention kernel
    whose op recorded no shape (its launch fell outside the recorded ops: the Qwen traces' 73
    GEMMs and 10 flash/attn_fwd kernels of 314 per step) takes the FLOPs, bytes and precision
    of the one-kernel op of the same kernel name whose time is nearest its own: the same
    kernel at about the same time does the same work, and its FLOPs place it on the GEMM
    curve where a kernel of unknown size is taken at ``TYPICAL_GEMM_FLOPS``."""
    shapes = (per_op.filter(pl.col("kernels") == 1)
              .group_by(*_BORROWED).agg(each=pl.col("dur_ns").mean()))
    matrix = [kernel_class(op, group, name) in MATRIX
              for name, op, group in shapes.select("name", "op", "group").iter_rows()]
    shapes = shapes.filter(pl.Series(matrix, dtype=pl.Boolean))
    rows = unsized.with_row_index("row")
    best = (rows.select("row", "name", "dur_ns")
            .join(shapes, on="name")
            .with_columns(gap=(pl.col("dur_ns").cast(pl.Float64).log()
                               - pl.col("each").log()).abs())
            .sort("row", "gap", "flops")
            .unique("row", keep="first", maintain_order=True))
    borrowed = best.group_by(*_BORROWED).agg(pl.col("dur_ns").sum(), count=pl.len())
    return rows.filter(~pl.col("row").is_in(best["row"].implode())).drop("row"), borrowed


_BORROWED = ("name", "op", "group", "flops", "bytes", "precision")


def _unsized_class(label: str, group: str | None, work: str | None, strided: bool) -> str:
    """A kernel without FLOPs/bytes: its name's class; compute-bound kernels or names of
    matrix math (a latency-limited attention kernel is still tensor-core work) are GEMMs."""
    klass = kernel_class(None, group)
    if strided and klass in (ELEMENTWISE, COPY_CLASS):
        return STRIDED
    if klass in MATRIX:
        return klass
    if work == WorkClass.COMPUTE.value or re.search(MATRIX_NAMES, label.lower()):
        return ATTENTION_CLASS if re.search(ATTENTION_NAMES, label.lower()) else GEMM
    return klass


def project_kernels_ms(items: Iterable[KernelWork], src: tuple[Gpu, Rates],
                       dst: tuple[Gpu, Rates]) -> tuple[float, float]:
    """(measured, projected) kernel time per step in ms: each instance projected on its own."""
    measured = projected = 0.0
    for k in items:
        if k.count <= 0:
            continue
        each_s = k.dur_ns / k.count / 1e9
        t = project_kernel_s(each_s, src, dst, k.precision, k.flops, k.bytes, k.kind,
                             k.kernels)
        measured += k.dur_ns / 1e6
        projected += t * k.count * 1e3
    return measured, projected
