"""The table-like sections of the report model: kernels, ops, memory, candidate GPUs and
recommendations.

Input: pieces of the ``rightsize analyze`` JSON document. Output: frozen dataclasses of plain
values (``empty`` is ``None`` when a section has something to show, else the reason). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rightsize.reports.sections import Doc, NamedValue, as_float

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


@dataclass(frozen=True, slots=True)
class Memory:
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    capacity_bytes: int | None
    used_pct: float | None
    devices: tuple[NamedValue, ...]
    estimate: tuple[NamedValue, ...]
    empty: str | None


@dataclass(frozen=True, slots=True)
class CandidateRow:
    label: str
    gpu: str
    gpus: int
    fits_memory: bool | None
    projected_step_ms: float | None
    usd_per_hour: float | None
    usd_per_1k_steps: float | None
    energy_j_per_step: float | None
    price_source: str | None
    current: bool
    recommended: bool


@dataclass(frozen=True, slots=True)
class SizingView:
    verdict: str | None
    reason: str | None
    current_note: str | None
    rows: tuple[CandidateRow, ...]  # top rows for the table
    chart_points: tuple[CandidateRow, ...]  # every priced, projected candidate (capped)
    hidden: int  # candidates left out of the table
    empty: str | None


@dataclass(frozen=True, slots=True)
class Recommendation:
    id: str
    title: str
    detail: str
    evidence: tuple[str, ...]


def signal_index(diagnosis: Doc | None) -> dict[str, tuple[str | None, str | None]]:
    """Kernel group -> (compute/memory class, the signal that decided it)."""
    return {
        str(s.get("group")): (s.get("class"), s.get("signal"))
        for s in (diagnosis or {}).get("signals") or []
        if s.get("group") is not None
    }


def _classify(
    name: str, row: Doc, index: Mapping[str, tuple[str | None, str | None]]
) -> tuple[str | None, str | None]:
    if row.get("class") is not None:
        return row.get("class"), row.get("signal")
    if name in index:
        return index[name]
    # A group may name a family ("gemm", "elementwise"): the longest one in the name decides.
    lower = name.lower()
    hits = [g for g in index if len(g) >= 3 and g.lower() in lower]
    return index[max(hits, key=len)] if hits else (None, None)


def kernel_row(k: Doc, index: Mapping[str, tuple[str | None, str | None]]) -> KernelRow:
    kind, signal = _classify(str(k["name"]), k, index)
    return KernelRow(
        str(k["name"]),
        int(k.get("calls") or 0),
        as_float(k.get("total_ms")),
        as_float(k.get("mean_us")),
        as_float(k.get("pct")),
        kind,
        signal,
    )


def op_row(o: Doc, index: Mapping[str, tuple[str | None, str | None]]) -> OpRow:
    kind, signal = _classify(str(o["name"]), o, index)
    return OpRow(
        str(o["name"]),
        int(o.get("calls") or 0),
        as_float(o.get("host_ms")),
        as_float(o.get("gpu_ms")),
        int(o.get("kernels") or 0),
        kind,
        signal,
    )


def memory(doc: Doc) -> Memory:
    from rightsize.reports import fmt

    m = doc.get("metrics") or {}
    primary = next((d for d in doc.get("devices", []) if d.get("primary")), None)
    cap = primary.get("memory_bytes") if primary else None
    peak = m.get("peak_memory_bytes")
    devices = tuple(
        NamedValue(
            "host" if r.get("device", 0) < 0 else f"device {r.get('device')}",
            fmt.nbytes(r.get("peak_allocated_bytes")),
            "relative to the start of the trace" if r.get("relative") else None,
        )
        for r in m.get("memory") or []
    )
    est = m.get("memory_estimate") or {}
    # The estimator's to_json() nests its parts under memory_bytes; flat *_bytes keys also do.
    nested = est.get("memory_bytes")
    parts: Mapping[str, Any] = (
        nested
        if isinstance(nested, Mapping)
        else {k.removesuffix("_bytes"): v for k, v in est.items() if k.endswith("_bytes")}
    )
    estimate = tuple(
        NamedValue(k.replace("_", " "), fmt.nbytes(v))
        for k, v in parts.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    )
    return Memory(
        peak,
        m.get("peak_reserved_bytes"),
        cap,
        100.0 * peak / cap if peak is not None and cap else None,
        devices,
        estimate,
        None
        if peak is not None or estimate
        else "No memory events in the trace (record with profile_memory=True).",
    )


def sizing_view(sz: Doc | None, doc: Doc) -> SizingView:
    if not sz:
        return SizingView(
            None,
            None,
            None,
            (),
            (),
            0,
            "No sizing in this analysis: candidate GPUs were not projected.",
        )
    rec = (sz.get("recommended"), sz.get("recommended_gpus", 1))
    rows = [_candidate(c, sz.get("current"), rec) for c in sz.get("candidates") or []]
    rows.sort(
        key=lambda r: (
            not (r.current or r.recommended),
            r.fits_memory is False,
            r.usd_per_1k_steps is None,
            r.usd_per_1k_steps or 0.0,
            r.projected_step_ms or 0.0,
        )
    )
    points = tuple(
        r for r in rows if r.usd_per_1k_steps is not None and r.projected_step_ms is not None
    )[:MAX_CHART_POINTS]
    table = tuple(rows[:MAX_CANDIDATE_ROWS])
    empty = None if rows else (sz.get("reason") or "No candidate GPU could be projected.")
    return SizingView(
        sz.get("verdict"),
        sz.get("reason"),
        sz.get("current_note"),
        table,
        points,
        len(rows) - len(table),
        empty,
    )


def _candidate(c: Doc, current: str | None, rec: tuple[Any, Any]) -> CandidateRow:
    gpus = int(c.get("gpus") or 1)
    src = " · ".join(
        str(x)
        for x in (c.get("price_provider"), c.get("price_instance"), c.get("price_date_seen"))
        if x
    )
    return CandidateRow(
        label=c["gpu"] if gpus == 1 else f"{gpus} × {c['gpu']}",
        gpu=str(c["gpu"]),
        gpus=gpus,
        fits_memory=c.get("fits_memory"),
        projected_step_ms=as_float(c.get("projected_step_ms")),
        usd_per_hour=as_float(c.get("usd_per_hour")),
        usd_per_1k_steps=as_float(c.get("usd_per_1k_steps")),
        energy_j_per_step=as_float(c.get("energy_j_per_step")),
        price_source=src or None,
        current=c["gpu"] == current and gpus == 1,
        recommended=(c["gpu"], gpus) == rec,
    )


def recommendation(r: Doc) -> Recommendation:
    ev = r.get("evidence") or ()
    return Recommendation(
        str(r.get("id", "")),
        str(r.get("title", "")),
        str(r.get("detail", "")),
        tuple(str(e) for e in ([ev] if isinstance(ev, str) else ev)),
    )
