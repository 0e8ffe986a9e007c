"""The sizing objective, and when a recommendation is earned at all.

Inputs: the candidates ``projection`` made, the workload, the constraints. Outputs: whether a
candidate meets the objective, the cost/time frontier, the cheaper-but-slower option the
default objective passes over, and the reason no GPU may be recommended. Pure.

Objectives (``--objective``):

* ``time`` (default): the cheapest GPU whose projected step - its whole range of the GPU part,
  up to its high end - is no slower than the measured step by more than ``--slower-ok`` (10% by
  default). A job moved for money should not quietly get slower; a slower GPU is listed as an
  option. (The range's host part, how much the host's time moves between machines, moves the
  current machine's step too, so it does not count against a candidate.)
* ``cost``: the cheapest per step, however slow (targets still apply).

A recommendation is earned only when the evidence supports one: not when the diagnosis is
inconclusive (the step may not be what was measured), not for a CPU-only run (its op-level
FLOPs and bytes are no model of GPU kernels), and never a GPU with less memory than the
current one while peak memory is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

from rightsize.analyzers.document.sizing import Candidate, Objective
from rightsize.analyzers.sizing.model import Constraints, Workload
from rightsize.catalog import Gpu
from rightsize.vocab import Bound

__all__ = ["Objective", "allowed", "cheaper_slower", "frontier", "label", "meets", "unearned"]


def meets(step_ms: float | None, high_ms: float | None, workload: Workload,
          constraints: Constraints, is_current: bool) -> bool:
    """Does a candidate with this projected step (and range top) meet the objective?"""
    if is_current or constraints.objective == Objective.COST or workload.current_device_name \
            is None:
        return True
    worst = high_ms if high_ms is not None else step_ms
    return worst is not None and worst <= workload.step_ms * (1 + constraints.slower_ok_pct / 100)


def unearned(workload: Workload, current: Gpu | None) -> str | None:
    """Why no GPU may be recommended for this workload (``None``: one may)."""
    if workload.bound == Bound.INCONCLUSIVE:
        return ("no GPU is recommended: the diagnosis is inconclusive, so the measured step may "
                "not be the job's (its evidence says what to record)")
    if current is None and workload.current_device_name is None:
        return ("no GPU is recommended for a CPU-only run: its op-level FLOPs and bytes are no "
                "model of GPU kernels (the candidates' projections are rough); record a step on "
                "a GPU (rightsize run on one), or size the model with rightsize estimate")
    return None


def allowed(c: Candidate, current: Gpu | None, catalog_memory: dict[str, int],
            peak_known: bool) -> bool:
    """A candidate that may be recommended as far as the evidence goes: with peak memory
    unknown, only a GPU with at least the current one's memory (where the job ran)."""
    if peak_known or current is None:
        return True
    return catalog_memory.get(c.gpu, 0) * c.gpus >= current.memory_bytes


def label(c: Candidate) -> str:
    return c.gpu if c.gpus == 1 else f"{c.gpus} x {c.gpu}"


def _usable(cands: Sequence[Candidate]) -> list[Candidate]:
    return [c for c in cands if c.fits_memory is not False and c.recommendable
            and c.usd_per_1k_steps is not None and c.projected_step_ms is not None]


def frontier(cands: Sequence[Candidate]) -> tuple[str, ...]:
    """The candidates no other beats on both cost per step and step time, cheapest first."""
    pool = _usable(cands)
    out = []
    for c in pool:
        cost, step = c.usd_per_1k_steps or 0.0, c.projected_step_ms or 0.0
        beaten = any((o.usd_per_1k_steps or 0.0) <= cost and (o.projected_step_ms or 0.0) <= step
                     and ((o.usd_per_1k_steps or 0.0) < cost or (o.projected_step_ms or 0.0) < step)
                     for o in pool)
        if not beaten:
            out.append(c)
    out.sort(key=lambda c: (c.usd_per_1k_steps, c.projected_step_ms))
    return tuple(dict.fromkeys(label(c) for c in out))


def cheaper_slower(cands: Sequence[Candidate], best: Candidate | None) -> Candidate | None:
    """The cheapest candidate that meets the targets but not the objective, when it is cheaper
    than the pick: what ``--objective cost`` would choose."""
    pool = [c for c in _usable(cands) if c.meets_constraints and not c.meets_objective]
    if not pool:
        return None
    cheapest = min(pool, key=lambda c: (c.usd_per_1k_steps, c.projected_step_ms))
    if best is not None and best.usd_per_1k_steps is not None \
            and (cheapest.usd_per_1k_steps or 0.0) >= best.usd_per_1k_steps:
        return None
    return cheapest
