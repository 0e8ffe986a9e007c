"""The mixed-GPU option of a plan (Melange, Griggs et al. 2024): short requests on one GPU type,
long ones on another, each pool sized by the simulation for its own class at its share of the
rate, kept when the pair costs less than the best single type.

Input: the feasible deployments (:class:`~.search.Candidate`), a :class:`~.plan.Load` from a
requests CSV, the SLOs, the search :class:`~.search.Space` and the recommended single-type plan.
Output: a :class:`~.plan.Mixed` (or None) and, when None, why. Pure.

1. Thresholds: the 25th, 50th and 75th percentile of the requests' lengths (prompt + output
   tokens); requests at or under it are short. Each class keeps its own arrival times, so it
   arrives at its share of the rate.
2. Per class the fast path screens every configuration of every GPU type, only to pick the
   :data:`SHORTLIST` types it finds cheapest for that class (it decides nothing: its p95s can
   be far off near capacity, which would hide a cheaper pair).
3. Each shortlisted type gets the search the single plan gets, on that class alone
   (:func:`~.search.search` over the type's deployments: simulated in cost order, only
   simulated p95s decide); its cheapest configuration meeting both SLOs is its cost for the
   class. The cheapest pair of two different types under the single plan's cost is the option.
   At most :data:`MAX_SIMULATIONS` simulations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rightsize.analyzers.serving.load import rate_of, subset
from rightsize.analyzers.serving.plan import Load, Mixed, Option, Slo
from rightsize.analyzers.serving.search import Candidate, Space, first_replicas, screen, search

QUANTILES = (25.0, 50.0, 75.0)
SHORTLIST = 3  # GPU types per class searched in simulation, the fast path's cheapest first
MAX_SIMULATIONS = 120
SAME_LENGTH = "no mixed-GPU option: every request has the same length"


@dataclass(frozen=True, slots=True)
class _Class:
    """One length class at one threshold: its load and, per GPU type, the fast path's
    cheapest cost and the deployments of that type."""

    load: Load
    share: float
    fast_cost: dict[str, float]
    of_gpu: dict[str, list[Candidate]]


def mixed(found: list[Candidate], load: Load, slo: Slo, space: Space,
          best: Option) -> tuple[Mixed | None, str]:
    """The cheapest simulated split of ``load`` between two GPU types, if under ``best``."""
    if load.csv is None:
        return None, SAME_LENGTH
    length = load.csv.prompt_tokens + load.csv.output_tokens
    if np.unique(length).size < 2:
        return None, SAME_LENGTH
    classes: dict[int, tuple[_Class, _Class]] = {}
    for q in QUANTILES:
        cut = int(np.percentile(length, q))
        short = length <= cut
        if short.all() or not short.any() or cut in classes:
            continue
        classes[cut] = (_class(found, load, short, slo, space),
                        _class(found, load, ~short, slo, space))
    chosen: Mixed | None = None
    sims = 0
    for cut, pair in classes.items():
        sides: list[dict[str, Option]] = []
        for cls in pair:
            met: dict[str, Option] = {}
            for gpu in sorted(cls.fast_cost, key=cls.fast_cost.__getitem__)[:SHORTLIST]:
                if sims >= MAX_SIMULATIONS:
                    break
                o, n = _cheapest_met(cls, gpu, slo, space)
                sims += n
                if o is not None:
                    met[gpu] = o
            sides.append(met)
        for ga, a in sides[0].items():
            for gb, b in sides[1].items():
                total = a.cost_per_hour_usd + b.cost_per_hour_usd
                if ga != gb and total < best.cost_per_hour_usd and (
                        chosen is None or total < chosen.cost_per_hour_usd):
                    chosen = Mixed(cut, a, b, 100 * pair[0].share, total,
                                   100 * (1 - total / best.cost_per_hour_usd))
    if chosen is not None:
        return chosen, ""
    return None, ("no mixed-GPU option: no split of short and long requests between two GPU "
                  "types meets the SLOs in simulation for less than the recommended plan")


def _class(found: list[Candidate], load: Load, keep: np.ndarray, slo: Slo,
           space: Space) -> _Class:
    assert load.csv is not None
    part = subset(load.csv, keep)
    rate = rate_of(part) if int(keep.sum()) > 1 else load.rate_per_s
    sub = Load.of_csv(part, rate, load.source, load.seed)
    fast: dict[str, float] = {}
    of_gpu: dict[str, list[Candidate]] = {}
    for c in found:
        of_gpu.setdefault(c.dep.gpu, []).append(c)
        reps = first_replicas(screen(c, sub, slo, space))
        if reps is not None:
            cost = c.cost(reps)
            fast[c.dep.gpu] = min(cost, fast.get(c.dep.gpu, np.inf))
    return _Class(sub, float(keep.mean()), fast, of_gpu)


def _cheapest_met(cls: _Class, gpu: str, slo: Slo, space: Space) -> tuple[Option | None, int]:
    """The cheapest configuration of ``gpu`` that serves this class within both SLOs in
    simulation (the single plan's search over that type's deployments), and how many
    simulations it took."""
    got = search(cls.of_gpu[gpu], cls.load, slo, space, [])
    met = [o for o in got.options if o.meets]
    return (min(met, key=lambda o: o.cost_per_hour_usd) if met else None), got.simulated
