"""Job-level diagnosis: the stragglers as rules with a what-if, and the verdict's evidence.

Input: the :class:`~rightsize.analyzers.document.job.Job` and the primary rank's diagnosis.
Output: :class:`~rightsize.analyzers.document.diagnosis.Recommendation` nodes (one per
straggler, at most :data:`MAX_RULES`, the largest impact first) and the evidence sentences the
verdict gains. A straggler rule's what-if: the job's step without the time the others waited
for that rank alone (``late_ms_per_step``) at best, half of it at worst, three quarters as the
point (the second-last rank then sets the pace, and part of the delay may be the rank's own
share of the work). Pure.
"""

from __future__ import annotations

import dataclasses

from rightsize.analyzers.diagnosis.evidence import FILTERED
from rightsize.analyzers.document.diagnosis import Diagnosis, Evidence, Recommendation, WhatIf
from rightsize.analyzers.document.job import Job, Straggler
from rightsize.analyzers.job.stragglers import THRESHOLDS
from rightsize.vocab import Bound

MAX_RULES = 3
WHAT_IF_POINT, WHAT_IF_WORST = 0.75, 0.5

_ACTION = {
    "dataloader": ("Its data loader keeps it waiting: more DataLoader workers (num_workers), "
                   "pin_memory and prefetch_factor on that rank, data local to its node, and "
                   "an even split of the dataset (DistributedSampler, equal shard sizes)."),
    "compute": ("It has more GPU work than the others: balance the split (equal batch or "
                "sequence lengths per rank, bucketed or packed sequences, an even sharding of "
                "embeddings or layers)."),
    "host": ("Its GPU idles while its host works: find the Python, logging, checkpointing or "
             "synchronizing work that runs on that rank only (rank 0 chores), move it off the "
             "step or spread it, and check that node for CPU contention."),
    "copy": ("Its host-device copies take longer: pinned memory and non_blocking copies on "
             "that rank, and the PCIe/NUMA placement of its GPU."),
    "unknown": ("Its lead-in to the collectives is no longer than the others': the delay "
                "comes from before them (a late step start: host contention, an earlier "
                "stall); profile that rank's step start and its node."),
}


def recommendations(job: Job, step_ms: float | None = None,
                    diagnosis: Diagnosis | None = None) -> tuple[Recommendation, ...]:
    """One rule per straggler (see the module docstring); none when the primary rank's
    ``diagnosis`` found its trace filtered after recording (evidence ``filtered``): the calls
    matched by order across sampled ranks name a straggler from what the sampling kept (HTA's
    two sampled ranks of a 128-rank job: rank 1 'last at every call')."""
    if diagnosis is not None and any(e.share == FILTERED for e in diagnosis.evidence_items):
        return ()
    step = step_ms if step_ms is not None else job.step_ms_mean
    return tuple(_rule(s, step) for s in job.stragglers[:MAX_RULES])


def _rule(s: Straggler, step_ms: float | None) -> Recommendation:
    evidence = (f"rank {s.rank}: last at {s.last_calls} of {s.calls} collectives "
                f"({s.last_pct:.1f}%; a straggler from "
                f"{THRESHOLDS.last_share_over_chance:g}x the 1/n chance share, or from "
                f"{100 * THRESHOLDS.dominant_late_share:g}% of the job's lateness), "
                f"{s.late_ms_per_step:.3f} ms per step of the others' wait (at least "
                f"{THRESHOLDS.min_late_pct_of_step:g}% of the step); matched across ranks by "
                "each call's arrivals (kernel starts)")
    what_if = None
    if step_ms:
        late = min(s.late_ms_per_step, step_ms)
        what_if = WhatIf(step_ms - late * WHAT_IF_POINT, step_ms - late,
                         step_ms - late * WHAT_IF_WORST,
                         "the others no longer wait for this rank alone: all of its lateness "
                         "at best, half at worst")
    detail = f"{s.text[0].upper()}{s.text[1:]}. {_ACTION.get(s.cause, _ACTION['unknown'])}"
    return Recommendation("straggler", f"Rank {s.rank} holds up the collectives", detail,
                          evidence, what_if)


def with_job_evidence(diagnosis: Diagnosis | None, job: Job) -> Diagnosis | None:
    """The verdict with what the ranks together show about its communication: how much of it
    is waiting for the last rank, and who that is."""
    if diagnosis is None or job.communication_ms_per_step is None or \
            not job.communication_ms_per_step:
        return diagnosis
    wait = job.wait_ms_per_step or 0.0
    comm = job.communication_ms_per_step
    text = (f"across the job's {job.rank_count} ranks, collectives take "
            f"{comm:.3f} ms per step per rank, {100 * wait / comm:.0f}% of it waiting for the "
            "last rank to arrive")
    if job.stragglers:
        s = job.stragglers[0]
        text += f"; {s.text}"
    # right after the communication share on a communication-bound verdict, else last
    at = 1 if diagnosis.bound == Bound.COMMUNICATION else len(diagnosis.evidence)
    items = diagnosis.evidence_items
    if len(items) == len(diagnosis.evidence):  # the items and their sentences stay in step
        item = Evidence(str(Bound.COMMUNICATION), 100 * wait / comm, None, text)
        items = (*items[:at], item, *items[at:])
    return dataclasses.replace(diagnosis, evidence=(*diagnosis.evidence[:at], text,
                                                    *diagnosis.evidence[at:]),
                               evidence_items=items)
