"""Analyzer sections: an analysis that plugs in with its module and one entry in :data:`SECTIONS`.

A section says what it reads (``needs``: other sections, whose values it gets; ``frames``: the
trace frames), what it returns (a node class of :mod:`rightsize.node`, one node or a tuple of
them; no node: a value other sections read, kept out of the document), its document key and
place (``head``: among the primary rank's keys before ``ranks``, else after ``notes``), and its
report section (a title and a table's columns; a section without columns has a view of its own
in ``rightsize/reports``). :func:`rightsize.analyzers.analysis.analyze_trace` runs every section
on each rank, each after those it needs (:func:`order`); the document carries the primary rank's
values under their keys, in this list's order within each place; the codec reads them back by
the node class named here; the html and text reports draw a section with columns as a table.

The entry names its function and node class as ``"module:attribute"`` text, imported on first
use, so this registry (and reading a document back) imports no analyzer and no polars. A
section's function takes a :class:`SectionInput` and returns its value, or ``None`` when the
trace cannot give one (a section of rows is then empty). Pure, but for the notes it adds.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers.analysis import Context
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
    """What a section may read of one rank: its normalized trace, the analysis' context
    (catalog, Nsight Compute rows, samples, options), the values of the sections it needs
    (``rank["verdict"]``) and a list its notes go to (:meth:`note`)."""

    trace: Trace
    context: Context
    values: Mapping[str, Any]
    notes: list[str]

    def __getitem__(self, key: str) -> Any:
        try:
            return self.values[key]
        except KeyError:
            raise KeyError(f"section value {key!r} was not declared in the section's needs") \
                from None

    def note(self, text: str) -> None:
        """Say once, in the document's notes, what could not be measured and why."""
        self.notes.append(text)

    @property
    def steps(self) -> Steps:
        """The rank's steps (needs ``step_ranges``)."""
        steps: Steps = self["step_ranges"]
        return steps

    @property
    def device(self) -> int | None:
        """The primary device, ``None`` without GPU kernels (needs ``device_use``)."""
        device: int | None = self["device_use"].primary
        return device

    @property
    def work(self) -> pl.DataFrame | None:
        """The classified device work, ``None`` without steps (needs ``verdict``)."""
        work: pl.DataFrame | None = self["verdict"].work
        return work


@dataclass(frozen=True, slots=True)
class Section:
    key: str  # the document key (and the report section's anchor), what ``needs`` names
    compute: str  # "module:function", called with a SectionInput
    node: str | None = None  # "module:Class" of the value's node class; None: not in the document
    many: bool = False  # the value is a tuple of nodes (rows), else one node
    needs: tuple[str, ...] = ()  # the sections whose values it reads (computed first)
    frames: tuple[str, ...] = ()  # the trace frames it reads (``rightsize.traces.schema.FRAMES``)
    head: bool = False  # written with the primary rank's keys before ``ranks`` (else after notes)
    required: bool = False  # a document without the key is refused (the keys of version 1)
    missing: str | None = None  # "module:attr": the value of a document without ranks
    title: str = ""  # the report section's title
    columns: tuple[Column, ...] = ()  # its report table; empty: it has its own view
    limit: int = 20  # rows a report shows

    def function(self) -> Callable[[SectionInput], Any]:
        fn: Callable[[SectionInput], Any] = _resolve(self.compute)
        return fn

    def node_class(self) -> type:
        cls: type = _resolve(self.node or "")
        return cls

    def value_type(self) -> Any:
        """The type the codec reads the value as."""
        cls = self.node_class()
        if self.many:
            return tuple[cls, ...]  # type: ignore[valid-type]
        return cls if self.missing is not None else cls | None  # missing: never null

    def empty(self) -> Any:
        """The value of a document without ranks (metric logs alone)."""
        if self.missing is not None:
            return _resolve(self.missing)
        return () if self.many else None


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _entry(key: str, compute: str, needs: tuple[str, ...], frames: tuple[str, ...] = (),
           node: str | None = None, **more: Any) -> Section:
    return Section(key=key, compute=f"rightsize.analyzers.{compute}", needs=needs, frames=frames,
                   node=f"rightsize.analyzers.document.{node}" if node else None, **more)


