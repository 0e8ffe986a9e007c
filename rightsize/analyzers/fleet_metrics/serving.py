"""Serving rows of ``fleet metrics``: a vLLM/SGLang workload's measured TTFT and TPOT p95
against an SLO, and the cheapest configuration that still meets it.

Input: :class:`~rightsize.traces.serving_metrics.PodServing` per pod, the GPU rows of the same
window (for each workload its catalog GPU, GPUs per pod and price), the SLO, the model configs
by served model name, the catalog. Output: one :class:`ServingRow` per workload
(``namespace/owner``, owners as the GPU rows name them). Pure.

- p95 (and p50) of TTFT and TPOT: Prometheus' ``histogram_quantile`` over the window's bucket
  increases, all pods summed: the bucket holding the rank, linear inside it; the rank in the
  ``+Inf`` bucket gives the highest finite bound (a lower bound of the truth, said in ``why``);
- rate: finished requests over the window; prompt and output tokens: the token counters over
  the requests (their means; the plan simulates requests of those lengths);
- calibration: the workload's own measurements, as ``serving simulate --measured-rate`` does:
  one factor on every step of the serving model on its current deployment, fitted so that the
  simulation at the measured rate per pod gives the measured median TPOT; the same factor for
  every candidate (the stack's efficiency, not the chip's);
- the cheaper configuration: ``serving plan``'s search at the measured rate and the SLO; kept
  when it costs less than the pods now (their GPUs x the catalog price).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rightsize.analyzers.fleet_metrics.workloads import owner
from rightsize.node import Node, node, num
from rightsize.traces.serving_metrics import PodServing

if TYPE_CHECKING:
    from rightsize.analyzers.serving.plan import Slo

PLAN_REQUESTS = 600  # requests per simulation of the plan search


@dataclass(frozen=True, slots=True)
class Deployed:
    """What the GPU row says a workload runs on."""

    gpu: str
    gpus_per_pod: int
    pods: int
    usd_per_gpu_hour: float | None


@node
class ServingRow(Node):
    workload: str
    engine: str
    model_name: str | None
    pods: int
    requests: int
    rate_per_s: float = num(4, default=0.0)
    isl_mean: float | None = num(1, default=None)
    osl_mean: float | None = num(1, default=None)
    ttft_p50_ms: float | None = num(2, default=None)
    ttft_p95_ms: float | None = num(2, default=None)
    tpot_p50_ms: float | None = num(3, default=None)
    tpot_p95_ms: float | None = num(3, default=None)
    kv_cache_peak_pct: float | None = num(2, default=None)
    ttft_p95_slo_ms: float | None = None
    tpot_p95_slo_ms: float | None = None
    meets_slo: bool | None = None
    gpu: str | None = None
    gpus_per_pod: int | None = None
    cost_per_hour_now_usd: float | None = num(4, default=None)
    recommended: str | None = None
    recommended_cost_per_hour_usd: float | None = num(4, default=None)
    recommended_ttft_p95_ms: float | None = num(2, default=None)
    recommended_tpot_p95_ms: float | None = num(3, default=None)
    saving_pct: float | None = num(2, default=None)
    calibrated_by: str = ""
    why: str = ""
    metrics: tuple[str, ...] = ()


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> tuple[float, bool] | None:
    """Prometheus' ``histogram_quantile``: (value, whether the rank fell in ``+Inf``), None
    without observations. Buckets are cumulative counts by upper bound ``le``."""
    if not buckets or math.inf not in buckets or buckets[math.inf] <= 0:
        return None
    les = sorted(buckets)
    counts = [max(buckets[le], 0.0) for le in les]
    for i in range(1, len(counts)):  # a cumulative histogram never falls (rate jitter)
        counts[i] = max(counts[i], counts[i - 1])
    rank = q * counts[-1]
    i = next(k for k, c in enumerate(counts) if c >= rank)
    if les[i] == math.inf:
        finite = [le for le in les if le != math.inf]
        return (finite[-1] if finite else math.nan), True
    lower = les[i - 1] if i > 0 else 0.0
    below = counts[i - 1] if i > 0 else 0.0
    if counts[i] == below:
        return les[i], False
    return lower + (les[i] - lower) * (rank - below) / (counts[i] - below), False


def _sum(pods: Sequence[PodServing], attr: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for p in pods:
        for le, v in getattr(p, attr).items():
            out[le] = out.get(le, 0.0) + v
    return out


def _ms(q: float, buckets: dict[float, float]) -> tuple[float | None, bool]:
    got = histogram_quantile(q, buckets)
    return (None, False) if got is None else (1000.0 * got[0], got[1])


def group(pods: Sequence[PodServing]) -> dict[tuple[str, str, str], list[PodServing]]:
    """Pods by (workload, engine, model name); the workload is ``namespace/owner``."""
    out: dict[tuple[str, str, str], list[PodServing]] = {}
    for p in pods:
        ns, pod = p.labels.get("namespace", ""), p.labels.get("pod", "")
        name = f"{ns}/{owner(pod)}" if ns else owner(pod) or "(unlabelled)"
        out.setdefault((name, p.engine, p.labels.get("model_name", "")), []).append(p)
    return out


@dataclass(frozen=True, slots=True)
class Measured:
    requests: float
    window_s: float
    isl: float | None
    osl: float | None
    ttft: tuple[float | None, float | None]  # p50, p95 ms
    tpot: tuple[float | None, float | None]
    capped: bool  # a p95 fell in the +Inf bucket
    kv_peak: float | None

    @property
    def rate(self) -> float:
        return self.requests / self.window_s if self.window_s > 0 else 0.0


def measure(pods: Sequence[PodServing]) -> Measured:
    ttft, tpot = _sum(pods, "ttft_buckets"), _sum(pods, "tpot_buckets")
    (t50, _), (t95, c1) = _ms(0.5, ttft), _ms(0.95, ttft)
    (p50, _), (p95, c2) = _ms(0.5, tpot), _ms(0.95, tpot)
    n = sum(p.requests for p in pods) or ttft.get(math.inf, 0.0)
    isl = sum(p.prompt_tokens for p in pods) / n if n else None
    osl = sum(p.generation_tokens for p in pods) / n if n else None
    peaks = [p.kv_peak_pct for p in pods if p.kv_peak_pct is not None]
    return Measured(n, max(p.window_s for p in pods), isl, osl, (t50, t95), (p50, p95),
                    c1 or c2, max(peaks) if peaks else None)


def base_row(key: tuple[str, str, str], pods: Sequence[PodServing], m: Measured,
             slo: Slo | None) -> dict[str, object]:
    meets = None
    if slo is not None and m.ttft[1] is not None and m.tpot[1] is not None:
        meets = m.ttft[1] <= slo.ttft_p95_ms and m.tpot[1] <= slo.tpot_p95_ms
    return {"workload": key[0], "engine": key[1], "model_name": key[2] or None,
            "pods": len({p.labels.get("pod", "") for p in pods}), "requests": round(m.requests),
            "rate_per_s": m.rate, "isl_mean": m.isl, "osl_mean": m.osl, "ttft_p50_ms": m.ttft[0],
            "ttft_p95_ms": m.ttft[1], "tpot_p50_ms": m.tpot[0], "tpot_p95_ms": m.tpot[1],
            "kv_cache_peak_pct": m.kv_peak,
            "ttft_p95_slo_ms": slo.ttft_p95_ms if slo else None,
            "tpot_p95_slo_ms": slo.tpot_p95_ms if slo else None, "meets_slo": meets,
            "metrics": tuple(sorted({x for p in pods for x in p.metrics}))}


def verdict_why(m: Measured, slo: Slo | None, meets: bool | None) -> str:
    if slo is None:
        return "no --slo ttft_p95_ms=..,tpot_p95_ms=..: the measured p95s only"
    if meets is None:
        return "the metrics have no TTFT or TPOT histogram in the window"
    cap = " (a p95 in the +Inf bucket: at least the highest bucket bound)" if m.capped else ""
    return ("meets the SLO" if meets else "misses the SLO") + cap
