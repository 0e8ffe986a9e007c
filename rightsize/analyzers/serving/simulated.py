"""The result of ``rightsize serving simulate``: one deployment under an online load, every
latency with its low-high range (the simulation at the step model's low and high ends).

Input: an :class:`~.online.Online` and what it was run on. Output: the frozen
:class:`Simulated` node; ``to_json`` is the JSON contract (docs/serving.md). Pure.
"""

from __future__ import annotations

import math

from rightsize.analyzers.serving.latency import Stat
from rightsize.analyzers.serving.online import Online
from rightsize.analyzers.serving.online_fit import OnlineFit
from rightsize.node import Node, node, num

SIMULATE_SCHEMA_VERSION = 1


def _f(x: float) -> float | None:
    return None if math.isnan(x) else x


@node
class Times(Node):
    """One latency metric (ms): mean and percentiles, each with its low and high end."""

    mean: float | None = num(3, default=None)
    mean_low: float | None = num(3, default=None)
    mean_high: float | None = num(3, default=None)
    p50: float | None = num(3, default=None)
    p50_low: float | None = num(3, default=None)
    p50_high: float | None = num(3, default=None)
    p90: float | None = num(3, default=None)
    p90_low: float | None = num(3, default=None)
    p90_high: float | None = num(3, default=None)
    p95: float | None = num(3, default=None)
    p95_low: float | None = num(3, default=None)
    p95_high: float | None = num(3, default=None)
    p99: float | None = num(3, default=None)
    p99_low: float | None = num(3, default=None)
    p99_high: float | None = num(3, default=None)

    @staticmethod
    def of(point: Stat, low: Stat, high: Stat) -> Times:
        vals: list[float | None] = []
        for q in ("mean", "p50", "p90", "p95", "p99"):
            # a metric's low end is the smaller of the two ends' values (both are sampled)
            a, b = getattr(low, q), getattr(high, q)
            vals += [_f(getattr(point, q)), _f(min(a, b)), _f(max(a, b))]
        return Times(*vals)


@node
class Calibration(Node):
    factor: float = num(4, default=1.0)
    rate_per_s: float | None = num(4, default=None)  # None: every request at once
    tpot_ms_p50_measured: float = num(3, default=0.0)
    tpot_ms_p50_simulated: float = num(3, default=0.0)
    ttft_ms_p50_measured: float | None = num(3, default=None)
    ttft_ms_p50_simulated: float | None = num(3, default=None)
    spread_pct: float | None = num(2, default=None)


@node
class Simulated(Node):
    schema_version: int
    model: str
    gpu: str
    tp: int
    pp: int
    precision: str
    replicas: int
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_cache_tokens: int
    load: str
    requests: int
    ttft_ms: Times
    tpot_ms: Times
    itl_ms: Times
    e2e_ms: Times
    throughput_rps: float = num(4, default=0.0)
    output_tokens_per_s: float = num(2, default=0.0)
    kv_cache_peak_pct: float = num(2, default=0.0)
    preemptions: int = 0
    calibrated_by: str = ""
    calibration: Calibration | None = None
    assumes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def calibration_node(f: OnlineFit | None) -> Calibration | None:
    if f is None:
        return None
    return Calibration(f.factor, None if math.isinf(f.rate_per_s) else f.rate_per_s,
                       f.tpot_ms_p50_measured, f.tpot_ms_p50_simulated, f.ttft_ms_p50_measured,
                       _f(f.ttft_ms_p50_simulated),
                       None if f.spread is None else 100 * f.spread)


def simulated(on: Online, *, model: str, gpu: str, tp: int, pp: int, precision: str,
              kv_cache_tokens: int, load: str, requests: int, calibrated_by: str,
              fit: OnlineFit | None, assumes: tuple[str, ...],
              notes: tuple[str, ...]) -> Simulated:
    p, lo, hi = on.point, on.low, on.high
    return Simulated(
        SIMULATE_SCHEMA_VERSION, model, gpu, tp, pp, precision, on.replicas,
        on.limits.max_num_seqs, on.limits.max_num_batched_tokens, on.limits.chunked_prefill,
        kv_cache_tokens, load, requests, Times.of(p.ttft_ms, lo.ttft_ms, hi.ttft_ms),
        Times.of(p.tpot_ms, lo.tpot_ms, hi.tpot_ms), Times.of(p.itl_ms, lo.itl_ms, hi.itl_ms),
        Times.of(p.e2e_ms, lo.e2e_ms, hi.e2e_ms), p.throughput_rps, p.output_tokens_per_s,
        p.kv_cache_peak_pct, p.preemptions, calibrated_by, calibration_node(fit), assumes,
        notes)
