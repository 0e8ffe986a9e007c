"""Where each side's device time went, keyed so that two runs can be matched.

Role: turn one rank's normalized frames (``rightsize.traces.schema``: ``kernels`` and
``cpu_ops``) into two tables of time per step, the keys that :mod:`.diff` matches across runs:

* **ops by call path**: every kernel is charged to the host operator that launched it (the
  ``cpu_op`` with the kernel's ``external_id``), then to that operator's *outermost* ATen
  ancestor on the same thread (``aten::linear`` rather than ``aten::addmm``, ``aten::conv2d``
  rather than ``aten::cudnn_convolution``/``aten::miopen_convolution``). The key is that
  ancestor's name, prefixed by the innermost enclosing ``nn.Module`` class where the trace
  recorded Python frames (``Linear/aten::linear``). Vendor-specific kernels (cuBLAS vs
  hipBLASLt, cutlass vs CK) therefore match by the operator the model called.
* **kernels by normalized name** (:func:`rightsize.traces.kernel_names.normalize_kernel_name`).

A side without kernels (a CPU-only run) is keyed by the host time of its outermost operators.
Inputs are never mutated; outputs are ``{key: ms per step}`` dicts. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from rightsize.traces.kernel_names import normalize_kernel_name

UNATTRIBUTED = "(no host op)"
_MODULE_PREFIX = "nn.Module: "
_MODULE_INDEX = re.compile(r"_\d+$")  # "Linear_3" -> "Linear" (Kineto numbers instances)


@dataclass(frozen=True, slots=True)
class SideTimes:
    """One side's time per step by matching key; ``basis`` names what the time is."""

    ops_ms: Mapping[str, float]  # op call-path key -> ms per step
    ops_bare_ms: Mapping[str, float]  # the same without the module prefix
    kernels_ms: Mapping[str, float]  # normalized kernel name -> ms per step
    total_ms: float  # all attributed time per step (the matched_pct denominator)
    basis: str  # "kernel" (GPU kernel time) | "host" (CPU-only: outermost op host time)
    has_modules: bool
    inferred_ms: float = 0.0  # kernels with no launching op, charged by their name (see above)


