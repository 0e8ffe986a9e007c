"""Per-workload statistics over the window: percentiles, peaks, replicas, coverage.

Inputs: a :class:`~rightsize.traces.fleet_series.SeriesSet` and an
:class:`~rightsize.analyzers.fleet_metrics.workloads.Assignment`. Output: one
:class:`Measured` per workload. Definitions (docs/fleet-metrics.md):

* percentiles are over every sample of every GPU of the workload (polars' ``linear``
  interpolation, numpy's default); memory is stated at its maximum;
* the *step* is the query's step, or for a file the median interval of the workload's series
  (of all series for a workload of single samples);
  samples are placed in steps by ``round((t - first) / step)``;
* *summed activity* adds the activity of all the workload's GPUs in each step (100 = one whole
  GPU busy); its p95 is what replicas are sized on;
* *replicas* in a step are the GPUs reporting memory (else activity) there over the GPUs per
  pod; ``replicas_now`` is their median over the steps, ``replicas_max`` their maximum;
* *coverage* is the share of the steps from the first to the last sample that have one.

All aggregation runs over every point at once, vectorized (a week of 1,000 pods at 30 s is
60 million points): the percentiles in one polars group-by on the (workload, metric) pair, the
per-step sums and the hourly means as ``np.bincount`` over dense bins. No Python loop touches a
point. Pure: inputs are not changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from rightsize.analyzers.fleet_metrics.workloads import Assignment
from rightsize.traces.fleet_series import CANONICAL, SeriesSet

ACTIVITY = ("sm_active_pct", "gpu_util_pct")  # what sizes compute, best first
# Per-step sums by np.bincount over dense bins while they number at most this many per point
# (else a hash group-by: a step far shorter than the samples' rhythm would allocate for nothing)
DENSE_BINS_PER_POINT = 4


@dataclass(frozen=True, slots=True)
class MetricStats:
    samples: int
    mean: float
    p50: float
    p95: float
    p99: float
    max: float


@dataclass(slots=True)
class Measured:
    """What the window shows for one workload (mutable while built, then only read)."""

    index: int
    first_ns: int = 0
    last_ns: int = 0
    step_s: float = 0.0
    coverage: float = 0.0
    metrics: dict[str, MetricStats] = field(default_factory=dict)
    summed_p95: dict[str, float] = field(default_factory=dict)  # per activity metric
    summed_max: dict[str, float] = field(default_factory=dict)
    by_hour: tuple[float | None, ...] = ()
    replicas_now: int = 0
    replicas_max: int = 0
    gpus_per_replica: int = 1
    pods: int = 0

    @property
    def window_s(self) -> float:
        return (self.last_ns - self.first_ns) / 1e9

    @property
    def activity_metric(self) -> str | None:
        return next((m for m in ACTIVITY if m in self.metrics), None)


def _lut(values: tuple[int, ...]) -> np.ndarray:
    return np.asarray(values, dtype=np.uint32) if values else np.zeros(0, dtype=np.uint32)


def measure(data: SeriesSet, a: Assignment, percentile: float = 0.95) -> list[Measured]:
    n = len(a.workloads)
    out = [Measured(i) for i in range(n)]
    if data.points.is_empty() or n == 0:
        return out
    # each series' (workload, metric) pair, numbered densely: every per-point lookup below is
    # one numpy take through a table of the series, never a Python loop over points
    metric_code = {m: i for i, m in enumerate(CANONICAL)}
    pair_ids: dict[tuple[int, int], int] = {}
    s_pair = _lut(tuple(pair_ids.setdefault((w, metric_code[s.metric]), len(pair_ids))
                        for w, s in zip(a.workload, data.series, strict=True)))
    pair_w = _lut(tuple(w for w, _ in pair_ids))
    pair_m = _lut(tuple(m for _, m in pair_ids))
    value = data.points.get_column("value").to_numpy()
    t = data.points.get_column("t_ns").to_numpy()
    p = s_pair[data.points.get_column("series").to_numpy()]
    finite = np.isfinite(value)
    if not finite.all():
        value, t, p = value[finite], t[finite], p[finite]
    per = (pl.DataFrame({"p": p, "t_ns": t, "value": value}).group_by("p").agg(
        pl.len().alias("n"), pl.col("value").mean().alias("mean"),
        pl.col("value").quantile(0.5, "linear").alias("p50"),
        pl.col("value").quantile(percentile, "linear").alias("p95"),
        pl.col("value").quantile(0.99, "linear").alias("p99"),
        pl.col("value").max().alias("max"),
        pl.col("t_ns").min().alias("t0"), pl.col("t_ns").max().alias("t1")))
    for pid, cnt, mean, p50, p95, p99, mx, t0, t1 in per.iter_rows():
        x = out[pair_w[pid]]
        x.metrics[CANONICAL[pair_m[pid]]] = MetricStats(cnt, mean, p50, p95, p99, mx)
        x.first_ns = t0 if not x.last_ns else min(x.first_ns, t0)
        x.last_ns = max(x.last_ns, t1)
    steps = _steps(data, a, n)
    first = np.asarray([x.first_ns for x in out], dtype=np.int64)
    step_ns = np.asarray([max(1, round(s * 1e9)) for s in steps], dtype=np.int64)
    pw = pair_w[p]
    b = (t - first[pw] + step_ns[pw] // 2) // step_ns[pw]  # each point's step
    gpus_per_pod, pods = _layout(a, n)
    sums = _per_step(p, b, value, pair_w, out, first, step_ns, percentile)
    for pid, p95, mx, gmed, gmax, nsteps in sums.iter_rows():
        x = out[pair_w[pid]]
        w = x.index
        name = CANONICAL[pair_m[pid]]
        if name in ACTIVITY:
            x.summed_p95[name], x.summed_max[name] = p95, mx
        base = "mem_used_bytes" if "mem_used_bytes" in x.metrics else x.activity_metric
        if name == base:
            x.replicas_now = max(1, math.floor(gmed / gpus_per_pod[w] + 0.5))
            x.replicas_max = max(1, math.ceil(gmax / gpus_per_pod[w]))
            expected = round(x.window_s / steps[w]) + 1 if steps[w] > 0 else nsteps
            x.coverage = min(1.0, nsteps / max(1, expected))
    _hours(p, t, value, pair_w, pair_m, out, metric_code)
    for x, s, g, n_pods in zip(out, steps, gpus_per_pod, pods, strict=True):
        x.step_s, x.gpus_per_replica, x.pods = s, g, n_pods
    return out


def _per_step(p: np.ndarray, b: np.ndarray, value: np.ndarray, pair_w: np.ndarray,
              out: list[Measured], first: np.ndarray, step_ns: np.ndarray,
              percentile: float) -> pl.DataFrame:
    """Per pair: the p95 and maximum over the steps of the summed value, the median and
    maximum of the GPUs reporting in a step, and the steps with a sample. Each pair's steps
    are a dense run of bins (0 to the workload's last step), so the per-step sums and counts
    are two ``np.bincount`` over every point at once (a hash group-by of some 20 million
    (pair, step) groups was most of the analysis); a window whose bins would far outnumber
    its points (a step much shorter than the samples' rhythm) goes through polars instead."""
    last = np.asarray([x.last_ns for x in out], dtype=np.int64)
    span = (last - first + step_ns // 2) // step_ns + 1  # steps per workload
    nb = span[pair_w].astype(np.int64)
    total = int(nb.sum())
    if DENSE_BINS_PER_POINT == 0 or total > max(DENSE_BINS_PER_POINT * len(p), 1 << 20):
        steps = (pl.DataFrame({"p": p, "b": b, "value": value}).group_by("p", "b")
                 .agg(pl.len().alias("gpus"), pl.col("value").sum().alias("sum")))
    else:
        offset = np.concatenate(([0], np.cumsum(nb)[:-1]))
        k = offset[p] + b
        gpus = np.bincount(k, minlength=total)
        summed = np.bincount(k, weights=value, minlength=total)
        seen = gpus > 0
        steps = pl.DataFrame({
            "p": pl.Series(np.repeat(np.arange(len(nb), dtype=np.uint32), nb)[seen])
            .set_sorted(),
            "gpus": gpus[seen], "sum": summed[seen]})
    return steps.group_by("p").agg(
        pl.col("sum").quantile(percentile, "linear").alias("p95"), pl.col("sum").max(),
        pl.col("gpus").median().alias("gpus_med"), pl.col("gpus").max().alias("gpus_max"),
        pl.len().alias("steps"))


def _steps(data: SeriesSet, a: Assignment, n: int) -> list[float]:
    """The query's step, else the median interval of each workload's series."""
    if data.step_s:
        return [float(data.step_s)] * n
    iv = (data.points.sort("series", "t_ns")
          .with_columns(pl.col("t_ns").diff().over("series").alias("dt"))
          .filter(pl.col("dt") > 0)
          .group_by("series").agg(pl.col("dt").median()))
    per_w: list[list[float]] = [[] for _ in range(n)]
    for s, dt in iv.iter_rows():
        per_w[a.workload[s]].append(dt / 1e9)
    # a workload of single samples: the rhythm of all the others
    every = [dt for v in per_w for dt in v]
    fallback = float(np.median(every)) if every else 0.0
    return [float(np.median(v)) if v else fallback for v in per_w]


def _layout(a: Assignment, n: int) -> tuple[list[int], list[int]]:
    """GPUs per pod (the most any pod of the workload has) and pods, from the labels."""
    gpus: dict[int, set[int]] = {}
    pods: list[set[int]] = [set() for _ in range(n)]
    for w, r, g in zip(a.workload, a.replica, a.gpu, strict=True):
        gpus.setdefault(r, set()).add(g)
        pods[w].add(r)
    per_pod = [max((len(gpus[r]) for r in p), default=1) for p in pods]
    return per_pod, [len(p) for p in pods]


def _hours(p: np.ndarray, t: np.ndarray, value: np.ndarray, pair_w: np.ndarray,
           pair_m: np.ndarray, out: list[Measured], code: dict[str, int]) -> None:
    """Mean activity per UTC hour of day, of each workload's activity metric (two bincounts
    over the points of the chosen pairs)."""
    chosen = np.zeros(len(pair_w), dtype=bool)
    for pid, (w, m) in enumerate(zip(pair_w, pair_m, strict=True)):
        am = out[w].activity_metric
        chosen[pid] = am is not None and code[am] == m
    if not chosen.any():
        return
    sel = chosen[p]
    key = pair_w[p[sel]].astype(np.int64) * 24 + (t[sel] // 3_600_000_000_000) % 24
    size = len(out) * 24
    count = np.bincount(key, minlength=size).reshape(len(out), 24)
    total = np.bincount(key, weights=value[sel], minlength=size).reshape(len(out), 24)
    for x in out:
        if x.activity_metric is not None:
            c, v = count[x.index], total[x.index]
            x.by_hour = tuple(float(v[h] / c[h]) if c[h] else None for h in range(24))
