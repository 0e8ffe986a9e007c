"""A window of steps: which steps of a big trace are read, over which span of time.

Role: a trace too big for the memory one worker may use (``traces/budget.py``), or one the user
cuts with ``--steps A-B``, is read over a window of whole steps instead of all of it. The
readers find the trace's steps first (Kineto: a first pass over the file that keeps only the
``ProfilerStep#N`` events and each event's start; Nsight Systems: the NVTX step ranges and the
start of each row of the activity tables), :func:`choose` picks the steps, and the second read
keeps only the events that overlap the window's span (:func:`keep`) and only the chosen steps.

The span of steps A..B runs from the start of step A (the earlier of its host range and its GPU
annotation) to the end of the GPU work step B launched: the end of its GPU annotation where the
trace has one (Kineto), else the end of step B+1's host range (Nsight: its GPU work runs behind
the host by less than a step, or the step after shows it), else the end of the trace. Events
that only partly overlap (a kernel of step A-1 still running) are kept whole, so the
device-aware step bounds (``analyzers/metrics/steps.py``) are those of the whole trace.

Which steps, when the budget chooses: the most consecutive steps whose events fit in 90% of the
budget above the floor, starting with the second step (the first is often a warm-up) unless every step fits. A single step that
does not fit is still read, and the window says so.

A trace without steps (no ProfilerStep, no NVTX step ranges) too big for the budget is read over
a window of time instead (:func:`time_table`): its span cut into slices that each hold as many
events (at least :data:`TIME_SLICES`, more when the budget is far below the trace's need), the
slices taken as steps are chosen the same way, and the window says it is one of time (``by``).
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

ASKED = "asked"  # --steps A-B
BUDGET = "memory budget"
TIME = "time"  # StepWindow.by: slices of the trace's events, for a trace without steps
TIME_SLICES = 64  # a trace without steps is cut into at least this many slices of time
MAX_TIME_SLICES = 1 << 16
# A window is sized to this share of the budget above the floor (budget.BASE_BYTES): a second
# read's own transients (the batches in flight, the sorts of the frames) are not in the model.
# Measured: a 5.09 GB Kineto trace windowed to an estimate of exactly 2.00 GB peaked at 2.01 GB.
WINDOW_FILL = 0.9


@dataclass(frozen=True, slots=True)
class StepWindow:
    """The steps a trace was read over and why (``trace.meta.window``; the document's
    ``inputs[].window`` and a note)."""

    first_step: int  # step numbers (ProfilerStep#N, NVTX "step N"), both included
    last_step: int
    steps_in_trace: int
    lo_ns: int | None  # the span read, on the reader's clock (None: from the start / to the end)
    hi_ns: int | None
    reason: str  # ASKED or BUDGET
    need_bytes: int | None = None  # the whole trace's estimated peak (traces/budget.py)
    window_need_bytes: int | None = None  # the window's
    budget_bytes: int | None = None
    numbers: tuple[int, ...] = ()  # the step numbers read (the steps frame is cut to them)
    by: str = "steps"  # or TIME: first/last_step are slices of time (the trace has no steps)
    span_ns: tuple[int, int] | None = None  # TIME: the trace's events, first to last start

    @property
    def count(self) -> int:
        return self.last_step - self.first_step + 1

    def entry(self) -> dict[str, object]:
        """The document's ``inputs[].window``."""
        entry: dict[str, object] = {
            "first_step": self.first_step, "last_step": self.last_step,
            "steps_in_trace": self.steps_in_trace, "reason": self.reason,
            "need_bytes": self.need_bytes, "window_need_bytes": self.window_need_bytes,
            "budget_bytes": self.budget_bytes}
        if self.by == TIME:
            entry["by"] = TIME
        return entry

    def note(self, name: str) -> str:
        if self.by == TIME:
            head = f"{name}: analyzed over {self._time_span()} (slices {self.first_step}-" \
                   f"{self.last_step} of {self.steps_in_trace} of equal events; it has no steps)"
        else:
            steps = f"steps {self.first_step}-{self.last_step}" if self.count > 1 \
                else f"step {self.first_step}"
            head = f"{name}: analyzed over {steps} ({self.count} of {self.steps_in_trace} steps)"
        if self.reason == ASKED:
            return head + ", as --steps asked"
        unit = "slice" if self.by == TIME else "step"
        over = "" if (self.window_need_bytes or 0) <= (self.budget_bytes or 0) else \
            f"; even one {unit} needs about {_gb(self.window_need_bytes)}, more than the budget"
        return (f"{head}: the whole trace needs about {_gb(self.need_bytes)} of memory to "
                f"analyze, more than the {_gb(self.budget_bytes)} budget (--memory-budget); "
                f"the window about {_gb(self.window_need_bytes)}{over}; every metric is of "
                f"{'this window' if self.by == TIME else 'these steps'}")

    def _time_span(self) -> str:
        """The window's time as seconds from the trace's first event (of its whole span)."""
        if self.span_ns is None:
            return "a window of time"
        first, last = self.span_ns
        lo = (self.lo_ns if self.lo_ns is not None else first) - first
        hi = (self.hi_ns if self.hi_ns is not None else last) - first
        unit, scale = next((u, d) for u, d in (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1))
                           if last - first >= d)
        return f"{lo / scale:,.3f}-{hi / scale:,.3f} {unit} of its {(last - first) / scale:,.3f} " \
               f"{unit} after its first event"


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e9:.2f} GB"


