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
