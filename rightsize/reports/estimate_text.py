"""The text of ``rightsize estimate``: the memory per GPU by kind, rows that sum to the total,
the assumptions, then where it fits, the cheapest placement first.

Input: a :class:`~rightsize.analyzers.sizing.estimator.MemoryEstimate`, the placements of
:func:`~rightsize.analyzers.sizing.placement.place`, the headroom, the suggestions when it fits
nowhere. Output: lines of text (the CLI wraps them to the terminal). Pure.
"""

from __future__ import annotations

from typing import Any

from rightsize.analyzers.sizing.placement import Placement, cheapest_first
from rightsize.reports import fmt

# Placements listed without --all: the cheapest few are what a reader chooses between.
SHORT_LIST = 5


def _gib(n: int) -> str:
    return f"{n / 2**30:,.2f} GiB"


def memory_rows(result: Any) -> list[str]:
    """The parts per GPU, then, where backward frees activations as it makes gradients (no
    gradient accumulation), the smaller of the two as its own negative row: the rows sum to
    the total."""
    m = result.memory
    rows = [("weights", m.weights_bytes), ("gradients", m.gradients_bytes),
            ("optimizer", m.optimizer_bytes), ("activations", m.activations_bytes),
            ("kv_cache", m.kv_cache_bytes), ("overhead", m.overhead_bytes)]
    parts = sum(v for _, v in rows)
    if parts != m.total_bytes:  # gradients_overlap_activations
        rows.append(("not at once", m.total_bytes - parts))
    out = [f"  {label:<12} {_gib(value):>14}" for label, value in rows]
    if parts != m.total_bytes:
        out[-1] += "  (gradients replace activations during backward: the smaller counts once)"
    out.append(f"  {'total':<12} {_gib(m.total_bytes):>14}")
    return out


def placement_lines(placements: tuple[Placement, ...], headroom: float,
                    show_all: bool) -> list[str]:
    """Where it fits, the cheapest per hour first; the first with its parallelism and
    interconnect, the next few on a line each (``show_all``: every one)."""
    fits = cheapest_first(placements)
    if not fits:
        return [f"\nfits on no catalog GPU (with {headroom:.0%} headroom)"]
    best = fits[0]
    how = (f"; {best.node_words}, {best.parallelism}; {best.interconnect}" if best.gpus > 1
           else "")
    out = [(f"\ncheapest that fits (with {headroom:.0%} headroom): {_where(best)},"
            f" {_price(best)}{how}")]
    shown = fits if show_all else fits[:SHORT_LIST]
    out.append(f"fits, cheapest first ({len(shown)} of {len(fits)}"
               + ("" if show_all or len(fits) <= SHORT_LIST else "; --all lists every one")
               + "):")
    for p in shown:
        line = f"  {_where(p)}: {_price(p)}, {_gib(p.memory_bytes_per_gpu)} per GPU"
        if show_all and p.gpus > 1:
            line += f", {p.parallelism}; {p.interconnect}"
        out.append(line)
    lacking = [p.unsupported for p in placements if p.unsupported]
    if lacking:
        out.append("cannot run it: " + "; ".join(lacking))
    return out


def _where(p: Placement) -> str:
    return f"{p.gpus} x {p.gpu}" + (f" on {p.nodes} nodes" if p.nodes > 1 else "")


def _price(p: Placement) -> str:
    return f"{fmt.usd(p.usd_per_hour)}/hour" if p.usd_per_hour is not None else "no price"