def _head(key: str, compute: str, needs: tuple[str, ...], node: str, **more: Any) -> Section:
    return _entry(key, compute, needs, node=node, head=True, required=True, **more)


_RANK = ("step_ranges", "device_use")
_WORK = (*_RANK, "verdict")

SECTIONS: list[Section] = [
    # the rank's own values, which the document's sections read
    _entry("step_ranges", "metrics.steps:section", (), ("steps", "cpu_ops", "kernels")),
    _entry("device_use", "metrics.devices:section", ("step_ranges",), ("kernels", "devices")),
    _entry("device_match", "metrics.devices:match", ("device_use",), ("devices",)),
    _entry("hta", "metrics.headline:temporal", (), ("kernels", "transfers", "runtime")),
    _entry("memory_peaks", "metrics.headline:memory", (), ("memory",)),
    _entry("op_costs", "diagnosis.section:op_costs", (), ("cpu_ops",)),
    _entry("verdict", "diagnosis.section:verdict", (*_RANK, "device_match", "op_costs"),
           ("kernels", "cpu_ops", "transfers", "runtime")),
    # the document's keys before ``ranks``: the primary rank's
    _head("steps", "metrics.steps:stats", (*_RANK, "verdict"), "metrics:StepStats",
          frames=("kernels", "transfers"),
          missing="rightsize.analyzers.document.metrics:NO_STEPS"),
    _head("metrics", "metrics.headline:section", (*_RANK, "hta", "memory_peaks"),
          "metrics:Metrics", frames=("kernels", "transfers", "memory"),
          missing="rightsize.analyzers.document.metrics:NO_METRICS"),
    _head("diagnosis", "diagnosis.section:diagnosis", ("verdict", "device_match"),
          "diagnosis:Diagnosis"),
    _head("recommendations", "diagnosis.measures:recommendations",
          (*_WORK, "device_match", "hta", "memory_peaks", "sizing", "precision"),
          "diagnosis:Recommendation",
          many=True, frames=("kernels", "cpu_ops", "transfers", "runtime")),
    _head("sizing", "sizing.workload:section", (*_WORK, "memory_peaks"), "sizing:Sizing",
          frames=("kernels", "transfers", "cpu_ops", "devices")),
    _head("precision", "metrics.precision:section", ("verdict", "device_match"),
          "sizing:PrecisionMix"),
    _head("timeline", "metrics.timeline:section", _RANK, "sizing:Timeline",
          frames=("kernels",)),
    _head("top_kernels", "metrics.top:top_kernels", ("verdict",), "metrics:TopKernel",
          many=True, frames=("kernels",)),
    _head("top_ops", "metrics.top:top_ops", (), "metrics:TopOp", many=True,
          frames=("cpu_ops", "kernels")),
    # the document's keys after ``notes``
    _entry("self_ops", "metrics.self_ops:section", (), ("cpu_ops", "kernels", "runtime"),
           "metrics:SelfOp", many=True, title="Top ops by self time"),
]


def order(sections: list[Section]) -> list[Section]:
    """The sections in an order where each comes after those it needs (else in list order);
    a need no section provides, or a cycle, is a bug of the registry (``ValueError``)."""
    by_key = {s.key: s for s in sections}
    done: dict[str, Section] = {}

    def visit(s: Section, path: tuple[str, ...]) -> None:
        if s.key in done:
            return
        if s.key in path:
            raise ValueError(f"sections need each other: {' -> '.join((*path, s.key))}")
        for need in s.needs:
            if need not in by_key:
                raise ValueError(f"section {s.key!r} needs {need!r}, which no section provides")
            visit(by_key[need], (*path, s.key))
        done[s.key] = s

    for s in sections:
        visit(s, ())
    return list(done.values())