def _top_level(ops: pl.DataFrame) -> pl.DataFrame:
    """Each ``cpu_op`` with the name of its outermost ``cpu_op`` ancestor on its thread
    (``top``); nesting is by time containment, ties broken by the longer op first."""
    cpu = ops.filter(pl.col("cat") == "cpu_op").select(
        "tid", "ts_ns", "dur_ns", "name", "external_id")
    return (
        cpu.sort(["tid", "ts_ns", "dur_ns"], descending=[False, False, True])
        .with_columns(
            (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
        .with_columns(
            pl.col("end_ns").cum_max().shift(1).over("tid").alias("_prev_end"))
        .with_columns(
            (pl.col("_prev_end").is_null() | (pl.col("ts_ns") >= pl.col("_prev_end")))
            .alias("is_top"))
        .with_columns(
            pl.when(pl.col("is_top")).then(pl.col("name")).otherwise(None)
            .forward_fill().over("tid").alias("top"),
            pl.when(pl.col("is_top")).then(pl.col("ts_ns")).otherwise(None)
            .forward_fill().over("tid").alias("top_ts"),
            pl.when(pl.col("is_top")).then(pl.col("end_ns")).otherwise(None)
            .forward_fill().over("tid").alias("top_end"))
        .drop("_prev_end")
    )


def _with_module(tops: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Add ``module``: the innermost ``nn.Module`` frame containing each outermost op (the
    latest-starting module frame that began before the op, if it also ends after it)."""
    mods = (
        ops.filter((pl.col("cat") == "python_function")
                   & pl.col("name").str.starts_with(_MODULE_PREFIX))
        .select(
            "tid",
            pl.col("ts_ns").alias("top_ts"),
            (pl.col("ts_ns") + pl.col("dur_ns")).alias("mod_end"),
            pl.col("name").str.strip_prefix(_MODULE_PREFIX)
            .str.replace(_MODULE_INDEX.pattern, "").alias("module"))
        .sort("top_ts")
    )
    if mods.is_empty():
        return tops.with_columns(pl.lit(None, pl.String).alias("module"))
    joined = tops.sort("tid", "top_ts").join_asof(mods.sort("tid", "top_ts"), on="top_ts",
                                                  by="tid", strategy="backward",
                                                  check_sortedness=False)
    return joined.with_columns(
        pl.when(pl.col("mod_end") >= pl.col("top_end")).then(pl.col("module"))
        .otherwise(None).alias("module")).drop("mod_end")


def _per_step(df: pl.DataFrame, key: str, steps: int) -> dict[str, float]:
    grouped = df.group_by(key).agg(pl.col("dur_ns").sum()).sort(key)
    return {str(k): ns / 1e6 / steps for k, ns in grouped.iter_rows()}


def side_times(kernels: pl.DataFrame, cpu_ops: pl.DataFrame, steps: int) -> SideTimes:
    """The time tables of one rank's frames, divided by its ``steps`` (at least 1)."""
    steps = max(steps, 1)
    tops = _top_level(cpu_ops)
    has_modules = bool(
        cpu_ops.filter(pl.col("name").str.starts_with(_MODULE_PREFIX)).height)
    if kernels.height:
        launch = (tops.filter(pl.col("external_id").is_not_null())
                  .unique("external_id", keep="first")
                  .select("external_id", "top", "top_ts", "top_end", "tid"))
        work = kernels.select("name", "dur_ns", "external_id").join(
            launch, on="external_id", how="left")
        work = work.with_columns(
            pl.col("name").map_elements(normalize_kernel_name, return_dtype=pl.String)
            .alias("kernel"))
        kernels_ms = _per_step(work, "kernel", steps)
        basis = "kernel"
    else:
        work = tops.filter(pl.col("is_top")).select(
            "dur_ns", "top", "top_ts", "top_end", "tid")
        kernels_ms, basis = {}, "host"
    attributed = _with_module(work.filter(pl.col("top").is_not_null()), cpu_ops).with_columns(
        pl.when(pl.col("module").is_not_null())
        .then(pl.col("module") + "/" + pl.col("top")).otherwise(pl.col("top")).alias("path"))
    attributed, rest, inferred_ns = _infer_orphans(attributed, work.filter(pl.col("top").is_null()))
    ops_ms = _per_step(attributed, "path", steps)
    bare_ms = _per_step(attributed, "top", steps)
    rest_ns = int(rest["dur_ns"].sum() or 0)
    if rest_ns:
        ops_ms[UNATTRIBUTED] = bare_ms[UNATTRIBUTED] = rest_ns / 1e6 / steps
    total = int(work["dur_ns"].sum() or 0) / 1e6 / steps
    return SideTimes(ops_ms, bare_ms, kernels_ms, total, basis, has_modules,
                     inferred_ns / 1e6 / steps)


def _infer_orphans(attributed: pl.DataFrame, orphans: pl.DataFrame
                   ) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Charge kernels with no launching op in the trace (launched before the capture began)
    to the op that the same normalized kernel name ran under elsewhere in the same trace
    (the op with the most of its time). Returns (attributed, still orphaned, inferred ns)."""
    if orphans.is_empty() or "kernel" not in attributed.columns:
        return attributed, orphans, 0
    home = (attributed.group_by("kernel", "path", "top").agg(pl.col("dur_ns").sum())
            .sort(["dur_ns", "path"], descending=[True, False])
            .unique("kernel", keep="first").select("kernel", "path", "top"))
    joined = orphans.drop("top").join(home, on="kernel", how="left")
    found = joined.filter(pl.col("path").is_not_null())
    cols = ["dur_ns", "kernel", "path", "top"]
    merged = pl.concat([attributed.select(cols), found.select(cols)])
    return merged, joined.filter(pl.col("path").is_null()), int(found["dur_ns"].sum() or 0)
