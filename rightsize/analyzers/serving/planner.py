"""Assemble a :class:`~.plan.ServingPlan` from the search: the recommendation with its range,
the frontier, the rejections, the mixed-GPU option, the latency-vs-rate curves, or the one line
that says no configuration meets the SLOs.

Input: the model config and its name, a :class:`~.plan.Load`, :class:`~.plan.Slo`, a
:class:`~.search.Space`, the catalog and an optional calibration. Output: a
:class:`~.plan.ServingPlan`, or :class:`~.plan.NoPlan` raised. Pure.

The mixed option (short requests on one GPU type, long ones on another) is :mod:`.mixed`'s:
each class searched and simulated on each GPU type at its share of the rate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rightsize.analyzers.serving.factors import Calibration
from rightsize.analyzers.serving.mixed import mixed as mixed_option
from rightsize.analyzers.serving.online import ranges_of
from rightsize.analyzers.serving.plan import (
    PLAN_SCHEMA_VERSION,
    Curve,
    Load,
    NoPlan,
    Option,
    ServingPlan,
    Slo,
    impossible,
    vllm_args,
)
from rightsize.analyzers.serving.search import (
    Candidate,
    Space,
    deployments,
    search,
    simulate_option,
)
from rightsize.analyzers.serving.step import GPU_MEMORY_UTILIZATION, ModelConfig
from rightsize.catalog import Catalog

if TYPE_CHECKING:
    from rightsize.analyzers.serving.tables import Tables

CURVE_RATES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)  # x the plan's rate
CURVE_OPTIONS = 4
CURVE_REQUESTS = 400


def plan(config: ModelConfig, name: str, load: Load, slo: Slo, space: Space,
         catalog: Catalog, calibration: Calibration | None = None, *,
         curves: bool = False, tables: Tables | None = None) -> ServingPlan:
    """The plan (module docstring); ``tables``: the measured per-operator tables (None: the
    default ones)."""
    found, rejected = deployments(config, load, space, catalog, calibration, tables)
    if not found:
        raise NoPlan("no deployment of the listed GPUs can hold the model: " + "; ".join(
            f"{r.config}: {r.why}" for r in rejected[:4]))
    got = search(found, load, slo, space, rejected)
    met = [o for o in got.options if o.meets]
    if not met:
        raise _fastest(got.candidates, load, slo)
    best = min(met, key=lambda o: (o.cost_per_hour_usd, _score(o, slo)))
    best = _with_range(best, got.candidates, load, slo)
    frontier = _frontier(met, best)
    notes = [(f"p95s drop the first and last 10% of requests (warm-up and drain); "
             f"{load.requests} requests per simulation")]
    if got.truncated:
        notes.append(f"stopped after {got.simulated} simulations: cheaper candidates the fast "
                     "path kept were not all simulated")
    mixed, mixed_note = mixed_option(found, load, slo, space, best)
    model = next(c.model for c in got.candidates if c.dep.gpu == best.gpu
                 and c.dep.tp == best.tp and c.dep.pp == best.pp)
    return ServingPlan(
        PLAN_SCHEMA_VERSION, name, load.rate_per_s, load.source, load.isl, load.osl,
        slo.ttft_p95_ms, slo.tpot_p95_ms, best, vllm_args(best, GPU_MEMORY_UTILIZATION,
                                                          model.ops.kv_cache_dtype,
                                                          space.engine),
        tuple(frontier), mixed, mixed_note, tuple(got.rejected), got.evaluated, got.simulated,
        load.requests, model.calibrated_by, tuple(model.assumes), tuple(notes),
        tuple(_curves(frontier, got.candidates, load, slo)) if curves else (),
        engine=space.engine)


def _score(o: Option, slo: Slo) -> float:
    return max(o.ttft_p95_ms / slo.ttft_p95_ms, o.tpot_p95_ms / slo.tpot_p95_ms)


def _candidate(cands: list[Candidate], o: Option) -> tuple[Candidate, int]:
    c = next(c for c in cands if (c.dep.gpu, c.dep.tp, c.dep.pp) == (o.gpu, o.tp, o.pp))
    at = np.flatnonzero((c.replicas == o.replicas) & (c.seqs == o.max_num_seqs)
                        & (c.batched == o.max_num_batched_tokens))
    return c, int(at[0])


def _with_range(o: Option, cands: list[Candidate], load: Load, slo: Slo) -> Option:
    """The recommended option simulated again at the low and high step times."""
    from dataclasses import replace

    c, index = _candidate(cands, o)
    r = ranges_of(c.model, int(load.isl))
    _, lo = simulate_option(c, load, o.replicas, index, slo, r.low)
    _, hi = simulate_option(c, load, o.replicas, index, slo, r.high)
    return replace(o, ttft_p95_ms_low=lo.ttft_p95_ms, ttft_p95_ms_high=hi.ttft_p95_ms,
                   tpot_p95_ms_low=lo.tpot_p95_ms, tpot_p95_ms_high=hi.tpot_p95_ms)


def _frontier(met: list[Option], best: Option) -> list[Option]:
    """Per deployment its cheapest met option; kept when no cheaper one is faster in both."""
    per: dict[tuple[str, int, int], Option] = {}
    for o in met:
        k = (o.gpu, o.tp, o.pp)
        if k not in per or o.cost_per_hour_usd < per[k].cost_per_hour_usd:
            per[k] = o
    per[(best.gpu, best.tp, best.pp)] = best
    ordered = sorted(per.values(), key=lambda o: (o.cost_per_hour_usd, o.ttft_p95_ms))
    out: list[Option] = []
    for o in ordered:
        if all(not (p.ttft_p95_ms <= o.ttft_p95_ms and p.tpot_p95_ms <= o.tpot_p95_ms)
               for p in out):
            out.append(o)
    return out


def _fastest(cands: list[Candidate], load: Load, slo: Slo) -> NoPlan:
    """The one line for SLOs nothing meets, with what the fastest configuration reaches in
    simulation (the fast path picks the fastest; the simulation says how fast)."""
    for metric, attr, limit in (("TTFT", "ttft", slo.ttft_p95_ms),
                                ("TPOT", "tpot", slo.tpot_p95_ms)):
        pool = [(float(getattr(c, attr).min()), k) for k, c in enumerate(cands)
                if getattr(c, attr).size]
        if not pool:
            continue
        _, k = min(pool)
        c = cands[k]
        i = int(np.argmin(getattr(c, attr)))
        _, o = simulate_option(c, load, int(c.replicas[i]), i, slo)
        reached = o.ttft_p95_ms if metric == "TTFT" else o.tpot_p95_ms
        if reached > limit:
            return impossible(slo, load.rate_per_s, metric, reached, o.label)
    return NoPlan(f"no configuration of the listed GPUs meets both TTFT p95 <= "
                  f"{slo.ttft_p95_ms:g} ms and TPOT p95 <= {slo.tpot_p95_ms:g} ms at "
                  f"{load.rate_per_s:g} req/s (each alone can be met: a larger TPOT or TTFT "
                  "budget, or more --max-gpus)")


def _curves(frontier: list[Option], cands: list[Candidate], load: Load,
            slo: Slo) -> list[Curve]:
    from dataclasses import replace

    small = replace(load, requests=min(load.requests, CURVE_REQUESTS))
    out = []
    for o in frontier[:CURVE_OPTIONS]:
        c, index = _candidate(cands, o)
        rates, ttft, tpot = [], [], []
        for f in CURVE_RATES:
            _, s = simulate_option(c, small, o.replicas, index, slo, rate_scale=f)
            rates.append(load.rate_per_s * f)
            ttft.append(s.ttft_p95_ms)
            tpot.append(s.tpot_p95_ms)
        out.append(Curve(o.label, tuple(rates), tuple(ttft), tuple(tpot)))
    return out
