"""GPU utilization over time, downsampled for the report: trace-derived and NVML side by side.

Input: the primary device's kernels, the step window, optional GPU samples. Output:
:class:`Timeline` with at most ``MAX_BUCKETS`` equal buckets over the step window: the share of
each bucket with a kernel running (trace) and the mean NVML ``utilization.gpu`` of the samples
in it (null where no sample fell). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from rightsize.analyzers.document.sizing import Timeline
from rightsize.analyzers.metrics import intervals as iv

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput

MAX_BUCKETS = 200  # enough to see step structure; keeps the report small for any trace size


def timeline(kernels: pl.DataFrame, w0: int, w1: int, samples: pl.DataFrame | None = None,
             device: int | None = None, max_buckets: int = MAX_BUCKETS) -> Timeline | None:
    if w1 <= w0 or kernels.height == 0:
        return None
    n = max(1, min(max_buckets, (w1 - w0) // 1000))  # buckets of at least 1 µs
    bucket = -(-(w1 - w0) // n)  # ceil
    edges = w0 + bucket * np.arange(n + 1, dtype=np.int64)
    busy = iv.union(iv.from_durations(kernels["ts_ns"].to_numpy(), kernels["dur_ns"].to_numpy()))
    per = iv.per_window(busy, edges[:-1], edges[1:]) * 100.0 / bucket
    nvml = None
    if samples is not None and samples.height and "gpu_util_pct" in samples.columns:
        w = samples.filter((pl.col("gpu_index") == device) & (pl.col("t_ns") >= w0)
                           & (pl.col("t_ns") < w0 + bucket * n)
                           & pl.col("gpu_util_pct").is_not_null())
        if w.height:
            idx = ((w["t_ns"].to_numpy() - w0) // bucket).astype(np.int64)
            sums = np.bincount(idx, weights=w["gpu_util_pct"].to_numpy(), minlength=n)
            counts = np.bincount(idx, minlength=n)
            nvml = tuple(float(sums[i] / counts[i]) if counts[i] else None for i in range(n))
    return Timeline(int(bucket) / 1e6, tuple(i * int(bucket) / 1e6 for i in range(n)),
                    tuple(float(v) for v in per), nvml)


def section(rank: SectionInput) -> Timeline | None:
    """Section ``timeline`` (needs ``step_ranges``, ``device_use``): over the step window."""
    steps, device = rank.steps, rank.device
    if not steps.count:
        return None
    kernels = rank.trace.kernels.filter(pl.col("device") == device) if device is not None \
        else rank.trace.kernels.clear()
    return timeline(kernels, int(steps.start_ns[0]), int(steps.end_ns[-1]),
                    rank.context.gpu_samples, device)
