"""Split device work into compute- and memory-bound by the best signal available.

Inputs: a trace's kernels and host ops, and optionally Nsight Compute rows, a device-level
counter verdict per step window, and the ridge point (FLOPs per byte) of the traced GPU.
Output: the kernels with ``group``, ``work`` (compute | memory | communication) and ``signal``
columns. Signals, best first (``Signal``):

1. **ncu**: per kernel, matched by normalized name; the larger of Nsight Compute's SM and
   memory throughput (% of peak) decides. ncu's own ladder grades it: >= 60% of peak the unit
   is the main limiter, below the kernel is latency-limited (``thresholds.SIGNALS``), which
   lowers confidence, not the class.
2. **counters**: GPM/DCGM samples in the step window: the busier of the math pipes (tensor,
   FP) vs DRAM bandwidth utilization decides for every kernel of that window.
3. **roofline**: the kernel's launching op's FLOPs/bytes from recorded shapes
   (``rightsize.analyzers.diagnosis.roofline``) against the GPU's ridge point at the op's precision.
4. **name**: the kernel-name taxonomy (``data/kernel_taxonomy.csv``); unmatched names count as
   memory-bound (``Signal.DEFAULT``).

Communication kernels (NCCL/RCCL) are always communication. Pure: nothing read or printed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import cast

import polars as pl

from rightsize.analyzers.diagnosis import roofline
from rightsize.analyzers.diagnosis.taxonomy import classify_names
from rightsize.traces.kernel_names import normalize_kernel_name
from rightsize.vocab import Signal, WorkClass

Ridge = Callable[[str | None], float | None]  # precision -> FLOPs per byte at the ridge


def op_costs(ops: pl.DataFrame) -> pl.DataFrame:
    """external_id, op, flops, bytes, precision for ops whose shapes make a cost model."""
    return op_cost_table(ops)[0]


# The op cost table and a note per op signature whose shapes the roofline could not use.
OpCosts = tuple[pl.DataFrame, tuple[roofline.ShapeNote, ...]]


def op_cost_table(ops: pl.DataFrame) -> OpCosts:
    """:func:`op_costs` and a note per op signature whose recorded shapes the roofline could
    not use (those ops stay unclassified by the roofline)."""
    cols = ["name", "input_dims", "input_types", "concrete_inputs"]
    sig = ops.filter(pl.col("input_dims").is_not_null()).select(cols).unique()
    rows, notes = [], []
    # each distinct text parsed once (types and constants repeat across signatures); the
    # parsed lists are shared, which is safe: the roofline only reads them
    parse = lru_cache(maxsize=None)(roofline.parse_json_list)
    for name, dims, types, concrete in sig.sort(cols).iter_rows():  # once per op signature
        cost = roofline.estimate(name, parse(dims), parse(types), parse(concrete))
        if isinstance(cost, roofline.ShapeNote):
            notes.append(cost)
        elif cost is not None:
            rows.append((name, dims, types, concrete, cost.flops, cost.bytes, cost.precision))
    table = pl.DataFrame(rows, schema={"name": pl.String, "input_dims": pl.String,
                                       "input_types": pl.String, "concrete_inputs": pl.String,
                                       "flops": pl.Float64, "bytes": pl.Float64,
                                       "precision": pl.String}, orient="row")
    # Only rows that can match join on the four text keys: an id, recorded shapes (every table
    # row has them) and a modelled op name (a quarter of k170's ops; the join halves).
    costs = (
        ops.select("external_id", *cols)
        .filter(pl.col("external_id").is_not_null() & pl.col("input_dims").is_not_null()
                & pl.col("name").is_in(table["name"].unique().implode()))
        .join(table, on=cols, how="inner", nulls_equal=True)
        .select("external_id", op="name", flops="flops", bytes="bytes", precision="precision")
        .unique("external_id", keep="last")
    )
    return costs, tuple(notes)


def classify_kernels(
    kernels: pl.DataFrame,
    ops: pl.DataFrame,
    ridge: Ridge | None = None,
    ncu: pl.DataFrame | None = None,
    counters: pl.DataFrame | None = None,
    costs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Kernels with ``group``, ``work``, ``signal``, ``flops``, ``bytes``, ``precision``.

    ``counters``: rows (start_ns, end_ns, work) - a device-level class per time window.
    ``costs``: :func:`op_costs` of ``ops`` when the caller has it already.
    """
    # Name-based columns are computed once per distinct kernel name.
    group, by_name = classify_names(pl.col("name"))
    names = kernels["name"].unique().to_list()
    keys = pl.DataFrame({"name": names,
                         "key": [normalize_kernel_name(n) for n in names]},
                        schema={"name": pl.String, "key": pl.String})
    keys = keys.with_columns(group=group, name_work=by_name).drop_nulls("name")
    # Looked up column by column: a join would copy every kernel column once more (millions of
    # rows); a null or unknown name gets nulls, as from the left join.
    k = kernels.with_columns(
        pl.col("name").replace_strict(keys["name"], keys[c], default=None,
                                      return_dtype=keys.schema[c]).alias(c)
        for c in ("key", "group", "name_work")
    )
    k = k.with_columns(pl.coalesce("group", "key").alias("group"))
    # 1. Nsight Compute per kernel.
    k = k.with_columns(ncu_work=pl.lit(None, pl.String))
    if ncu is not None and ncu.height:
        per = ncu.group_by("kernel_name_normalized").agg(
            sm=pl.col("sm_throughput_pct").mean(), mem=pl.col("memory_throughput_pct").mean())
        per = per.select(
            key="kernel_name_normalized",
            ncu_work=pl.when(pl.col("sm") >= pl.col("mem")).then(pl.lit("compute"))
            .when(pl.col("mem").is_not_null()).then(pl.lit("memory")))
        k = k.drop("ncu_work").join(per, on="key", how="left")
    # 2. Counters over the step windows.
    k = k.with_columns(counter_work=pl.lit(None, pl.String))
    if counters is not None and counters.height:
        k = k.drop("counter_work").sort("ts_ns").join_asof(
            counters.sort("start_ns").select("start_ns", "end_ns", counter_work="work"),
            left_on="ts_ns", right_on="start_ns", strategy="backward",
        ).with_columns(
            counter_work=pl.when(pl.col("ts_ns") < pl.col("end_ns")).then(pl.col("counter_work"))
        ).drop("start_ns", "end_ns")
    # 3. Roofline of the launching op.
    costs = op_costs(ops) if costs is None else costs
    if costs.height == 0 or k["external_id"].null_count() == k.height:  # nothing can match
        k = k.with_columns(pl.lit(None, dtype=t).alias(c)
                           for c, t in costs.schema.items() if c != "external_id")
    else:
        k = k.join(costs, on="external_id", how="left")
    if ridge is not None and costs.height:
        precisions = [p for p in costs["precision"].unique().to_list()]
        ridge_of = pl.DataFrame({"precision": precisions,
                                 "ridge": [ridge(p) for p in precisions]},
                                schema={"precision": pl.String, "ridge": pl.Float64})
        k = k.join(ridge_of, on="precision", how="left", nulls_equal=True)
    else:
        k = k.with_columns(ridge=pl.lit(None, pl.Float64))
    roof_work = (
        pl.when(pl.col("ridge").is_null() | pl.col("bytes").is_null() | (pl.col("bytes") <= 0))
        .then(None)
        .when(pl.col("flops") / pl.col("bytes") >= pl.col("ridge")).then(pl.lit("compute"))
        .otherwise(pl.lit("memory"))
    )
    comm = pl.col("name_work") == WorkClass.COMMUNICATION.value
    k = k.with_columns(roof_work=roof_work)
    k = k.with_columns(
        work=pl.when(comm).then(pl.lit(WorkClass.COMMUNICATION.value))
        .otherwise(pl.coalesce("ncu_work", "counter_work", "roof_work", "name_work",
                               pl.lit(WorkClass.MEMORY.value))),
        signal=pl.when(comm).then(pl.lit(Signal.NAME.value))
        .when(pl.col("ncu_work").is_not_null()).then(pl.lit(Signal.NCU.value))
        .when(pl.col("counter_work").is_not_null()).then(pl.lit(Signal.COUNTERS.value))
        .when(pl.col("roof_work").is_not_null()).then(pl.lit(Signal.ROOFLINE.value))
        .when(pl.col("name_work").is_not_null()).then(pl.lit(Signal.NAME.value))
        .otherwise(pl.lit(Signal.DEFAULT.value)),
    )
    return k.drop("name_work", "ncu_work", "counter_work", "roof_work", "ridge", "key")


