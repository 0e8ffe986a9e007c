"""Training-step bounds, following the PyTorch Profiler TensorBoard plugin (torch-tb-profiler 0.4.3).

Definition (``event_parser.py`` ``_find_device_steps`` / ``_update_steps_duration``):

1. Host steps are the ``ProfilerStep#N`` ranges (for Nsight Systems, the NVTX step ranges).
   Without any, one step spans the host operators (``cpu_op``); for Nsight Systems, the GPU
   activity; without either, the span of every recorded activity.
2. Device-aware bounds: the GPU work (kernels, memcpy, memset) launched by runtime/driver calls
   that lie wholly inside a host step belongs to that step. Each step then starts no earlier than
   the previous step's adjusted end and ends no earlier than its last GPU activity.
3. Trailing steps that launched no GPU work are dropped, and so is the last step when it
   launched fewer than 80% of the previous step's GPU activities (a truncated step).

The plugin recognises runtime calls only by their 2021 category name ``Runtime``, so on every
newer trace it silently skips steps 2-3 (a documented defect). ``StepOptions.legacy_runtime_only``
reproduces that for comparison with the plugin's own numbers; by default rightsize applies the
definition with current names (``cuda_runtime``, ``cuda_driver``) too. The plugin also turns the
GPU-side copy of each ``ProfilerStep#N`` annotation into a second, overlapping step (another
defect, ``gpu_annotation_steps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl

from rightsize.analyzers.document.metrics import StepStats
from rightsize.analyzers.metrics import intervals as iv
from rightsize.traces.schema import Trace

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput

MAX_I64 = np.iinfo(np.int64).max
MIN_I64 = np.iinfo(np.int64).min
TRUNCATED_STEP_FRAC = 0.8  # tb plugin: last step with < 80% of the previous step's GPU ops is cut


@dataclass(frozen=True, slots=True)
class StepOptions:
    """Switches that reproduce the TensorBoard plugin's defects (for comparison only)."""

    legacy_runtime_only: bool = False  # plugin: only cat "Runtime" counts as a runtime call
    gpu_annotation_steps: bool = False  # plugin: GPU-side ProfilerStep#N becomes a step too


@dataclass(frozen=True, slots=True)
class Steps:
    """Final step bounds (sorted by start) and how they were found."""

    names: tuple[str, ...]
    start_ns: np.ndarray
    end_ns: np.ndarray
    source: str  # "profiler_step" | "cpu_span" | "gpu_span" | "trace_span" | "none"
    device_aware: bool  # bounds adjusted by the GPU work each step launched
    dropped: int  # trailing steps dropped (no or truncated GPU work)

    @property
    def count(self) -> int:
        return len(self.start_ns)

    @property
    def dur_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns


def find_steps(trace: Trace, options: StepOptions = StepOptions()) -> Steps:
    """Step bounds for one trace (see the module docstring for the definition)."""
    host = trace.steps.select("ts_ns", "dur_ns", name=pl.lit("ProfilerStep#") +
                              pl.col("step").cast(pl.String))
    if options.gpu_annotation_steps:
        gpu = trace.gpu_annotations.filter(
            pl.col("name").str.contains(r"^ProfilerStep#\d+$")
        ).select("ts_ns", "dur_ns", "name")
        host = pl.concat([host, gpu])
    host = host.sort("ts_ns", maintain_order=True)
    if host.height:
        starts = host["ts_ns"].to_numpy().astype(np.int64)
        ends = starts + host["dur_ns"].to_numpy().astype(np.int64)
        names = tuple(host["name"].to_list())
        source = "profiler_step"
    else:
        span = _fallback_span(trace)
        if span is None:
            return Steps((), _i64([]), _i64([]), "none", False, 0)
        starts, ends = _i64([span[0]]), _i64([span[1]])
        names = ("whole trace",)
        source = span[2]
    return _device_aware(trace, options, names, starts, ends, source)


def _fallback_span(trace: Trace) -> tuple[int, int, str] | None:
    if not trace.meta.host_ops:
        # No host operators recorded (Nsight Systems): without step ranges, one step is the
        # GPU span.
        gpu = device_activities(trace)
        if gpu.height:
            return (int(cast(int, gpu["ts_ns"].min())),
                    int(cast(int, (gpu["ts_ns"] + gpu["dur_ns"]).max())), "gpu_span")
    ops = trace.cpu_ops.filter(pl.col("cat") == "cpu_op")
    if ops.height:
        return (int(cast(int, ops["ts_ns"].min())),
                int(cast(int, (ops["ts_ns"] + ops["dur_ns"]).max())), "cpu_span")
    # No host operators (e.g. a trimmed inference trace): the span of everything recorded.
    # (The plugin uses an empty range here and reports a negative step time.)
    lo, hi = MAX_I64, MIN_I64
    for df in (trace.kernels, trace.transfers, trace.runtime, trace.cpu_ops):
        if df.height:
            lo = min(lo, int(cast(int, df["ts_ns"].min())))
            hi = max(hi, int(cast(int, (df["ts_ns"] + df["dur_ns"]).max())))
    return (lo, hi, "trace_span") if lo <= hi else None


