"""Serving capacity of one candidate GPU: throughput per replica at the SLO, replicas over a
demand curve, GPU-hours and cost per day against a static fleet sized for the peak.

Definitions (docs/plan.md): a replica serves ``batch`` work units per step, so its throughput is
``batch / step``; a request's latency is one step (queueing wait is what ``headroom`` covers). A
replica is loaded to ``(1 - headroom)`` of its throughput, so replicas at time t are
``ceil(rate(t) / (throughput x (1 - headroom)))``, at least 1. GPU-hours per day integrate
replicas over the curve, scaled to 24 h. The static fleet runs the peak replica count all day.
Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from rightsize.analyzers.plan.demand import DAY_S, Demand


class SloStatus(StrEnum):
    MEETS = "meets"  # the high end of the projected range is within the SLO
    AT_RISK = "at-risk"  # the projection meets it, its high end does not
    MISSES = "misses"
    NO_SLO = "no-slo"


@dataclass(frozen=True, slots=True)
class Replicas:
    series: tuple[int, ...]  # one per demand row
    peak: int
    mean: float  # time-weighted
    p95: int  # time-weighted 95th percentile: replicas that cover 95% of the time
    gpu_hours_per_day: float
    static_gpu_hours_per_day: float


@dataclass(frozen=True, slots=True)
class Capacity:
    gpu: str
    step_ms: float
    step_ms_low: float | None
    step_ms_high: float | None
    step_source: str
    batch: int
    batch_source: str
    per_replica_per_s: float
    per_replica_per_s_low: float  # at the high end of the step range
    slo: SloStatus
    slo_note: str
    usd_per_hour: float | None
    price_source: str | None
    replicas: Replicas | None  # None when the SLO is missed or the model does not fit
    usd_per_day: float | None = None
    static_usd_per_day: float | None = None
    savings_pct: float | None = None


def slo_status(step_ms: float, high_ms: float | None, slo_ms: float | None) -> tuple[SloStatus,
                                                                                     str]:
    if slo_ms is None:
        return SloStatus.NO_SLO, "no --latency-slo-ms given"
    high = high_ms if high_ms is not None else step_ms
    if high <= slo_ms:
        return SloStatus.MEETS, f"step {step_ms:.3g} ms (up to {high:.3g}) <= SLO {slo_ms:g} ms"
    if step_ms <= slo_ms:
        return SloStatus.AT_RISK, (f"step {step_ms:.3g} ms meets SLO {slo_ms:g} ms but the "
                                   f"range reaches {high:.3g} ms")
    return SloStatus.MISSES, f"step {step_ms:.3g} ms > SLO {slo_ms:g} ms"


def replicas_for(demand: Demand, usable_per_s: float) -> Replicas:
    """Replicas over ``demand`` when each replica takes ``usable_per_s``."""
    series = tuple(max(1, math.ceil(r / usable_per_s - 1e-9)) for r in demand.rate_per_s)
    durations = demand.durations_s
    day = DAY_S / demand.span_s
    hours = sum(n * d for n, d in zip(series, durations, strict=True)) / 3600 * day
    mean = sum(n * d for n, d in zip(series, durations, strict=True)) / demand.span_s
    covered = 0.0
    p95 = max(series)
    for n, d in sorted(zip(series, durations, strict=True)):
        covered += d
        if covered >= 0.95 * demand.span_s - 1e-9:
            p95 = n
            break
    peak = max(series)
    return Replicas(series, peak, round(mean, 3), p95, round(hours, 3), peak * 24.0)


def with_costs(cap: Capacity, replicas: Replicas) -> Capacity:
    """``cap`` with its replicas, and cost per day when the GPU has a price."""
    if cap.usd_per_hour is None:
        return replace(cap, replicas=replicas)
    auto = replicas.gpu_hours_per_day * cap.usd_per_hour
    static = replicas.static_gpu_hours_per_day * cap.usd_per_hour
    savings = 100 * (1 - auto / static) if static > 0 else None
    return replace(cap, replicas=replicas, usd_per_day=round(auto, 2),
                   static_usd_per_day=round(static, 2),
                   savings_pct=None if savings is None else round(savings, 1))
