"""How each step splits into the diagnosis' exclusive shares, and how one step splits over time.

Input: the exclusive interval lists per share (``diagnosis/shares.py``: ``gpu_shares`` or
``cpu_shares``) and the steps. Output: the document's ``steps.per_step`` (a
:class:`~rightsize.analyzers.document.metrics.StepSplit` per step) and, for a capture of a
single step, its ``steps.split_over_time`` (:class:`~rightsize.analyzers.document.metrics.
SplitOverTime`: the shares in equal buckets across the step); times in ms. Pure.

Definition: the same exclusive shares the verdict sums (``shares_pct``), cut at the step
boundaries. Each instant of the step windows belongs to one step only - the first one that
covers it (with the default definitions steps never overlap; with ``--definitions tb-plugin``
the plugin's overlapping GPU-annotation steps give their overlap to the earlier step) - so the
per-step values of a share sum exactly to that share's total over all steps, and each step's
shares sum to its (exclusive) duration.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rightsize.analyzers.document.metrics import SplitOverTime, StepSplit
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps

NS_PER_MS = 1e6
MAX_SPLIT_BUCKETS = 120  # one step drawn as a strip: enough to see its phases, small JSON
MAX_STEPS_LISTED = 1000  # per_step rows (and step names) a document lists; beyond, summarised


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


def per_step(parts: Mapping[str, iv.Intervals], steps: Steps) -> tuple[StepSplit, ...]:
    """Each share inside each step's exclusive window, in ms (empty without steps)."""
    if not steps.count:
        return ()
    lo, hi = exclusive_windows(steps)
    shares = {k: iv.per_window(parts[k], lo, hi) for k in parts}
    first = int(steps.start_ns[0])
    return tuple(
        StepSplit(n, (int(lo[i]) - first) / NS_PER_MS, int(hi[i] - lo[i]) / NS_PER_MS,
                  {k: int(v[i]) / NS_PER_MS for k, v in shares.items()})
        for i, n in enumerate(step_numbers(steps.names)))


def summarised(rows: tuple[StepSplit, ...], names: tuple[str, ...],
               max_rows: int = MAX_STEPS_LISTED) -> tuple[tuple[StepSplit, ...], tuple[str, ...]]:
    """At most ``max_rows`` rows: beyond, each row sums ``steps`` consecutive steps (their
    durations and shares; the first one's number and start), and ``names`` keeps the first
    step name of each row. A document of 100,000 steps was 72 MB, 85 times its upload (issue
    40, 5); summarised, the sums stay exact (a share's rows still add up to its total)."""
    if len(rows) <= max_rows:
        return rows, names
    size = -(-len(rows) // max_rows)
    out = []
    for at in range(0, len(rows), size):
        group = rows[at:at + size]
        shares: dict[str, float] = {}
        for row in group:
            for k, v in row.shares_ms.items():
                shares[k] = shares.get(k, 0.0) + v
        out.append(StepSplit(group[0].step, group[0].start_ms,
                             sum(r.dur_ms for r in group), shares, steps=len(group)))
    return tuple(out), tuple(names[at] for at in range(0, len(names), size))


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
    return SplitOverTime(int(bucket) / NS_PER_MS, {
        k: tuple(int(v) / NS_PER_MS for v in iv.per_window(parts[k], edges[:-1], edges[1:]))
        for k in parts})