def _i64(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def device_activities(trace: Trace) -> pl.DataFrame:
    """Kernels, memcpys and memsets with their correlation ids (the plugin's device nodes)."""
    cols = ["ts_ns", "dur_ns", "correlation"]
    return pl.concat([trace.kernels.select(cols), trace.transfers.select(cols)])


def _device_aware(
    trace: Trace, options: StepOptions, names: tuple[str, ...], starts: np.ndarray,
    ends: np.ndarray, source: str,
) -> Steps:
    runtime = trace.runtime
    if options.legacy_runtime_only and not trace.meta.legacy_names:
        runtime = runtime.clear()
    dev = device_activities(trace).with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns"))
    launches = runtime.select(
        "correlation", rt_start=pl.col("ts_ns"), rt_end=pl.col("ts_ns") + pl.col("dur_ns")
    ).filter(pl.col("correlation").is_not_null())
    matched = dev.with_row_index("dev_idx").join(launches, on="correlation", how="inner")
    n = len(starts)
    if matched.height == 0:
        return Steps(names, starts, ends, source, False, 0)
    # Runtime call -> the step that wholly contains it (steps sorted by start).
    rt_start = matched["rt_start"].to_numpy()
    rt_end = matched["rt_end"].to_numpy()
    idx = np.searchsorted(starts, rt_start, side="right") - 1
    ok = idx >= 0
    ok[ok] = rt_end[ok] <= ends[idx[ok]]
    step_of = idx[ok]
    d_start = matched["ts_ns"].to_numpy()[ok]
    d_end = matched["end_ns"].to_numpy()[ok]
    count = np.bincount(step_of, minlength=n)
    dmin = np.full(n, MAX_I64)
    dmax = np.full(n, MIN_I64)
    np.minimum.at(dmin, step_of, d_start)
    np.maximum.at(dmax, step_of, d_end)
    if not ok.any():
        return Steps(names, starts, ends, source, False, 0)
    prev_end = int(starts[0])
    if dmin[0] != MAX_I64:
        used = np.zeros(dev.height, dtype=bool)
        used[matched["dev_idx"].to_numpy()[ok]] = True
        dev_end = dev["end_ns"].to_numpy()
        before = (~used) & (dev_end < dmin[0])
        if before.any():
            prev_end = max(prev_end, int(dev_end[before].max()))
    new_s = starts.copy()
    new_e = ends.copy()
    for i in range(n):  # one iteration per step: cheap
        s = max(prev_end, int(starts[i]))
        e = int(ends[i])
        e = max(e, s) if dmin[i] == MAX_I64 else max(e, int(dmax[i]), s)
        new_s[i], new_e[i] = s, e
        prev_end = e
    keep = n
    if n > 1:
        i = n - 1
        while i >= 0 and count[i] == 0:
            i -= 1
        if i >= 0:
            keep = i + 1
            if i > 0 and count[i - 1] * TRUNCATED_STEP_FRAC > count[i]:
                keep = i
    return Steps(names[:keep], new_s[:keep], new_e[:keep], source, True, n - keep)



_SOURCE_NOTES = {
    "cpu_span": "no ProfilerStep annotations: one step spans the host operators",
    "gpu_span": "no step ranges: one step spans the GPU activity",
    "trace_span": "no ProfilerStep annotations or host operators: one step spans the trace",
    "none": "no timed events: no steps",
}


def section(rank: SectionInput) -> Steps:
    """The rank's steps (section ``step_ranges``), and notes on how they were found."""
    trace = rank.trace
    steps = find_steps(trace, rank.context.step_options)
    if trace.meta.window is not None:
        rank.note(trace.meta.window.note(Path(trace.meta.path).name))
    if steps.source in _SOURCE_NOTES:
        rank.note(_SOURCE_NOTES[steps.source])
    if steps.dropped:
        rank.note(f"dropped {steps.dropped} trailing step(s) with missing or truncated GPU work")
    return steps


def stats(rank: SectionInput) -> StepStats:
    """The document's ``steps``: count, mean/min/max and how they were found; per step, the
    diagnosis' shares (needs ``step_ranges`` and ``verdict``), summarised beyond
    ``per_step.MAX_STEPS_LISTED`` steps."""
    s = rank.steps
    if not s.count:
        return StepStats(0, None, None, None, s.source, s.device_aware, s.dropped, s.names)
    from rightsize.analyzers.metrics.per_step import summarised  # per_step imports Steps

    d = rank["verdict"].diagnosis
    durs = s.dur_ns
    rows, names = summarised(d.per_step if d is not None else (), tuple(s.names))
    return StepStats(
        s.count, float(durs.mean()) / 1e6, int(durs.min()) / 1e6, int(durs.max()) / 1e6,
        s.source, s.device_aware, s.dropped, names, per_step=rows,
        split_over_time=d.split if d is not None else None,
        gpu_ms=gpu_ms(rank.trace, s, rank.device))


def gpu_ms(trace: Trace, s: Steps, device: int | None) -> float | None:
    """The GPU part of the mean step (ms): the union of the primary device's kernel, copy and
    memset time inside each step, averaged over the steps; None without a GPU."""
    if device is None or not s.count:
        return None
    parts = [f.filter(pl.col("device") == device).select("ts_ns", "dur_ns")
             for f in (trace.kernels, trace.transfers)]
    busy = pl.concat(parts)
    spans = iv.union(iv.from_durations(busy["ts_ns"].to_numpy(), busy["dur_ns"].to_numpy()))
    return float(iv.per_window(spans, s.start_ns, s.end_ns).mean()) / 1e6