def run(sections: list[Section], trace: Trace, context: Context,
        notes: list[str], threads: int = 1) -> dict[str, Any]:
    """Every section's value on one rank, each after those it needs: ``None`` where a
    section has no value (a section of rows is then empty).

    ``threads`` > 1 runs sections that do not need each other at once (polars and numpy
    release the GIL in their kernels). The result is the same either way: each section's notes
    are added in :func:`order`'s order, and a section that fails raises as it would alone
    (the first failure in that order)."""
    ordered = order(sections)
    if threads <= 1:
        values: dict[str, Any] = {}
        for s in ordered:
            values[s.key] = _compute(s, trace, context, values, notes)
        return values
    return _run_threads(ordered, trace, context, notes, threads)


def _compute(s: Section, trace: Trace, context: Context, values: Mapping[str, Any],
             notes: list[str]) -> Any:
    value = s.function()(SectionInput(trace, context, {k: values[k] for k in s.needs}, notes))
    return () if value is None and s.many else value


def _run_threads(ordered: list[Section], trace: Trace, context: Context, notes: list[str],
                 threads: int) -> dict[str, Any]:
    """:func:`run` on a pool of ``threads``: a section starts once all it needs are done; of
    those ready, the one more sections wait for goes first (the chain through ``verdict``
    before the leaves). After a failure nothing more starts."""
    dependents = _dependents(ordered)
    waiting = sorted(ordered, key=lambda s: -dependents[s.key])  # stable: ties in order
    values: dict[str, Any] = {}
    own: dict[str, list[str]] = {s.key: [] for s in ordered}
    failed: dict[str, BaseException] = {}
    running: dict[Future[Any], Section] = {}
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="section") as pool:
        while waiting or running:
            ready = [] if failed else [s for s in waiting if all(n in values for n in s.needs)]
            for s in ready[:threads - len(running)]:  # queued in the pool, it could not wait
                waiting.remove(s)
                running[pool.submit(_compute, s, trace, context, values, own[s.key])] = s
            if not running:
                break  # a failure left the rest waiting on it
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                s = running.pop(f)
                try:
                    values[s.key] = f.result()
                except Exception as exc:  # noqa: BLE001 - raised below, in order
                    failed[s.key] = exc
    for s in ordered:
        if s.key in failed:
            raise failed[s.key]
        notes.extend(own[s.key])
    return {s.key: values[s.key] for s in ordered}


def _dependents(sections: list[Section]) -> dict[str, int]:
    """How many sections need each one, directly or through others."""
    need_me: dict[str, set[str]] = {s.key: set() for s in sections}
    for s in reversed(sections):  # in order: whatever needs a section comes after it
        for n in s.needs:
            need_me[n] |= need_me[s.key] | {s.key}
    return {k: len(v) for k, v in need_me.items()}


def published(sections: list[Section], values: Mapping[str, Any], head: bool) -> dict[str, Any]:
    """The values the document writes in one place (``head``, else after ``notes``), in list
    order: a section after ``notes`` without a value has no key."""
    return {s.key: values[s.key] for s in sections
            if s.node is not None and s.head == head and s.key in values
            and (head or values[s.key] is not None)}


def empty(sections: list[Section], head: bool) -> dict[str, Any]:
    """The values of a document without a rank (metric logs alone), in one place."""
    return published(sections, {s.key: s.empty() for s in sections}, head)


def value_types(head: bool) -> Mapping[str, Any]:
    """Document key -> the type its value is read as, for the sections of one place."""
    return {s.key: s.value_type() for s in SECTIONS if s.node is not None and s.head == head}


def required_keys() -> frozenset[str]:
    """The keys every document has (reading one without them is refused)."""
    return frozenset(s.key for s in SECTIONS if s.required)
