"""Calibration on a measured online run: one factor on every step time, fitted so that the
simulation of the measured load reproduces the measured median TPOT.

Input: the deployment's tabulated step model, its scheduler limits, the measured run's
requests (its own lengths, or the load being simulated, at the measured rate) and the measured
medians. Output: :class:`OnlineFit`, the factor (measured over modelled: 1.25 means this stack
runs every step 25% slower than the model), the simulated medians at that factor, and the range
the calibrated predictions carry: the median TTFT at the calibrating rate is not fitted, so its
relative residual (at least :data:`MIN_SPREAD`) is the spread applied to every step; without a
measured TTFT the model's own range stays. Pure.

The fit brackets the factor and bisects it (log space) until the simulated and measured median
TPOT agree within 0.3%: the batch grows with slower steps, so near capacity TPOT rises far
faster than the factor and a proportional update would oscillate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rightsize.analyzers.serving.latency import summarize
from rightsize.analyzers.serving.simulate import Limits, Requests, simulate
from rightsize.analyzers.serving.tabulated import Tabulated
from rightsize.errors import RightsizeError

ROUNDS = 24
TOLERANCE = 0.003
MIN_SPREAD = 0.05  # a single run's medians are themselves uncertain by a few percent
FACTOR_RANGE = (0.05, 20.0)


@dataclass(frozen=True, slots=True)
class OnlineFit:
    factor: float
    rate_per_s: float
    tpot_ms_p50_measured: float
    tpot_ms_p50_simulated: float
    ttft_ms_p50_measured: float | None
    ttft_ms_p50_simulated: float
    spread: float | None  # relative range of every step after calibration (None: the model's)
    source: str

    @property
    def described(self) -> str:
        rate = "all at once" if math.isinf(self.rate_per_s) else f"{self.rate_per_s:g} req/s"
        out = (f"{self.source}: online run at {rate} (TPOT p50 {self.tpot_ms_p50_measured:.1f} "
               f"ms): every step x{self.factor:.3f}")
        if self.ttft_ms_p50_measured is not None and self.spread is not None:
            out += (f"; TTFT p50 there {self.ttft_ms_p50_measured:,.0f} ms measured, "
                    f"{self.ttft_ms_p50_simulated:,.0f} ms simulated: range +-"
                    f"{self.spread:.0%}")
        return out


def fit(table: Tabulated, limits: Limits, reqs: Requests, rate_per_s: float,
        tpot_ms_p50: float, ttft_ms_p50: float | None, source: str, *,
        skip: float = 0.0) -> OnlineFit:
    """Bisect the factor (in log space) until the simulated median TPOT is the measured one:
    TPOT rises with the factor, steeply near capacity, where a proportional update would
    overshoot. ``skip``: the share of requests dropped at each end before the medians
    (:func:`~rightsize.analyzers.serving.latency.summarize`), as the predictions it calibrates
    drop them."""
    lo = hi = None
    factor = 1.0
    tpot = ttft = math.nan
    for _ in range(ROUNDS):
        s = summarize((simulate(reqs, limits, table.scaled(factor, factor)),), skip)
        tpot, ttft = s.tpot_ms.p50, s.ttft_ms.p50
        if not tpot > 0:
            raise RightsizeError(f"{source}: the simulated run has no TPOT (every request of"
                                 " one output token)")
        ratio = tpot_ms_p50 / tpot
        if abs(ratio - 1) <= TOLERANCE:
            break
        if ratio > 1:
            lo = factor
        else:
            hi = factor
        if lo is not None and hi is not None:
            if hi / lo < 1 + TOLERANCE / 4:
                break
            factor = math.sqrt(lo * hi)
        else:  # not bracketed yet: move by the ratio, at most x2 a round
            factor *= min(max(ratio, 0.5), 2.0)
        if not FACTOR_RANGE[0] <= factor <= FACTOR_RANGE[1]:
            raise RightsizeError(
                f"{source}: the measured TPOT p50 {tpot_ms_p50:g} ms would need every step "
                f"x{factor:.3g} of the model: not the same deployment or load?")
    spread = None
    if ttft_ms_p50 is not None:
        spread = max(MIN_SPREAD, abs(ttft / ttft_ms_p50 - 1))
    return OnlineFit(factor, rate_per_s, tpot_ms_p50, tpot, ttft_ms_p50, ttft, spread, source)
