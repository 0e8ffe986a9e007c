"""Temporal breakdown, idle-time breakdown and kernel launch statistics as HTA defines them.

Definitions follow HolisticTraceAnalysis 0.5.0 (``breakdown_analysis.py``,
``cuda_kernel_analysis.py``; docs/metrics.md quotes them):

* Times are whole microseconds: a start is rounded up and an end down (HTA's
  ``round_down_time_stamps``), so an interval never grows.
* The last ProfilerStep is dropped when the trace has two or more: host events starting at or
  after the last step's start go, and so does every GPU activity whose launching call went.
* **Temporal breakdown** over the GPU activities (kernels, memcpy, memset, stream syncs) of the
  rank: span = last end - first start; idle = span - |union|; compute = |union of computation
  kernels| (not NCCL, not memcpy/memset, no "Sync" in the name); non-compute = |union| - compute.
* **Idle-time breakdown** per stream: each gap before a kernel/memcpy/memset is *host wait* when
  its launching call started after the previous activity on the stream ended, else *kernel wait*
  when shorter than ``consecutive_kernel_delay_us`` (30 µs), else *other*.
* **Launch statistics**: launch delay = GPU start - end of the launching call (floored at 0).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import polars as pl

from rightsize.analyzers.document.metrics import Hta, Launch, StreamIdle
from rightsize.analyzers.metrics import intervals as iv
from rightsize.traces.schema import Trace

CONSECUTIVE_KERNEL_DELAY_US = 30  # HTA default: a shorter gap between kernels is "kernel wait"
LAUNCH_RUNTIME_CUTOFF_US = 50  # HTA: launch calls longer than this are runtime outliers
LAUNCH_DELAY_CUTOFF_US = 100  # HTA: launch delays longer than this are outliers
# HTA's launch calls, plus the driver launches Triton/CUTLASS 3 use (rightsize addition).
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "hipLaunchKernel", "hipExtLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync")
# HTA's kernel_type regex: re.match, so "Memset" only counts at the start of a name.
NOT_COMPUTE = r"^(?:nccl.*Kernel|.*Memcpy|Memset|.*Sync)"
GPU_SYNC_NAMES = ("Event Sync", "Context Sync")
# The row kinds of rounded_rows: one byte a row instead of a string (millions of rows).
ROW_KINDS = pl.Enum(["kernel", "transfer", "sync", "runtime", "step"])


def rounded_rows(trace: Trace) -> pl.DataFrame:
    """All host and GPU rows HTA uses, in whole µs, with ``is_gpu`` and ``stream``."""
    def rnd(df: pl.DataFrame, gpu: bool, cat: str) -> pl.DataFrame:
        stream = pl.col("stream") if "stream" in df.columns else pl.lit(-1, pl.Int64)
        corr = pl.col("correlation") if "correlation" in df.columns else pl.lit(None, pl.Int64)
        return df.select(
            ts=-((-pl.col("ts_ns")) // 1000),  # ceil to µs
            end=(pl.col("ts_ns") + pl.col("dur_ns")) // 1000,  # floor to µs
            name=pl.col("name"),
            stream=stream.fill_null(-1).cast(pl.Int64),
            correlation=corr.fill_null(-1).cast(pl.Int64),
            kind=pl.lit(cat, dtype=ROW_KINDS),
            is_gpu=pl.lit(gpu),
        )
    syncs = rnd(trace.syncs, True, "sync").with_columns(
        is_gpu=((pl.col("stream") >= 0) & (pl.col("correlation") >= 0))
        | pl.col("name").is_in(GPU_SYNC_NAMES)
    )
    steps = trace.steps.select("ts_ns", "dur_ns", name=pl.lit("ProfilerStep#") +
                               pl.col("step").cast(pl.String))
    return pl.concat([
        rnd(trace.kernels, True, "kernel"),
        rnd(trace.transfers, True, "transfer"),
        syncs,
        rnd(trace.runtime, False, "runtime"),
        rnd(steps, False, "step"),
    ])


def kept_rows(trace: Trace, drop_last_step: bool = True) -> pl.DataFrame:
    """HTA's rows after dropping the last ProfilerStep (by launch time, see module doc)."""
    rows = rounded_rows(trace)
    step_starts = rows.filter(pl.col("kind") == "step")
    if not drop_last_step or step_starts["name"].n_unique() < 2:
        return rows
    last = int(cast(int, step_starts["ts"].max()))
    cpu = ~pl.col("is_gpu") & (pl.col("ts") < last)
    launched = rows.filter(cpu & (pl.col("correlation") >= 0))["correlation"].unique()
    # One filter, not GPU and host parts concatenated: the kept rows stay in their order, and
    # every reader takes the GPU and host rows apart again (each part in the same order).
    return rows.filter(cpu | (pl.col("is_gpu") & pl.col("correlation").is_in(launched.implode())))


