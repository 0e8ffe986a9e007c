"""How each step splits into the diagnosis' exclusive shares, and how one step splits over time.

Input: the exclusive interval lists per share (``diagnosis/shares.py``: ``gpu_shares`` or
``cpu_shares``) and the steps. Output: :class:`PerStep`, ns per share for every step, and,
for a capture of a single step, :class:`SplitOverTime` (ns per share in equal buckets across
the step). Pure.

Definition: the same exclusive shares the verdict sums (``shares_pct``), cut at the step
boundaries. Each instant of the step windows belongs to one step only - the first one that
covers it (with the default definitions steps never overlap; with ``--definitions tb-plugin``
the plugin's overlapping GPU-annotation steps give their overlap to the earlier step) - so the
per-step values of a share sum exactly to that share's total over all steps, and each step's
shares sum to its (exclusive) duration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps

MAX_SPLIT_BUCKETS = 120  # one step drawn as a strip: enough to see its phases, small JSON


@dataclass(frozen=True, slots=True)
class PerStep:
    """One entry per step, in step order: its number, window and ns per share."""

    step: tuple[int, ...]  # N of ProfilerStep#N, else the step's position (0, 1, ...)
    start_ns: tuple[int, ...]  # from the first step's start
    dur_ns: tuple[int, ...]  # exclusive window length (the step's duration when none overlap)
    shares_ns: Mapping[str, tuple[int, ...]]  # share -> ns in each step


@dataclass(frozen=True, slots=True)
class SplitOverTime:
    """Equal buckets across the step windows, ns per share in each."""

    bucket_ns: int
    shares_ns: Mapping[str, tuple[int, ...]]


def exclusive_windows(steps: Steps) -> tuple[np.ndarray, np.ndarray]:
    """Step windows with any overlap given to the earlier step (disjoint, step order kept)."""
    starts = steps.start_ns.astype(np.int64)
    ends = steps.end_ns.astype(np.int64)
    if not len(starts):
        return starts, ends
    covered = np.maximum.accumulate(ends)
    lo = starts.copy()
    lo[1:] = np.maximum(starts[1:], covered[:-1])
    return lo, np.maximum(ends, lo)


def step_numbers(names: tuple[str, ...]) -> tuple[int, ...]:
    """``ProfilerStep#N`` -> N; any other name -> its position."""
    out = []
    for i, name in enumerate(names):
        tail = name.rsplit("#", 1)[-1]
        out.append(int(tail) if name.startswith("ProfilerStep#") and tail.isdigit() else i)
    return tuple(out)


def per_step(parts: Mapping[str, iv.Intervals], steps: Steps) -> PerStep | None:
    """ns of each share inside each step's exclusive window (``None`` without steps)."""
    if not steps.count:
        return None
    lo, hi = exclusive_windows(steps)
    shares = {k: tuple(int(v) for v in iv.per_window(parts[k], lo, hi)) for k in parts}
    first = int(steps.start_ns[0])
    return PerStep(step_numbers(steps.names), tuple(int(v) - first for v in lo),
                   tuple(int(v) for v in hi - lo), shares)


def split_over_time(parts: Mapping[str, iv.Intervals], steps: Steps,
                    max_buckets: int = MAX_SPLIT_BUCKETS) -> SplitOverTime | None:
    """ns per share in at most ``max_buckets`` equal buckets from the first step's start to
    the last step's end (``None`` without steps or with an empty window)."""
    if not steps.count:
        return None
    w0, w1 = int(steps.start_ns[0]), int(steps.end_ns.max())
    if w1 <= w0:
        return None
    n = max(1, min(max_buckets, (w1 - w0) // 1000))  # buckets of at least 1 µs
    bucket = -(-(w1 - w0) // n)  # ceil: the last bucket may reach past the window (no share)
    edges = w0 + bucket * np.arange(n + 1, dtype=np.int64)
    return SplitOverTime(int(bucket), {
        k: tuple(int(v) for v in iv.per_window(parts[k], edges[:-1], edges[1:]))
        for k in parts})
