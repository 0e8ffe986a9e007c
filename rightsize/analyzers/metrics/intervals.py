"""Vectorized interval arithmetic on int64 nanosecond ranges.

An interval list is a pair of numpy arrays ``(starts, ends)``. Functions named ``union``,
``intersect``, ``subtract`` return *normalized* lists: sorted, disjoint, non-empty, with touching
intervals joined (as the TensorBoard plugin's ``merge_ranges`` and HTA's
``merge_kernel_intervals`` do). Everything is numpy, O(n log n), no Python loop per interval, so
millions of kernels are handled in well under a second.

Pure functions: inputs are never modified.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

_EMPTY = np.zeros(0, dtype=np.int64)


def empty() -> Intervals:
    return _EMPTY, _EMPTY


def of(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Wrap raw arrays (any order, may overlap) as an interval list (not yet normalized)."""
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def from_durations(starts: np.ndarray, durations: np.ndarray) -> Intervals:
    """``(starts, starts + durations)`` as int64 (not normalized), making one new array: the
    ends (the starts are used as they are when already int64; nothing here writes to them)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.array(durations, dtype=np.int64)
    e += s
    return s, e


def union(iv: Intervals) -> Intervals:
    """Merge overlapping or touching intervals; zero-length ones are dropped after merging.

    Lean on memory (millions of kernels): no sort when the starts already are in order (a
    stable sort would keep that order), the running maximum is taken in place, and each
    temporary goes as soon as it is used.
    """
    starts, ends = iv
    n = len(starts)
    if n == 0:
        return empty()
    if bool(np.all(starts[1:] >= starts[:-1])):
        s = np.asarray(starts)
        run_max = np.maximum.accumulate(ends)
    else:
        order = np.argsort(starts, kind="stable")
        s = starts[order]
        run_max = ends[order]
        del order
        np.maximum.accumulate(run_max, out=run_max)
    # A new group starts where an interval begins after everything before it has ended.
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.greater(s[1:], run_max[:-1], out=new[1:])
    group_starts = np.flatnonzero(new)
    del new
    out_s = s[group_starts]
    del s
    group_last = np.empty_like(group_starts)
    group_last[:-1] = group_starts[1:] - 1
    group_last[-1] = n - 1
    del group_starts
    out_e = run_max[group_last]
    del run_max, group_last
    keep = out_e > out_s
    if keep.all():
        return out_s, out_e
    return out_s[keep], out_e[keep]


def union_all(*lists: Intervals) -> Intervals:
    """The union of several interval lists."""
    if not lists:
        return empty()
    return union((np.concatenate([x[0] for x in lists]), np.concatenate([x[1] for x in lists])))


def total(iv: Intervals) -> int:
    """Sum of lengths (of a normalized list)."""
    return int((iv[1] - iv[0]).sum())


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """a ∩ b for normalized lists: each a-interval against the b-intervals it overlaps."""
    (a_s, a_e), (b_s, b_e) = a, b
    if len(a_s) == 0 or len(b_s) == 0:
        return empty()
    lo = np.searchsorted(b_e, a_s, side="right")  # first b ending after a starts
    hi = np.searchsorted(b_s, a_e, side="left")  # b's starting before a ends
    counts = np.maximum(hi - lo, 0)
    if counts.sum() == 0:
        return empty()
    ai = np.repeat(np.arange(len(a_s)), counts)
    # index of each pair's b: lo[ai] + position within the run of that a, i.e. the pair's
    # index + (lo - where the a's run starts). Temporaries are reused in place (millions of pairs).
    bi = np.arange(len(ai))
    bi += np.repeat(lo - (np.cumsum(counts) - counts), counts)
    s = a_s[ai]
    np.maximum(s, b_s[bi], out=s)
    e = a_e[ai]
    del ai
    np.minimum(e, b_e[bi], out=e)
    del bi
    keep = e > s
    if keep.all():
        return s, e
    return s[keep], e[keep]


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a \\ b for normalized lists: a ∩ (the gaps of b)."""
    if len(a[0]) == 0:
        return empty()
    if len(b[0]) == 0:
        return a
    lo = min(int(a[0][0]), int(b[0][0]))
    hi = max(int(a[1][-1]), int(b[1][-1]))
    gaps_s = np.concatenate([[lo], b[1]])
    gaps_e = np.concatenate([b[0], [hi]])
    keep = gaps_e > gaps_s
    if keep.all():  # the usual case (only the outer gaps can be empty): no copies
        return intersect(a, (gaps_s, gaps_e))
    return intersect(a, (gaps_s[keep], gaps_e[keep]))


def clip(iv: Intervals, lo: int, hi: int) -> Intervals:
    """Intersect a normalized list with [lo, hi)."""
    s = np.maximum(iv[0], lo)
    e = np.minimum(iv[1], hi)
    keep = e > s
    return s[keep], e[keep]


def covered_before(iv: Intervals, x: np.ndarray) -> np.ndarray:
    """For a normalized list: length of iv ∩ (-inf, x) for each x (vectorized)."""
    starts, ends = iv
    x = np.asarray(x, dtype=np.int64)
    if len(starts) == 0:
        return np.zeros(len(x), dtype=np.int64)
    lengths = np.concatenate([[0], np.cumsum(ends - starts)])
    idx = np.searchsorted(starts, x, side="right")  # intervals starting before x
    full = lengths[idx]
    # The last of those may extend past x: remove its part beyond x.
    last = np.maximum(idx - 1, 0)
    over = np.where(idx > 0, np.maximum(ends[last] - x, 0), 0)
    return full - over


def per_window(iv: Intervals, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Length of a normalized list inside each window [start, end) (windows may overlap)."""
    return covered_before(iv, ends) - covered_before(iv, starts)


def capped_sum_segments(
    starts: np.ndarray, ends: np.ndarray, values: np.ndarray, cap: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sweep line: sum the values of concurrent intervals, cap the sum per elementary segment.

    This is the TensorBoard plugin's ``merge_ranges_with_value`` used for Est. SM Efficiency:
    endpoints sorted by time with starts before ends at equal times; segments with a summed
    value <= 0 are skipped. Returns (segment starts, segment ends, capped values).
    """
    n = len(starts)
    if n == 0:
        z = np.zeros(0)
        return z.astype(np.int64), z.astype(np.int64), z
    times = np.concatenate([starts, ends]).astype(np.int64, copy=False)
    kinds = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(n, dtype=np.int8)])
    order = np.lexsort((kinds, times))
    del kinds  # each temporary goes as soon as it is used (2 endpoints per kernel)
    t = times[order]
    del times
    running = np.concatenate([values, -values]).astype(np.float64, copy=False)[order]
    del order
    np.cumsum(running, out=running)
    # Segment i spans [t[i], t[i+1]) with the value accumulated after endpoint i.
    seg_s = t[:-1]
    seg_e = t[1:]
    val = running[:-1]
    keep = (seg_e > seg_s) & (val > 0.0)
    return seg_s[keep], seg_e[keep], np.minimum(val[keep], cap)
