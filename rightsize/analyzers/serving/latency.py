"""Latency statistics of a simulated (or measured) online run, as ``benchmark_serving.py``
defines them.

Input: one or more :class:`~rightsize.analyzers.serving.simulate.Trace` (replicas of one
deployment, pooled). Output: :class:`Summary` with, per metric, mean/p50/p90/p95/p99 in ms:

- TTFT: first token time - arrival;
- TPOT: (finish - first token) / (output tokens - 1), requests of more than one output token;
- ITL: every gap between two consecutive tokens of a request (weighted per token);
- E2E: finish - arrival;

plus requests/s and output tokens/s over the run (completed over last finish - first
arrival), the KV cache peak (% of blocks) and preemptions. ``skip`` drops the first and last
share of requests by arrival from the latency statistics (warm-up and drain, for a steady-state
answer); throughput always counts every request. Percentiles interpolate linearly (numpy's
default, as benchmark_serving). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rightsize.analyzers.serving.simulate import Trace

QUANTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True)
class Stat:
    """One latency metric in ms."""

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @staticmethod
    def of(values_ms: np.ndarray, weights: np.ndarray | None = None) -> Stat:
        if values_ms.size == 0:
            nan = float("nan")
            return Stat(nan, nan, nan, nan, nan)
        if weights is None:
            q = np.percentile(values_ms, QUANTILES)
            return Stat(float(values_ms.mean()), *map(float, q))
        return Stat(float(np.average(values_ms, weights=weights)),
                    *(weighted_percentile(values_ms, weights, p) for p in QUANTILES))


def weighted_percentile(values: np.ndarray, weights: np.ndarray, pct: float) -> float:
    """The percentile of ``values`` repeated ``weights`` times (linear interpolation between
    ranks, exactly numpy's default on the expanded array)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order].astype(np.int64)
    total = int(w.sum())
    rank = pct / 100.0 * (total - 1)
    lo = int(np.floor(rank))
    ends = np.cumsum(w)  # element i holds ranks [ends[i]-w[i], ends[i]-1]
    i_lo = int(np.searchsorted(ends, lo, side="right"))
    i_hi = int(np.searchsorted(ends, min(lo + 1, total - 1), side="right"))
    frac = rank - lo
    return float(v[i_lo] + (v[i_hi] - v[i_lo]) * frac)


@dataclass(frozen=True, slots=True)
class Summary:
    ttft_ms: Stat
    tpot_ms: Stat
    itl_ms: Stat
    e2e_ms: Stat
    throughput_rps: float
    output_tokens_per_s: float
    kv_cache_peak_pct: float
    preemptions: int
    requests: int


def summarize(traces: tuple[Trace, ...], skip: float = 0.0) -> Summary:
    ttft, tpot, e2e, itl, itl_w = [], [], [], [], []
    done = out = 0
    first_arrival, last_finish = np.inf, -np.inf
    peak = preempt = 0.0
    for tr in traces:
        n = len(tr.arrival_s)
        lo, hi = int(np.floor(n * skip)), n - int(np.floor(n * skip))
        keep = slice(lo, max(hi, lo + 1))
        ttft.append((tr.first_token_s - tr.arrival_s)[keep])
        e2e.append((tr.finish_s - tr.arrival_s)[keep])
        multi = tr.output_tokens[keep] > 1
        span = (tr.finish_s - tr.first_token_s)[keep][multi]
        tpot.append(span / (tr.output_tokens[keep][multi] - 1))
        itl.append(tr.itl_s)
        itl_w.append(tr.itl_weight)
        finished = np.isfinite(tr.finish_s)
        done += int(finished.sum())
        out += int(tr.output_tokens[finished].sum())
        first_arrival = min(first_arrival, float(tr.arrival_s[0]))
        last_finish = max(last_finish, float(np.nanmax(tr.finish_s)))
        peak = max(peak, 100.0 * tr.kv_peak_blocks / max(tr.kv_blocks, 1))
        preempt += tr.preemptions
    duration = max(last_finish - first_arrival, 1e-12)
    ms = 1000.0
    return Summary(Stat.of(np.concatenate(ttft) * ms), Stat.of(np.concatenate(tpot) * ms),
                   Stat.of(np.concatenate(itl) * ms, np.concatenate(itl_w)),
                   Stat.of(np.concatenate(e2e) * ms), done / duration, out / duration, peak,
                   int(preempt), done)
