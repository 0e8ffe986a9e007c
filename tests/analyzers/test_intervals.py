"""Interval arithmetic against a brute-force reference on random lists, and exact cases."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.metrics import intervals as iv


def brute(a, b, op):
    """Set of integer points covered, via Python sets."""
    pa = {t for s, e in zip(*a) for t in range(s, e)}
    pb = {t for s, e in zip(*b) for t in range(s, e)}
    return {"and": pa & pb, "sub": pa - pb}[op]


def points(x):
    return {t for s, e in zip(*x) for t in range(int(s), int(e))}


def test_union_joins_touching_and_overlapping():
    u = iv.union(iv.of([5, 0, 2, 10, 10], [7, 2, 4, 10, 12]))
    assert (u[0].tolist(), u[1].tolist()) == ([0, 5, 10], [4, 7, 12])


@pytest.mark.parametrize("seed", range(20))
def test_intersect_and_subtract_match_sets(seed):
    rng = np.random.default_rng(seed)
    def rand():
        s = rng.integers(0, 200, 15)
        return iv.union(iv.of(s, s + rng.integers(0, 30, 15)))
    a, b = rand(), rand()
    for op, fn in (("and", iv.intersect), ("sub", iv.subtract)):
        got = fn(a, b)
        assert points(got) == brute(a, b, op)
        assert np.all(got[1] > got[0]) and np.all(got[0][1:] >= got[1][:-1])


def test_per_window_and_clip():
    u = iv.union(iv.of([0, 10, 30], [5, 20, 40]))
    assert iv.per_window(u, np.array([0, 15, 35]), np.array([12, 35, 100])).tolist() == [7, 10, 5]
    c = iv.clip(u, 3, 35)
    assert (c[0].tolist(), c[1].tolist()) == ([3, 10, 30], [5, 20, 35])


def test_capped_sum_segments_sums_concurrent_values_and_caps():
    s, e, v = iv.capped_sum_segments(np.array([0, 5]), np.array([10, 15]), np.array([0.6, 0.7]))
    assert list(zip(s.tolist(), e.tolist(), v.round(6).tolist())) == [
        (0, 5, 0.6), (5, 10, 1.0), (10, 15, 0.7)]


def _union_reference(starts: np.ndarray, ends: np.ndarray) -> tuple[list[int], list[int]]:
    """Merge by a plain loop over the intervals sorted by start (touching ones join)."""
    out: list[list[int]] = []
    for s, e in sorted(zip(starts.tolist(), ends.tolist(), strict=True), key=lambda x: x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    kept = [(s, e) for s, e in out if e > s]
    return [s for s, _ in kept], [e for _, e in kept]


def test_union_sorted_and_shuffled_inputs_agree_with_a_loop() -> None:
    rng = np.random.default_rng(7)
    starts = np.sort(rng.integers(0, 10_000, 3_000))
    ends = starts + rng.integers(0, 40, 3_000)  # zero-length and touching intervals included
    want = _union_reference(starts, ends)
    for order in (np.arange(3_000), rng.permutation(3_000)):
        s, e = iv.union(iv.of(starts[order], ends[order]))
        assert (s.tolist(), e.tolist()) == want
    before = (starts.copy(), ends.copy())
    iv.union((starts, ends))
    assert (starts == before[0]).all() and (ends == before[1]).all()  # inputs untouched


def test_from_durations_and_intersect_pairs() -> None:
    s, e = iv.from_durations(np.array([0, 10, 30]), np.array([5, 10, 5]))
    assert (s.tolist(), e.tolist()) == ([0, 10, 30], [5, 20, 35])
    a = iv.union(iv.of(np.array([0, 12]), np.array([11, 40])))
    got = iv.intersect(a, (s, e))
    assert (got[0].tolist(), got[1].tolist()) == ([0, 10, 12, 30], [5, 11, 20, 35])