def temporal_breakdown(trace: Trace, drop_last_step: bool = True,
                       rows: pl.DataFrame | None = None) -> Hta | None:
    """HTA ``get_temporal_breakdown`` for one rank; None without GPU activity.

    ``rows``: :func:`kept_rows` when the caller already has them."""
    rows = kept_rows(trace, drop_last_step) if rows is None else rows
    gpu = rows.select(pl.col("is_gpu") & (pl.col("stream") != -1)).to_series()
    k = rows.select("ts", "end", "name").filter(gpu)  # only the columns used (millions of rows)
    if k.height == 0:
        return None
    span = int(cast(int, k["end"].max())) - int(cast(int, k["ts"].min()))
    busy = _union_us(k)
    # the regex once per distinct name (its ``.*`` alternatives cost 0.4 µs a row)
    names = k["name"].unique()
    not_compute = names.filter(names.str.contains(NOT_COMPUTE)).implode()
    compute = _union_us(k.select("ts", "end").filter(~k["name"].is_in(not_compute)))
    idle = span - busy
    def pct(part_us: int) -> float | None:
        return 100.0 * part_us / span if span > 0 else None
    return Hta(idle_pct=pct(idle), compute_pct=pct(compute), non_compute_pct=pct(busy - compute),
               span_ms=span / 1000, span_us=span, idle_us=idle, compute_us=compute,
               non_compute_us=busy - compute)


def _union_us(df: pl.DataFrame) -> int:
    s = np.asarray(df["ts"].to_numpy(), dtype=np.int64)  # no copy when already int64
    e = np.asarray(df["end"].to_numpy(), dtype=np.int64)
    # HTA keeps rounded intervals that became empty or negative as their own (negative) groups;
    # the union of positive intervals is what idle time means, so those count as zero here.
    return iv.total(iv.union(iv.of(s, np.maximum(e, s))))


def idle_breakdown(
    trace: Trace, drop_last_step: bool = True,
    consecutive_kernel_delay_us: int = CONSECUTIVE_KERNEL_DELAY_US,
    rows: pl.DataFrame | None = None,
) -> list[StreamIdle]:
    """HTA ``get_idle_time_breakdown`` per stream (host wait / kernel wait / other)."""
    rows = kept_rows(trace, drop_last_step) if rows is None else rows
    launch = rows.filter(~pl.col("is_gpu") & (pl.col("correlation") >= 0)).group_by(
        "correlation").agg(ts_runtime=pl.col("ts").min())
    gpu = rows.select(
        pl.col("is_gpu") & (pl.col("stream") != -1) & pl.col("kind").is_in(["kernel", "transfer"])
    ).to_series()
    # The columns used, and the launch time looked up (one start per correlation id), as the
    # left join did, without copying every row once more (millions of kernels).
    k = rows.select("ts", "end", "stream", "correlation").filter(gpu).with_columns(
        ts_runtime=pl.col("correlation").replace_strict(
            launch["correlation"], launch["ts_runtime"], default=None,
            return_dtype=launch.schema["ts_runtime"])
    )
    if k.height == 0:
        return []
    k = k.sort(["stream", "ts"], maintain_order=True).with_columns(
        prev_end=pl.col("end").shift(1).over("stream")
    ).with_columns(gap=pl.col("ts") - pl.col("prev_end"))
    host_wait = (pl.col("ts_runtime") > pl.col("prev_end")).fill_null(False)
    kernel_wait = ~host_wait & (pl.col("gap") < consecutive_kernel_delay_us).fill_null(False)
    k = k.with_columns(
        category=pl.when(host_wait).then(pl.lit("host_wait"))
        .when(kernel_wait).then(pl.lit("kernel_wait")).otherwise(pl.lit("other"))
    )
    sums = k.group_by("stream", "category").agg(pl.col("gap").sum()).sort("stream")
    out = []
    for stream in sorted(sums["stream"].unique().to_list()):
        s = sums.filter(pl.col("stream") == stream)
        by = {r["category"]: int(r["gap"] or 0) for r in s.iter_rows(named=True)}
        out.append(StreamIdle(int(stream), by.get("host_wait", 0) / 1000,
                              by.get("kernel_wait", 0) / 1000, by.get("other", 0) / 1000))
    return out


def launch_stats(trace: Trace) -> Launch:
    """Launch delay and launch-call statistics (HTA ``get_cuda_kernel_launch_stats``)."""
    rows = rounded_rows(trace)
    cpu = rows.filter(~pl.col("is_gpu") & pl.col("name").is_in(LAUNCH_CALLS)).select(
        "correlation", cpu_ts="ts", cpu_end="end")
    gpu = rows.filter(pl.col("is_gpu") & (pl.col("stream") != -1)).select(
        "correlation", gpu_ts="ts", gpu_end="end")
    j = cpu.join(gpu, on="correlation", how="inner").with_columns(
        cpu_us=pl.col("cpu_end") - pl.col("cpu_ts"),
        gpu_us=pl.col("gpu_end") - pl.col("gpu_ts"),
        delay_us=pl.max_horizontal(pl.col("gpu_ts") - pl.col("cpu_end"), pl.lit(0)),
    )
    if j.height == 0:
        return Launch(0, None, None, None, None, 0, 0, 0)
    cut = LAUNCH_RUNTIME_CUTOFF_US
    return Launch(
        launches=j.height,
        median_launch_delay_us=float(cast(float, j["delay_us"].median())),
        p95_launch_delay_us=float(
            cast(float, j["delay_us"].quantile(0.95, interpolation="linear"))),
        median_cpu_us=float(cast(float, j["cpu_us"].median())),
        median_gpu_us=float(cast(float, j["gpu_us"].median())),
        short_kernels=j.filter((pl.col("cpu_us") <= cut) & (pl.col("gpu_us") < pl.col("cpu_us"))).height,
        runtime_outliers=j.filter(pl.col("cpu_us") > cut).height,
        launch_delay_outliers=j.filter(pl.col("delay_us") > LAUNCH_DELAY_CUTOFF_US).height,
    )
