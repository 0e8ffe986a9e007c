"""The online calibration (``online_fit.fit``): one factor on every step, fitted to a measured
median TPOT over the same requests the predictions summarize."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.serving.online_fit import fit
from rightsize.analyzers.serving.simulate import Limits, Requests
from rightsize.analyzers.serving.tabulated import Tabulated


def _one_plus_decodes(p: np.ndarray, c: np.ndarray, d: np.ndarray, k: np.ndarray) -> np.ndarray:
    return 1.0 + np.asarray(d, np.float64)  # ms: 1 + one per decoding sequence


def test_the_fit_summarizes_the_requests_the_prediction_keeps() -> None:
    # ten requests of 4 prompt and 11 output tokens, 10 s apart except the 5th and 6th, which
    # arrive together: those two decode side by side (steps of 1 + 2 = 3 ms, TPOT 3 ms), the
    # others alone (1 + 1 = 2 ms). All ten: median TPOT 2 ms; skip 0.4 keeps the 5th and 6th
    # (n = 10: four dropped at each end): median 3 ms. A measured median of 6 ms is every
    # step x3 over all ten, x2 over the two kept.
    arrivals = np.array([0.0, 10, 20, 30, 40, 40, 60, 70, 80, 90])
    reqs = Requests(arrivals, np.full(10, 4), np.full(10, 11))
    table = Tabulated(_one_plus_decodes, 4, 64, 64)
    limits = Limits(4, 64, 1 << 20)
    every = fit(table, limits, reqs, 0.1, 6.0, None, "run")
    kept = fit(table, limits, reqs, 0.1, 6.0, None, "run", skip=0.4)
    assert every.factor == pytest.approx(3.0, rel=4e-3)
    assert kept.factor == pytest.approx(2.0, rel=4e-3)
    assert kept.tpot_ms_p50_simulated == pytest.approx(6.0, rel=3e-3)
