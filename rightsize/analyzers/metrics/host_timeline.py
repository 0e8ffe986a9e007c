"""Host samples of a run over time, for the report: CPU, memory and loader workers.

Input: the host samples ``rightsize run`` records (``traces/samples.py`` ``HOST_SAMPLES``, one
row per tick of the parent's sampler) and the profiled step window. Output:
:class:`HostTimeline`, at most ``MAX_POINTS`` points (means of equal buckets when there are more
samples; the worker count is the bucket's maximum), times in seconds from the first sample, and
where the profiled steps lie in it. Pure.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from rightsize.analyzers.document.sizing import HostTimeline

MAX_POINTS = 200
SERIES = ("cpu_util_pct", "job_cpu_util_pct", "job_rss_bytes", "dataloader_workers")


def host_timeline(samples: pl.DataFrame | None, window_ns: tuple[int, int] | None = None,
                  max_points: int = MAX_POINTS) -> HostTimeline | None:
    """The samples as series (``None`` without samples)."""
    if samples is None or samples.height == 0:
        return None
    s = samples.sort("t_ns")
    t0 = int(s["t_ns"][0])
    span = int(s["t_ns"][-1]) - t0
    if s.height > max_points and span > 0:
        bucket = -(-span // max_points)
        s = (s.with_columns(b=(pl.col("t_ns") - t0) // bucket)
             .group_by("b", maintain_order=True)
             .agg(pl.col("t_ns").first(), pl.col("cpu_util_pct", "job_cpu_util_pct").mean(),
                  pl.col("job_rss_bytes").mean().round(0).cast(pl.Int64),
                  pl.col("dataloader_workers", "cpu_count").max()))
    t = tuple(round((v - t0) / 1e9, 4) for v in s["t_ns"].to_list())
    window = None
    if window_ns is not None and window_ns[1] > window_ns[0]:
        window = (round((window_ns[0] - t0) / 1e9, 4), round((window_ns[1] - t0) / 1e9, 4))
    cores = s["cpu_count"].drop_nulls()
    return HostTimeline(
        t, _floats(s["cpu_util_pct"]), _floats(s["job_cpu_util_pct"]),
        _ints(s["job_rss_bytes"]), _ints(s["dataloader_workers"]),
        int(cores.max()) if cores.len() else None, window)  # type: ignore[arg-type]


def _floats(col: pl.Series) -> tuple[float | None, ...]:
    return tuple(None if v is None or np.isnan(v) else round(float(v), 2) for v in col.to_list())


def _ints(col: pl.Series) -> tuple[int | None, ...]:
    return tuple(None if v is None else int(v) for v in col.to_list())
