"""Measured per-operator tables, one :class:`~.timer.Timer` per GPU that has them.

:class:`Tables` maps catalog GPU names to timers; :func:`default_tables` is what a step model
uses when given none (cached per process).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from rightsize.analyzers.serving.timer import Timer
from rightsize.catalog import Gpu


@dataclass(frozen=True, slots=True)
class Tables:
    """Timers of the GPUs with measured tables (catalog name -> timer), and where from."""

    timers: Mapping[str, Timer] = field(default_factory=dict)
    source: str = "none: every GPU gets the per-kernel projection"

    def timer_for(self, gpu: Gpu) -> Timer | None:
        return self.timers.get(gpu.name)


@cache
def default_tables() -> Tables:
    """The tables found at run time (none yet: the per-kernel projection for every GPU)."""
    return Tables()