def counter_windows(samples: pl.DataFrame, device: int, starts: list[int],
                    ends: list[int]) -> pl.DataFrame:
    """Device-level class per step window from GPM/DCGM columns (empty when not sampled).

    The busier of the math pipes (tensor, FP32, FP16 utilization) vs DRAM bandwidth
    utilization decides: memory when DRAM is busier, compute otherwise.
    """
    math_cols = [c for c in ("gpm_tensor_util_pct", "gpm_fp32_util_pct", "gpm_fp16_util_pct")
                 if c in samples.columns]
    if not math_cols or "gpm_dram_bw_util_pct" not in samples.columns:
        return pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "work": pl.String})
    s = samples.filter(pl.col("gpu_index") == device)
    rows = []
    for a, b in zip(starts, ends, strict=True):
        w = s.filter((pl.col("t_ns") >= a) & (pl.col("t_ns") < b))
        dram = cast("float | None", w["gpm_dram_bw_util_pct"].mean())
        means = [w[c].mean() for c in math_cols]
        maths = [cast(float, m) for m in means if m is not None]
        if dram is None or not maths:
            continue
        rows.append((a, b, "memory" if dram > max(maths) else "compute"))
    return pl.DataFrame(rows, schema={"start_ns": pl.Int64, "end_ns": pl.Int64,
                                      "work": pl.String}, orient="row")
