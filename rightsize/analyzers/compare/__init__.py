"""Compare two analyses: what changed between two runs, or between two GPUs.

:func:`compare_sides` takes two :class:`Side` objects (each a typed analysis document, with the
primary rank's ``kernels`` and ``cpu_ops`` frames when it was analyzed here) and returns a frozen
:class:`~.result.Comparison` whose ``to_json`` is the contract in docs/compare.md. Ops are
matched by call path (:mod:`.attribution`), kernels by normalized name, steps and shares from
the documents (:mod:`.diff`). Pure: no printing, no files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rightsize.analyzers.compare.attribution import SideTimes, side_times
from rightsize.analyzers.compare.diff import Side, compare
from rightsize.analyzers.compare.rates import pct_of_peak
from rightsize.analyzers.compare.result import Change, Comparison, ProjectionCheck, SideInfo

if TYPE_CHECKING:
    from rightsize.catalog import Catalog

__all__ = ["Change", "Comparison", "ProjectionCheck", "Side", "SideInfo", "SideTimes",
           "compare_sides"]


def compare_sides(a: Side, b: Side, catalog: Catalog | None = None) -> Comparison:
    """Match ``a`` and ``b`` by call path when both have frames, else by their top-ops tables;
    with a ``catalog``, kernel-group reasons also say the fraction of peak each side achieved."""
    frames = None
    if a.kernels is not None and b.kernels is not None \
            and a.cpu_ops is not None and b.cpu_ops is not None:
        frames = (side_times(a.kernels, a.cpu_ops, a.document.steps.count),
                  side_times(b.kernels, b.cpu_ops, b.document.steps.count))
    peaks = tuple(pct_of_peak(s.work, s.document.sizing.current if s.document.sizing else None,
                              catalog) for s in (a, b))
    return compare(a, b, frames, (peaks[0], peaks[1]))
