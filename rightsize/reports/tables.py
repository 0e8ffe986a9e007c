"""The table-like sections of the report model: kernels, ops, memory, candidate GPUs and
recommendations.

Input: parts of the typed analysis document (:mod:`rightsize.analyzers.document`). Output:
frozen dataclasses of plain values (``empty`` is ``None`` when a section has something to show,
else the reason). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rightsize.analyzers.document import Document
from rightsize.analyzers.document import diagnosis as dd
from rightsize.analyzers.document import sizing as ds
from rightsize.analyzers.document.metrics import SelfOp, TopKernel, TopOp
from rightsize.analyzers.sections import Section
from rightsize.catalog.catalog import DATE_SEEN
from rightsize.reports import fmt
from rightsize.reports.sections import NamedValue

Classes = Mapping[str, tuple[str | None, str | None]]

MAX_CANDIDATE_ROWS = 20
MAX_CHART_POINTS = 200


@dataclass(frozen=True, slots=True)
class KernelRow:
    name: str
    calls: int
    total_ms: float | None
    mean_us: float | None
    pct: float | None
    kind: str | None  # compute / memory
    signal: str | None  # ncu / counters / roofline / name


@dataclass(frozen=True, slots=True)
class OpRow:
    name: str
    calls: int
    host_ms: float | None
    gpu_ms: float | None
    kernels: int
    kind: str | None
    signal: str | None
    self_ms: float | None = None  # None: an older document without self times
    path: tuple[str, ...] = ()  # enclosing ops, outermost first (without the op itself)
    module: str | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    capacity_bytes: int | None
    used_pct: float | None
    devices: tuple[NamedValue, ...]
    empty: str | None


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """One candidate GPU as the sizing table shows it: the document's node, and what the row
    says of it (now, recommended, where its price comes from)."""

    candidate: ds.Candidate
    current: bool
    recommended: bool
    price_source: str | None
    price_undated: bool = False  # no source dates the price: "?" in price_source

    @property
    def label(self) -> str:
        c = self.candidate
        return c.gpu if c.gpus == 1 else f"{c.gpus} × {c.gpu}"


UNDATED_MARK = "?"


@dataclass(frozen=True, slots=True)
class PrecisionRow:
    name: str  # a precision, or a kernel group
    precision: str | None
    pct: float | None  # of kernel time
    ms: float | None


@dataclass(frozen=True, slots=True)
class PrecisionView:
    """The precision the kernels ran at (``metrics/precision.py``), by time."""

    workload: str | None
    mix: tuple[PrecisionRow, ...]  # one row per precision: % of the time with a known precision
    unknown_pct: float  # % of all kernel time whose precision is unknown
    groups: tuple[PrecisionRow, ...]  # kernel groups, longest first


@dataclass(frozen=True, slots=True)
class SizingView:
    verdict: str | None
    reason: str | None
    current_note: str | None
    rows: tuple[CandidateRow, ...]  # top rows for the table
    chart_points: tuple[CandidateRow, ...]  # every priced, projected candidate (capped)
    hidden: int  # candidates left out of the table
    empty: str | None
    no_chart: str | None = None  # why the candidates are not charted (a chart that says nothing)


def signal_index(diagnosis: dd.Diagnosis | None) -> dict[str, tuple[str | None, str | None]]:
    """Kernel group -> (compute/memory class, the signal that decided it)."""
    return {g.group or "": (g.class_, g.signal) for g in diagnosis.signals} if diagnosis else {}


def _classify(name: str, index: Classes) -> tuple[str | None, str | None]:
    if name in index:
        return index[name]
    # A group may name a family ("gemm", "elementwise"): the longest one in the name decides.
    lower = name.lower()
    hits = [g for g in index if len(g) >= 3 and g.lower() in lower]
    return index[max(hits, key=len)] if hits else (None, None)


# What a kernel or op whose name the capture lost (null in the document) is shown as.
UNNAMED = "(name not recorded)"


def kernel_row(k: TopKernel, index: Classes) -> KernelRow:
    name = k.name if k.name is not None else UNNAMED
    kind, signal = (k.class_, k.signal) if k.class_ is not None else _classify(name, index)
    return KernelRow(name, k.calls, k.total_ms, k.mean_us, k.pct, kind, signal)


def op_row(o: TopOp, index: Classes) -> OpRow:
    name = o.name if o.name is not None else UNNAMED
    kind, signal = _classify(name, index)
    return OpRow(name, o.calls, o.host_ms, o.gpu_ms, o.kernels, kind, signal)


def self_op_row(o: SelfOp, index: Classes) -> OpRow:
    kind, signal = _classify(o.name, index)
    return OpRow(o.name, o.calls, o.host_ms, o.gpu_ms, o.kernels, kind, signal, o.self_ms,
                 tuple(o.path[:-1]), o.module)


def memory(doc: Document) -> Memory:
    m = doc.metrics
    primary = doc.primary_device
    cap = primary.memory_bytes if primary else None
    peak = m.peak_memory_bytes
    devices = tuple(
        NamedValue("host" if r.device < 0 else f"device {r.device}",
                   fmt.nbytes(r.peak_allocated_bytes),
                   "relative to the start of the trace" if r.relative else None)
        for r in m.memory)
    return Memory(
        peak, m.peak_reserved_bytes, cap,
        100.0 * peak / cap if peak is not None and cap else None,
        devices,
        None if peak is not None else
        "No memory events in the trace (record with profile_memory=True).",
    )


def sizing_view(sz: ds.Sizing | None) -> SizingView:
    if sz is None:
        return SizingView(None, None, None, (), (), 0,
                          "No sizing in this analysis: candidate GPUs were not projected.")
    rec = (sz.recommended, sz.recommended_gpus)
    rows = [_candidate(c, sz.current, rec) for c in sz.candidates]
    rows.sort(key=lambda r: (
        not (r.current or r.recommended),
        r.candidate.fits_memory is False,
        r.candidate.usd_per_1k_steps is None,
        r.candidate.usd_per_1k_steps or 0.0,
        r.candidate.projected_step_ms or 0.0,
    ))
    points = tuple(r for r in rows if r.candidate.usd_per_1k_steps is not None
                   and r.candidate.projected_step_ms is not None)[:MAX_CHART_POINTS]
    table = tuple(rows[:MAX_CANDIDATE_ROWS])
    empty = None if rows else (sz.reason or "No candidate GPU could be projected.")
    no_chart = _no_chart(sz, points)
    return SizingView(sz.verdict, sz.reason, sz.current_note, table,
                      () if no_chart else points, len(rows) - len(table), empty, no_chart)


def _no_chart(sz: ds.Sizing, points: tuple[CandidateRow, ...]) -> str | None:
    """Why a chart of the candidates would say nothing: no GPU runs the job now and none is
    recommended (a CPU-only run: its projections are rough), or every candidate projects the
    same step (only the price would differ: the table says that)."""
    steps = {round(r.candidate.projected_step_ms or 0.0, 2) for r in points}
    if sz.current is None and sz.recommended is None:
        return ("Not charted: " + (sz.reason or "no GPU is recommended") +
                ("" if (sz.reason or "").endswith(".") else "."))
    if len(points) > 1 and len(steps) == 1:
        return (f"No chart: every candidate projects the same {points[0].candidate.projected_step_ms:.2f}"
                " ms step, so only the price tells them apart (the table).")
    return None


def _candidate(c: ds.Candidate, current: str | None,
               rec: tuple[str | None, int]) -> CandidateRow:
    # an undated price is marked "?", explained once under the table, not "undated" on each row
    seen = c.price_date_seen
    undated = bool(c.price_provider) and not (seen and DATE_SEEN.fullmatch(seen.strip()))
    src = " · ".join(x for x in (c.price_provider, c.price_instance,
                                 UNDATED_MARK if undated else seen) if x)
    return CandidateRow(c, current=c.gpu == current and c.gpus == 1,
                        recommended=(c.gpu, c.gpus) == rec, price_source=src or None,
                        price_undated=undated)


MAX_PRECISION_GROUPS = 12


def precision_view(mix: ds.PrecisionMix | None) -> PrecisionView | None:
    """The precision mix as rows (``None`` without kernels)."""
    if mix is None:
        return None
    shares = sorted(mix.time_pct.items(), key=lambda kv: -kv[1])
    rows = tuple(PrecisionRow(p, p, pct, None) for p, pct in shares)
    groups = sorted(mix.groups, key=lambda g: (-g.time_ms, g.group or ""))[:MAX_PRECISION_GROUPS]
    return PrecisionView(mix.workload, rows, mix.unknown_pct,
                         tuple(PrecisionRow(g.group or "(unnamed)", g.precision, None, g.time_ms)
                               for g in groups))


@dataclass(frozen=True, slots=True)
class SectionTable:
    """An analyzer section drawn as a table (``rightsize.analyzers.sections``): cells as text."""

    key: str
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    more: int  # rows left out (past the section's limit)


def section_table(section: Section, value: Any) -> SectionTable:
    """The rows of a section's value (one node, or a tuple of them), formatted by its columns."""
    nodes = tuple(value) if section.many else (value,)
    shown = nodes[:section.limit]
    return SectionTable(
        section.key, section.title, tuple(c.label for c in section.columns),
        tuple(tuple(_cell(getattr(n, c.field, None), c.fmt) for c in section.columns)
              for n in shown),
        len(nodes) - len(shown))


def _cell(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return " > ".join(str(v) for v in value)
    return spec.format(value)
