"""The simulation's table of step times against the step function it tabulates."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.serving.tabulated import Tabulated


def kneed(p: np.ndarray, c: np.ndarray, b: np.ndarray, k: np.ndarray) -> np.ndarray:
    """A decode step shaped like the attention tables' log-log interpolation: 10 ms plus, per
    sequence, 2 µs x (mean KV / 1024)^0.5 below 1,024 KV tokens and ^1.5 above (a knee at a
    measured length, a power of two), plus 1 µs per prefill token."""
    b = np.asarray(b, float)
    kv = np.where(b > 0, np.asarray(k, float) / np.maximum(b, 1), 0.0)
    x = kv / 1024.0
    per_seq = 0.002 * np.where(x < 1, np.sqrt(x), x**1.5)
    return 10.0 + b * per_seq + 0.001 * np.asarray(p, float)


def test_the_decode_table_holds_the_knee_at_a_power_of_two() -> None:
    # 64 sequences at a mean KV of 1,024: 10 + 64 x 0.002 = 10.128 ms exactly (1,024 is a grid
    # point); the first pass's 26 points put 903.7 and 1,200 around it and interpolated
    # linearly: 10 + 64 x (0.0018788 + 0.40605 x 0.0006585) = 10.1374 ms there
    t = Tabulated(kneed, 64, 2048, 1200)
    assert 1024.0 in t.kvm
    assert t.decodes(64, np.array([64 * 1024]))[0] == pytest.approx(10.128, rel=1e-12)
    kv = np.linspace(2, 1200, 400)
    got = t.decodes(64, np.round(kv * 64))
    want = kneed(np.zeros_like(kv), np.zeros_like(kv), np.full(kv.shape, 64), np.round(kv * 64))
    assert np.abs(got / want - 1).max() < 2e-4


def test_one_step_adds_the_prefill_part_to_the_decode_part() -> None:
    # 300 prompt tokens beside 20 decodes at a mean KV of 512: 10 + 20 x 0.002 x 0.5^0.5
    # + 0.3 = 10.328284 ms
    t = Tabulated(kneed, 64, 2048, 1200, prompts=(300,))
    assert t.one(300, 0, 20, 20 * 512) == pytest.approx(10.3 + 0.04 * 0.5**0.5, rel=1e-9)
    assert t.scaled(2.0, 3.0).one(300, 0, 20, 20 * 512) == pytest.approx(
        2 * (10.3 + 0.04 * 0.5**0.5), rel=1e-9)
