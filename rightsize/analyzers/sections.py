"""Analyzer sections: an analysis that plugs in with its module and one entry in :data:`SECTIONS`.

A section says what it needs (the trace frames it reads), what it returns (a node class of
:mod:`rightsize.node`, one node or a tuple of them), its document key, and its report section (a
title and a table's columns; a section without columns has a view of its own in
``rightsize/reports``). :func:`rightsize.analyzers.analysis.analyze_trace` runs every section on
each rank; the document carries the primary rank's values under their keys, after ``notes``
and in this list's order; the codec reads them back by the node class named here; the html and
text reports draw a section with columns as a table, the JSON report is the document.

The entry names its function and node class as ``"module:attribute"`` text, imported on first
use, so this registry (and reading a document back) imports no analyzer and no polars. A
section's function takes a :class:`SectionInput` and returns its value, or ``None`` when the
trace cannot give one (the key is then left out). Pure.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers.metrics.steps import Steps
    from rightsize.traces.schema import Trace


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a section's report table: a field of its node, shown as ``fmt`` formats
    it (``"{:,.2f}"``; ``None`` is shown as ``-``)."""

    label: str
    field: str
    fmt: str = "{}"


@dataclass(frozen=True, slots=True)
class SectionInput:
    """What a section may read of one rank: its normalized trace, the steps, the primary
    device (``None``: no GPU kernels) and the classified device work (``None``: no steps)."""

    trace: Trace
    steps: Steps
    device: int | None
    work: pl.DataFrame | None


@dataclass(frozen=True, slots=True)
class Section:
    key: str  # the document key (and the report section's anchor)
    title: str  # the report section's title
    compute: str  # "module:function", called with a SectionInput
    node: str  # "module:Class" of the value's node class
    many: bool  # the value is a tuple of nodes (rows), else one node
    needs: tuple[str, ...]  # the trace frames it reads (``rightsize.traces.schema.FRAMES``)
    columns: tuple[Column, ...] = ()  # its report table; empty: it has its own view
    limit: int = 20  # rows a report shows

    def function(self) -> Callable[[SectionInput], Any]:
        fn: Callable[[SectionInput], Any] = _resolve(self.compute)
        return fn

    def node_class(self) -> type:
        cls: type = _resolve(self.node)
        return cls

    def value_type(self) -> Any:
        """The type the codec reads the value as."""
        cls = self.node_class()
        return tuple[cls, ...] if self.many else cls  # type: ignore[valid-type]


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


SECTIONS: list[Section] = [
    Section(
        key="self_ops", title="Top ops by self time",
        compute="rightsize.analyzers.metrics.self_ops:section",
        node="rightsize.analyzers.document.metrics:SelfOp", many=True,
        needs=("cpu_ops", "kernels", "runtime"),
    ),
]


def value_types() -> Mapping[str, Any]:
    """Document key -> the type its value is read as, for every registered section."""
    return {s.key: s.value_type() for s in SECTIONS}


def run(sections: list[Section], rank: SectionInput) -> dict[str, Any]:
    """Every section's value on one rank, in registry order: ``None`` leaves a one-node section
    out, a section of rows is then empty."""
    out: dict[str, Any] = {}
    for s in sections:
        value = s.function()(rank)
        if value is not None or s.many:
            out[s.key] = () if value is None else value
    return out


def empty(sections: list[Section]) -> dict[str, Any]:
    """The sections of a document without a rank (metric logs alone): empty rows."""
    return {s.key: () for s in sections if s.many}
