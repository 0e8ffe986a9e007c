"""The sections of the report model, each built from its part of the analysis document.

Input: pieces of the ``rightsize analyze`` JSON document (and the run manifest). Output: frozen
dataclasses of plain values that templates and the text renderer read by name. Every section
has ``empty``: ``None`` when it has something to show, else the one-line reason why not. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Doc = Mapping[str, Any]

from rightsize.vocab import SHARES as SHARE_ORDER

BREAKDOWN_LABELS = {
    "kernel": "Kernel",
    "memcpy": "Memcpy",
    "memset": "Memset",
    "communication": "Communication",
    "runtime": "Runtime",
    "dataloader": "DataLoader",
    "cpu_exec": "CPU Exec",
    "other": "Other",
}
UTILIZATION_LABELS = {
    "gpu_util_pct": "GPU utilization",
    "sm_efficiency_pct": "SM efficiency",
    "achieved_occupancy_pct": "Achieved occupancy",
}
MAX_TIMELINE_POINTS = 500


@dataclass(frozen=True, slots=True)
class Headline:
    bound: str | None
    confidence: float | None
    verdict: str | None
    device_name: str | None  # the primary device as the trace names it; None: CPU-only
    current_gpu: str | None  # its catalog name, when sizing matched it
    recommended_gpu: str | None
    recommended_gpus: int
    step_ms: float | None  # measured mean step
    projected_step_ms: float | None
    usd_per_1k_steps_now: float | None
    usd_per_1k_steps_recommended: float | None
    savings_pct: float | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class NamedValue:
    name: str
    value: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ShareRow:
    name: str
    pct: float


@dataclass(frozen=True, slots=True)
class UtilRow:
    metric: str
    trace: float | None
    nvml: float | None


@dataclass(frozen=True, slots=True)
class Evidence:
    items: tuple[str, ...]
    shares: tuple[ShareRow, ...]
    thresholds: tuple[NamedValue, ...]
    signals: tuple[NamedValue, ...]  # how many kernel groups each signal decided
    utilization: tuple[UtilRow, ...]
    empty: str | None


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    key: str
    label: str
    ms: float
    pct: float | None


@dataclass(frozen=True, slots=True)
class Breakdown:
    rows: tuple[BreakdownRow, ...]
    step_ms: float | None
    steps: int
    definition: str | None
    hta: tuple[NamedValue, ...]
    empty: str | None


@dataclass(frozen=True, slots=True)
class Timeline:
    bucket_ms: float | None
    t_ms: tuple[float, ...]
    trace_busy_pct: tuple[float | None, ...] | None
    nvml_gpu_util_pct: tuple[float | None, ...] | None
    empty: str | None


@dataclass(frozen=True, slots=True)
class InputRow:
    path: str
    format: str
    size_bytes: int | None
    events: int | None


@dataclass(frozen=True, slots=True)
class Provenance:
    inputs: tuple[InputRow, ...]
    tools: tuple[NamedValue, ...]
    run: tuple[NamedValue, ...]  # command, cwd, times, exit: from the manifest
    definitions: tuple[NamedValue, ...]
    missing: tuple[str, ...]
    notes: tuple[str, ...]


def as_float(v: Any) -> float | None:
    return None if v is None or isinstance(v, bool) else float(v)


def headline(doc: Doc, diagnosis: Doc | None, sizing: Doc | None) -> Headline:
    primary = next((d for d in doc.get("devices", []) if d.get("primary")), None)
    sz = sizing or {}
    cands = sz.get("candidates") or []
    rec = next(
        (
            c
            for c in cands
            if c.get("gpu") == sz.get("recommended")
            and c.get("gpus") == sz.get("recommended_gpus", 1)
        ),
        None,
    )
    now = next((c for c in cands if c.get("gpu") == sz.get("current") and c.get("gpus") == 1), None)
    return Headline(
        bound=(diagnosis or {}).get("bound"),
        confidence=as_float((diagnosis or {}).get("confidence")),
        verdict=sz.get("verdict"),
        device_name=primary.get("name") if primary else None,
        current_gpu=sz.get("current"),
        recommended_gpu=sz.get("recommended"),
        recommended_gpus=int(sz.get("recommended_gpus") or 1),
        step_ms=as_float(doc.get("steps", {}).get("mean_ms")),
        projected_step_ms=as_float(rec.get("projected_step_ms")) if rec else None,
        usd_per_1k_steps_now=as_float(now.get("usd_per_1k_steps")) if now else None,
        usd_per_1k_steps_recommended=as_float(rec.get("usd_per_1k_steps")) if rec else None,
        savings_pct=as_float(sz.get("savings_pct")),
        reason=sz.get("reason"),
    )


def evidence(doc: Doc, diagnosis: Doc | None) -> Evidence:
    d = diagnosis or {}
    shares_pct = d.get("shares_pct") or {}
    keys = [k for k in SHARE_ORDER if k in shares_pct] + sorted(set(shares_pct) - set(SHARE_ORDER))
    shares = tuple(ShareRow(k, float(shares_pct[k])) for k in keys if shares_pct[k] is not None)
    thresholds = tuple(_threshold(k, v) for k, v in (d.get("thresholds") or {}).items())
    counts: dict[str, int] = {}
    for s in d.get("signals") or []:
        counts[str(s.get("signal"))] = counts.get(str(s.get("signal")), 0) + 1
    signals = tuple(
        NamedValue(k, f"{n} kernel group{'s' if n != 1 else ''}") for k, n in sorted(counts.items())
    )
    return Evidence(
        items=tuple(str(e) for e in d.get("evidence") or []),
        shares=shares,
        thresholds=thresholds,
        signals=signals,
        utilization=_utilization(doc, d.get("utilization") or {}),
        empty=None
        if diagnosis
        else "No diagnosis in this analysis: the bottleneck verdict, "
        "its evidence and thresholds are not available.",
    )


def _threshold(name: str, v: Any) -> NamedValue:
    from rightsize.reports import fmt

    if isinstance(v, Mapping):
        note = v.get("reason") or v.get("source")
        return NamedValue(
            name,
            fmt.value(
                v.get("value", {k: x for k, x in v.items() if k not in ("reason", "source")})
            ),
            None if note is None else str(note),
        )
    return NamedValue(name, fmt.value(v))


def _utilization(doc: Doc, util: Doc) -> tuple[UtilRow, ...]:
    trace = {k: doc.get("metrics", {}).get(k) for k in UTILIZATION_LABELS}
    trace.update({k: v for k, v in (util.get("trace") or {}).items() if v is not None})
    nvml = util.get("nvml") or {}
    rows = []
    extra = sorted((set(trace) | set(nvml)) - set(UTILIZATION_LABELS))
    for key in [*UTILIZATION_LABELS, *extra]:
        t, n = trace.get(key), nvml.get(key)
        numbers = all(isinstance(v, int | float | type(None)) for v in (t, n))
        if numbers and (t is not None or n is not None):
            rows.append(UtilRow(UTILIZATION_LABELS.get(key, key), as_float(t), as_float(n)))
    return tuple(rows)


def breakdown(doc: Doc) -> Breakdown:
    m = doc.get("metrics") or {}
    b = m.get("breakdown_ms")
    steps = int(doc.get("steps", {}).get("count") or 0)
    hta = m.get("hta")
    hta_rows = (
        ()
        if not hta
        else tuple(
            NamedValue(k.removesuffix("_pct"), f"{hta[k]:.1f}%")
            for k in ("idle_pct", "compute_pct", "non_compute_pct")
            if hta.get(k) is not None
        )
    )
    definition = (doc.get("definitions") or {}).get("breakdown_ms")
    if not b:
        why = (
            "No steps found (no ProfilerStep annotations): there is no per-step breakdown."
            if steps == 0
            else "The step-time breakdown could not be computed."
        )
        return Breakdown((), None, steps, definition, hta_rows, why)
    step = as_float(b.get("step"))
    rows = tuple(
        BreakdownRow(k, label, float(b[k]), 100.0 * b[k] / step if step else None)
        for k, label in BREAKDOWN_LABELS.items()
        if b.get(k) is not None
    )
    return Breakdown(rows, step, steps, definition, hta_rows, None)


def timeline(tl: Doc | None) -> Timeline:
    if not tl or not tl.get("t_ms"):
        return Timeline(None, (), None, None, "No utilization timeline in this analysis.")
    t = list(tl["t_ms"])
    series = {
        k: list(tl[k]) if tl.get(k) is not None else None
        for k in ("trace_busy_pct", "nvml_gpu_util_pct")
    }
    factor = max(1, -(-len(t) // MAX_TIMELINE_POINTS))  # ceil: keep the page small
    bucket = as_float(tl.get("bucket_ms"))
    if factor > 1:
        t = [t[i] for i in range(0, len(t), factor)]
        series = {k: None if v is None else _mean_buckets(v, factor) for k, v in series.items()}
        bucket = None if bucket is None else bucket * factor
    return Timeline(
        bucket, tuple(t), _tup(series["trace_busy_pct"]), _tup(series["nvml_gpu_util_pct"]), None
    )


def _tup(v: list[float | None] | None) -> tuple[float | None, ...] | None:
    return None if v is None else tuple(v)


def _mean_buckets(values: Sequence[float | None], factor: int) -> list[float | None]:
    out: list[float | None] = []
    for i in range(0, len(values), factor):
        chunk = [v for v in values[i : i + factor] if v is not None]
        out.append(round(sum(chunk) / len(chunk), 3) if chunk else None)
    return out
