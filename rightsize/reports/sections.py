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

SHARE_ORDER = ("compute", "memory", "pcie", "dataloader", "communication", "host", "idle")
BREAKDOWN_LABELS = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset",
                    "communication": "Communication", "runtime": "Runtime",
                    "dataloader": "DataLoader", "cpu_exec": "CPU Exec", "other": "Other"}
UTILIZATION_LABELS = {"gpu_util_pct": "GPU utilization", "sm_efficiency_pct": "SM efficiency",
                      "achieved_occupancy_pct": "Achieved occupancy"}
MAX_TIMELINE_POINTS = 500
MAX_CANDIDATE_ROWS = 20
MAX_CHART_POINTS = 200


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


def _f(v: Any) -> float | None:
    return None if v is None or isinstance(v, bool) else float(v)


def headline(doc: Doc, diagnosis: Doc | None, sizing: Doc | None) -> Headline:
    primary = next((d for d in doc.get("devices", []) if d.get("primary")), None)
    sz = sizing or {}
    cands = sz.get("candidates") or []
    rec = next((c for c in cands if c.get("gpu") == sz.get("recommended")
                and c.get("gpus") == sz.get("recommended_gpus", 1)), None)
    now = next((c for c in cands if c.get("gpu") == sz.get("current") and c.get("gpus") == 1),
               None)
    return Headline(
        bound=(diagnosis or {}).get("bound"),
        confidence=_f((diagnosis or {}).get("confidence")),
        verdict=sz.get("verdict"),
        device_name=primary.get("name") if primary else None,
        current_gpu=sz.get("current"),
        recommended_gpu=sz.get("recommended"),
        recommended_gpus=int(sz.get("recommended_gpus") or 1),
        step_ms=_f(doc.get("steps", {}).get("mean_ms")),
        projected_step_ms=_f(rec.get("projected_step_ms")) if rec else None,
        usd_per_1k_steps_now=_f(now.get("usd_per_1k_steps")) if now else None,
        usd_per_1k_steps_recommended=_f(rec.get("usd_per_1k_steps")) if rec else None,
        savings_pct=_f(sz.get("savings_pct")),
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
    signals = tuple(NamedValue(k, f"{n} kernel group{'s' if n != 1 else ''}")
                    for k, n in sorted(counts.items()))
    return Evidence(
        items=tuple(str(e) for e in d.get("evidence") or []),
        shares=shares, thresholds=thresholds, signals=signals,
        utilization=_utilization(doc, d.get("utilization") or {}),
        empty=None if diagnosis else "No diagnosis in this analysis: the bottleneck verdict, "
        "its evidence and thresholds are not available.",
    )


def _threshold(name: str, v: Any) -> NamedValue:
    from rightsize.reports import fmt

    if isinstance(v, Mapping):
        note = v.get("reason") or v.get("source")
        return NamedValue(name, fmt.value(v.get("value", {k: x for k, x in v.items()
                                                          if k not in ("reason", "source")})),
                          None if note is None else str(note))
    return NamedValue(name, fmt.value(v))


def _utilization(doc: Doc, util: Doc) -> tuple[UtilRow, ...]:
    trace = {k: doc.get("metrics", {}).get(k) for k in UTILIZATION_LABELS}
    trace.update({k: v for k, v in (util.get("trace") or {}).items() if v is not None})
    nvml = util.get("nvml") or {}
    rows = []
    for key in list(UTILIZATION_LABELS) + sorted((set(trace) | set(nvml)) - set(UTILIZATION_LABELS)):
        t, n = trace.get(key), nvml.get(key)
        if isinstance(t, int | float | type(None)) and isinstance(n, int | float | type(None)):
            if t is not None or n is not None:
                rows.append(UtilRow(UTILIZATION_LABELS.get(key, key), _f(t), _f(n)))
    return tuple(rows)


def breakdown(doc: Doc) -> Breakdown:
    m = doc.get("metrics") or {}
    b = m.get("breakdown_ms")
    steps = int(doc.get("steps", {}).get("count") or 0)
    hta = m.get("hta")
    hta_rows = () if not hta else tuple(
        NamedValue(k.removesuffix("_pct"), f"{hta[k]:.1f}%") for k in
        ("idle_pct", "compute_pct", "non_compute_pct") if hta.get(k) is not None)
    definition = (doc.get("definitions") or {}).get("breakdown_ms")
    if not b:
        why = ("No steps found (no ProfilerStep annotations): there is no per-step breakdown."
               if steps == 0 else "The step-time breakdown could not be computed.")
        return Breakdown((), None, steps, definition, hta_rows, why)
    step = _f(b.get("step"))
    rows = tuple(BreakdownRow(k, label, float(b[k]), 100.0 * b[k] / step if step else None)
                 for k, label in BREAKDOWN_LABELS.items() if b.get(k) is not None)
    return Breakdown(rows, step, steps, definition, hta_rows, None)


def timeline(tl: Doc | None) -> Timeline:
    if not tl or not tl.get("t_ms"):
        return Timeline(None, (), None, None, "No utilization timeline in this analysis.")
    t = list(tl["t_ms"])
    series = {k: list(tl[k]) if tl.get(k) is not None else None
              for k in ("trace_busy_pct", "nvml_gpu_util_pct")}
    factor = max(1, -(-len(t) // MAX_TIMELINE_POINTS))  # ceil: keep the page small
    bucket = _f(tl.get("bucket_ms"))
    if factor > 1:
        t = [t[i] for i in range(0, len(t), factor)]
        series = {k: None if v is None else _mean_buckets(v, factor) for k, v in series.items()}
        bucket = None if bucket is None else bucket * factor
    return Timeline(bucket, tuple(t), _tup(series["trace_busy_pct"]),
                    _tup(series["nvml_gpu_util_pct"]), None)


def _tup(v: list[float | None] | None) -> tuple[float | None, ...] | None:
    return None if v is None else tuple(v)


def _mean_buckets(values: Sequence[float | None], factor: int) -> list[float | None]:
    out: list[float | None] = []
    for i in range(0, len(values), factor):
        chunk = [v for v in values[i:i + factor] if v is not None]
        out.append(round(sum(chunk) / len(chunk), 3) if chunk else None)
    return out


def signal_index(diagnosis: Doc | None) -> dict[str, tuple[str | None, str | None]]:
    """Kernel group -> (compute/memory class, the signal that decided it)."""
    return {str(s.get("group")): (s.get("class"), s.get("signal"))
            for s in (diagnosis or {}).get("signals") or [] if s.get("group") is not None}


def _classify(name: str, row: Doc, index: Mapping[str, tuple[str | None, str | None]]
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
    return KernelRow(str(k["name"]), int(k.get("calls") or 0), _f(k.get("total_ms")),
                     _f(k.get("mean_us")), _f(k.get("pct")), kind, signal)


def op_row(o: Doc, index: Mapping[str, tuple[str | None, str | None]]) -> OpRow:
    kind, signal = _classify(str(o["name"]), o, index)
    return OpRow(str(o["name"]), int(o.get("calls") or 0), _f(o.get("host_ms")),
                 _f(o.get("gpu_ms")), int(o.get("kernels") or 0), kind, signal)


def memory(doc: Doc) -> Memory:
    from rightsize.reports import fmt

    m = doc.get("metrics") or {}
    primary = next((d for d in doc.get("devices", []) if d.get("primary")), None)
    cap = primary.get("memory_bytes") if primary else None
    peak = m.get("peak_memory_bytes")
    devices = tuple(
        NamedValue("host" if r.get("device", 0) < 0 else f"device {r.get('device')}",
                   fmt.nbytes(r.get("peak_allocated_bytes")),
                   "relative to the start of the trace" if r.get("relative") else None)
        for r in m.get("memory") or [])
    est = m.get("memory_estimate") or {}
    parts = est.get("memory_bytes") if isinstance(est.get("memory_bytes"), Mapping) else {
        k.removesuffix("_bytes"): v for k, v in est.items() if k.endswith("_bytes")}
    estimate = tuple(NamedValue(k.replace("_", " "), fmt.nbytes(v)) for k, v in parts.items()
                     if isinstance(v, int | float) and not isinstance(v, bool))
    return Memory(peak, m.get("peak_reserved_bytes"), cap,
                  100.0 * peak / cap if peak is not None and cap else None, devices, estimate,
                  None if peak is not None or estimate else
                  "No memory events in the trace (record with profile_memory=True).")


def sizing_view(sz: Doc | None, doc: Doc) -> SizingView:
    if not sz:
        return SizingView(None, None, None, (), (), 0,
                          "No sizing in this analysis: candidate GPUs were not projected.")
    rec = (sz.get("recommended"), sz.get("recommended_gpus", 1))
    rows = [_candidate(c, sz.get("current"), rec) for c in sz.get("candidates") or []]
    rows.sort(key=lambda r: (not (r.current or r.recommended), r.fits_memory is False,
                             r.usd_per_1k_steps is None, r.usd_per_1k_steps or 0.0,
                             r.projected_step_ms or 0.0))
    points = tuple(r for r in rows if r.usd_per_1k_steps is not None
                   and r.projected_step_ms is not None)[:MAX_CHART_POINTS]
    table = tuple(rows[:MAX_CANDIDATE_ROWS])
    empty = None if rows else (sz.get("reason") or "No candidate GPU could be projected.")
    return SizingView(sz.get("verdict"), sz.get("reason"), sz.get("current_note"), table,
                      points, len(rows) - len(table), empty)


def _candidate(c: Doc, current: str | None, rec: tuple[Any, Any]) -> CandidateRow:
    gpus = int(c.get("gpus") or 1)
    src = " · ".join(str(x) for x in (c.get("price_provider"), c.get("price_instance"),
                                       c.get("price_date_seen")) if x)
    return CandidateRow(
        label=c["gpu"] if gpus == 1 else f"{gpus} × {c['gpu']}", gpu=str(c["gpu"]), gpus=gpus,
        fits_memory=c.get("fits_memory"), projected_step_ms=_f(c.get("projected_step_ms")),
        usd_per_hour=_f(c.get("usd_per_hour")), usd_per_1k_steps=_f(c.get("usd_per_1k_steps")),
        energy_j_per_step=_f(c.get("energy_j_per_step")), price_source=src or None,
        current=c["gpu"] == current and gpus == 1, recommended=(c["gpu"], gpus) == rec)


def recommendation(r: Doc) -> Recommendation:
    ev = r.get("evidence") or ()
    return Recommendation(str(r.get("id", "")), str(r.get("title", "")), str(r.get("detail", "")),
                          tuple(str(e) for e in ([ev] if isinstance(ev, str) else ev)))
