"""The verdict of one rank as sections: the diagnosis with the classified device work it was
made from (``verdict``), and the document's ``diagnosis`` (the verdict's, with the catalog GPU
the device matched).

Input: a section's view of one rank (:class:`~rightsize.analyzers.sections.SectionInput`: the
trace, steps, primary device, its catalog match, the Nsight Compute rows and GPU samples of the
context). Output: :class:`Verdict`; the rules are :func:`.verdict.diagnose`'s. Nsight Compute
rows of another kind of GPU are left out with a note. Pure.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rightsize.analyzers.diagnosis.advise import ridge_for
from rightsize.analyzers.diagnosis.classify import OpCosts, op_cost_table
from rightsize.analyzers.diagnosis.verdict import diagnose
from rightsize.analyzers.document.diagnosis import Diagnosis
from rightsize.analyzers.metrics.devices import prop
from rightsize.vocab import Signal

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers.sections import SectionInput
    from rightsize.traces.schema import Trace


@dataclass(frozen=True, slots=True)
class Verdict:
    """The rank's diagnosis (``None`` without steps) and its classified device work (kernels,
    or CPU leaf ops), which the top kernels, precision, rules and sizing read."""

    diagnosis: Diagnosis | None
    work: pl.DataFrame | None


def op_costs(rank: SectionInput) -> OpCosts:
    """Section ``op_costs`` (needs nothing: the host ops alone, so it runs beside the steps
    and devices): the roofline's FLOPs and bytes of each op with recorded shapes."""
    return op_cost_table(rank.trace.cpu_ops)


def verdict(rank: SectionInput) -> Verdict:
    """Section ``verdict`` (needs ``step_ranges``, ``device_use``, ``device_match``,
    ``op_costs``)."""
    trace, primary, match = rank.trace, rank.device, rank["device_match"]
    ridge = ridge_for(match.gpu) if match is not None and match.gpu is not None else None
    ncu = ncu_for(trace, primary, rank.context.ncu, rank)
    diag, work = diagnose(trace, rank.steps, primary, ridge, ncu, rank.context.gpu_samples,
                          op_costs=rank["op_costs"])
    if ncu is not None and diag is not None and work.height and "signal" in work.columns \
            and not (work["signal"] == Signal.NCU).any():
        rank.note("no kernel of the trace matched a kernel of the Nsight Compute rows (by "
                  "name): they did not classify any kernel; profile the same job with ncu")
    return Verdict(diag, work)


def diagnosis(rank: SectionInput) -> Diagnosis | None:
    """Section ``diagnosis`` (needs ``verdict``, ``device_match``)."""
    d = rank["verdict"].diagnosis
    return None if d is None else dataclasses.replace(d, device_match=rank["device_match"])


def ncu_for(trace: Trace, device: int | None, ncu: pl.DataFrame | None,
            rank: SectionInput) -> pl.DataFrame | None:
    """The Nsight Compute rows, unless they were recorded on another kind of GPU than the
    trace's primary device (by compute capability): then they are left out, with a note."""
    if ncu is None or device is None or "compute_capability" not in ncu.columns:
        return ncu
    major, minor = prop(trace, device, "compute_major"), prop(trace, device, "compute_minor")
    theirs = sorted({c for c in ncu["compute_capability"].drop_nulls().to_list()})
    if major is None or minor is None or not theirs or f"{major}.{minor}" in theirs:
        return ncu
    rank.note(f"the Nsight Compute rows were recorded on compute capability "
              f"{', '.join(theirs)}, the trace's GPU is {major}.{minor}: they are not used "
              "(another GPU's speed of light does not classify these kernels)")
    return None