@dataclass(frozen=True, slots=True)
class StepTable:
    """A trace's steps as the first pass found them: one row per step, sorted by start, and
    every event's start (sorted: 8 bytes an event, a few % of the trace's own bytes)."""

    step: np.ndarray  # step numbers
    start_ns: np.ndarray  # host range start (or the GPU annotation's, when earlier)
    end_ns: np.ndarray  # host range end
    gpu_end_ns: np.ndarray  # end of the step's GPU annotation (-1: none recorded)
    starts: np.ndarray  # every event's start, sorted (or the left edges of time buckets)
    weights: np.ndarray | None = None  # events in each bucket (None: one event each)

    @property
    def count(self) -> int:
        return len(self.step)

    @property
    def events_total(self) -> int:
        return len(self.starts) if self.weights is None else int(self.weights.sum())


def step_table(steps: pl.DataFrame, gpu: pl.DataFrame, starts: np.ndarray,
               weights: np.ndarray | None = None) -> StepTable:
    """The table from host step ranges (``ts_ns``, ``dur_ns``, ``step``), GPU annotations of
    steps (``ts_ns``, ``dur_ns``, ``step``; may be empty) and every event's start (or a
    histogram: bucket edges and counts; a window then counts whole buckets)."""
    host = steps.group_by("step").agg(pl.col("ts_ns").min(),
                                      (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("end"))
    if gpu.height:
        dev = gpu.group_by("step").agg(pl.col("ts_ns").min().alias("g_start"),
                                       (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("g_end"))
        host = host.join(dev, on="step", how="left")
    else:
        host = host.with_columns(g_start=pl.lit(None, pl.Int64), g_end=pl.lit(None, pl.Int64))
    host = host.with_columns(start=pl.min_horizontal("ts_ns", "g_start")).sort("start", "step")
    return StepTable(host["step"].to_numpy().astype(np.int64),
                     host["start"].to_numpy().astype(np.int64),
                     host["end"].to_numpy().astype(np.int64),
                     host["g_end"].fill_null(-1).to_numpy().astype(np.int64),
                     *_sorted(np.asarray(starts, dtype=np.int64), weights))


def _sorted(starts: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray,
                                                                      np.ndarray | None]:
    if weights is None:
        return np.sort(starts), None
    order = np.argsort(starts, kind="stable")
    return starts[order], np.asarray(weights, dtype=np.int64)[order]


def bounds(t: StepTable, i: int, j: int) -> tuple[int | None, int | None]:
    """The span of steps ``i..j`` (indices; see the module docstring): None at either end
    means unbounded there (from the first step on, the trace's start is read too)."""
    lo = int(t.start_ns[i]) if i > 0 else None
    if j + 1 >= t.count:
        return lo, None
    gpu_end = int(t.gpu_end_ns[j])
    hi = max(gpu_end, int(t.end_ns[j])) if gpu_end >= 0 else int(t.end_ns[j + 1])
    return lo, hi


def window_events(t: StepTable, i: int, j: int) -> int:
    """Events starting within the span of steps ``i..j`` (indices)."""
    lo, hi = bounds(t, i, j)
    a = 0 if lo is None else int(np.searchsorted(t.starts, lo, side="left"))
    b = len(t.starts) if hi is None else int(np.searchsorted(t.starts, hi, side="left"))
    return b - a if t.weights is None else int(t.weights[a:b].sum())


def asked(t: StepTable, first: int, last: int, path: object) -> tuple[int, int]:
    """Indices (into ``t``) of the steps ``first..last`` (numbers), or an error naming the
    steps the trace has."""
    from rightsize.errors import InputError

    inside = np.nonzero((t.step >= first) & (t.step <= last))[0]
    if not len(inside):
        have = f"{int(t.step.min())}-{int(t.step.max())}" if t.count else "none"
        raise InputError(path, f"no step numbered {first}-{last} (--steps); its steps: {have}")
    return int(inside[0]), int(inside[-1])


def choose(t: StepTable, need_of: Callable[[int], int], budget: int) -> tuple[int, int]:
    """Indices of the most consecutive steps whose events fit ``budget`` (``need_of``: the
    estimated peak for a number of events), from the second step unless all of them fit; one
    step at least. A window fills :data:`WINDOW_FILL` of the budget above the floor
    (``need_of(0)``) at most."""
    if t.count <= 1 or need_of(t.events_total) <= budget:
        return 0, t.count - 1
    floor = need_of(0)
    room = floor + int((budget - floor) * WINDOW_FILL)
    end = 1
    while end + 1 < t.count and need_of(window_events(t, 1, end + 1)) <= room:
        end += 1
    return 1, end


def plan(t: StepTable, path: object, steps: tuple[int, int] | None,
         need_of: Callable[[int], int], budget: int | None) -> StepWindow | None:
    """The window to read: the asked steps, else the steps the budget holds, else for a trace
    without steps a window of time (None: the whole trace fits, or it has no events)."""
    by, span = "steps", None
    if steps is not None:
        i, j = asked(t, steps[0], steps[1], path)
        reason = ASKED
    else:
        if budget is None or t.events_total == 0 or need_of(t.events_total) <= budget:
            return None
        if t.count <= 1:  # no steps to cut it by (or one): slices of its time
            by, span, t = TIME, (int(t.starts[0]), int(t.starts[-1])), \
                time_table(t, _slices(t, need_of, budget))
        i, j = choose(t, need_of, budget)
        if (i, j) == (0, t.count - 1):
            return None
        reason = BUDGET
    lo, hi = bounds(t, i, j)
    return StepWindow(int(t.step[i]), int(t.step[j]), t.count, lo, hi, reason,
                      need_of(t.events_total), need_of(window_events(t, i, j)),
                      budget if reason == BUDGET else None,  # asked steps ignore the budget
                      tuple(int(n) for n in t.step[i:j + 1]) if by == "steps" else (),
                      by, span)


def _slices(t: StepTable, need_of: Callable[[int], int], budget: int) -> int:
    """Enough slices that a window of several fits the budget: 16 slices to what it holds
    above the floor, at least :data:`TIME_SLICES`."""
    floor = need_of(0)
    room = max(1, int((budget - floor) * WINDOW_FILL))
    wanted = 16 * (need_of(t.events_total) - floor) // room
    return int(min(MAX_TIME_SLICES, max(TIME_SLICES, wanted)))


def time_table(t: StepTable, slices: int) -> StepTable:
    """A trace without steps as ``slices`` steps of time: consecutive spans of its event
    starts that each hold about as many events (a histogram's buckets are not split), step
    ``k`` from the start of its first event to the start of the next slice's."""
    weights = t.weights if t.weights is not None else np.ones(len(t.starts), np.int64)
    before = np.concatenate(([0], np.cumsum(weights)[:-1]))  # events before each start
    share = before * slices // max(1, int(weights.sum()))  # the slice each start falls in
    first = np.concatenate(([True], share[1:] != share[:-1]))
    starts = t.starts[first]
    ends = np.concatenate((starts[1:], [t.starts[-1] + 1]))
    n = len(starts)
    return StepTable(np.arange(n, dtype=np.int64), starts, ends, ends.copy(), t.starts,
                     t.weights)


def keep(df: pl.DataFrame, lo: int | None, hi: int | None) -> pl.DataFrame:
    """The rows of ``df`` that overlap ``[lo, hi)``: ``ts_ns + dur_ns > lo`` and ``ts_ns < hi``
    (instants, without ``dur_ns``: ``lo <= ts_ns < hi``); a frame without times is kept."""
    if "ts_ns" not in df.columns or (lo is None and hi is None) or df.height == 0:
        return df
    ts = pl.col("ts_ns")
    cond = pl.lit(True)
    if lo is not None:
        cond = cond & ((ts + pl.col("dur_ns").fill_null(0) > lo) | (ts >= lo)
                       if "dur_ns" in df.columns else ts >= lo)
    if hi is not None:
        cond = cond & (ts < hi)
    return df.filter(cond)
