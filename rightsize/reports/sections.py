"""The sections of the report model, each built from its part of the typed analysis document.

Input: a :class:`~rightsize.analyzers.document.Document`. Output: frozen dataclasses of plain
values that templates and the text renderer read by name, labelled for people (internal keys
never reach the page: :mod:`rightsize.reports.labels`). Every section has ``empty``: ``None``
when it has something to show, else the one-line reason why not. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from rightsize.analyzers.document import Document
from rightsize.analyzers.document import diagnosis as dd
from rightsize.analyzers.document import sizing as ds
from rightsize.analyzers.document.metrics import Memcpy, Metrics
from rightsize.reports import fmt, labels
from rightsize.vocab import SHARES as SHARE_ORDER
from rightsize.vocab import DeviceKind

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
HTA_LABELS = {"idle_pct": "Idle", "compute_pct": "Compute", "non_compute_pct": "Non-compute"}
MAX_TIMELINE_POINTS = 500


@dataclass(frozen=True, slots=True)
class Win:
    """The biggest predicted win, whatever its kind, which the headline leads with: a
    recommendation's what-if (a shorter step on the same GPU: that much less time and cost
    per step) or the sizing's move to a cheaper GPU (less cost per step)."""

    kind: str  # "advice" or "gpu"
    title: str
    saving_pct: float  # of the cost per step (advice: of the step time too)
    step_ms: float | None  # now
    predicted_ms: float | None  # with the win
    low_ms: float | None
    high_ms: float | None


# A win below this share of the cost per step is not worth leading with.
MIN_WIN_PCT = 5.0


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
    projected_low_ms: float | None = None  # the projection's range (its validation error)
    projected_high_ms: float | None = None
    from_samples: bool = False  # diagnosed from GPU metric samples alone (no trace)
    win: Win | None = None  # the biggest predicted win (None: none worth 5% of the cost)

    @property
    def win_line(self) -> str | None:
        """The biggest win in one line: what to do, the step now and with it, the saving; a
        what-if is "predicted", a GPU move "projected"."""
        w = self.win
        if w is None:
            return None
        span = (f" (range {fmt.ms_range(w.low_ms, w.high_ms)})"
                if w.low_ms is not None and w.high_ms is not None else "")
        cost = " and cost" if self.usd_per_1k_steps_now is not None else ""
        what = (f"less time{cost} per step, predicted" if w.kind == "advice"
                else "less cost per step, projected")
        return (f"{w.title}: {fmt.ms(w.step_ms)} -> {fmt.ms(w.predicted_ms)} per step{span},"
                f" {w.saving_pct:.0f}% {what}")


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
    """The diagnosis (the document's node) and its evidence drawn as rows: shares in the
    vocabulary's order, thresholds and signals labelled, utilization beside NVML."""

    diagnosis: dd.Diagnosis | None
    shares: tuple[ShareRow, ...]
    thresholds: tuple[NamedValue, ...]
    signals: tuple[NamedValue, ...]  # how many kernel groups each signal decided
    utilization: tuple[UtilRow, ...]
    empty: str | None

    @property
    def items(self) -> tuple[str, ...]:
        """The evidence, in the diagnosis' order."""
        return self.diagnosis.evidence if self.diagnosis is not None else ()


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
class Overview:
    """Steps and the primary device's TensorBoard-plugin metrics, for the text report."""

    steps: int
    step_source: str
    mean_ms: float | None
    min_ms: float | None
    max_ms: float | None
    gpu_util_pct: float | None
    sm_efficiency_pct: float | None
    achieved_occupancy_pct: float | None
    tensor_core_kernel_pct: float | None
    tensor_core_kernel_pct_extended: float | None
    memcpy: tuple[Memcpy, ...]


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


def headline(doc: Document) -> Headline:
    primary = doc.primary_device
    sz = doc.sizing
    rec = sz.candidate(sz.recommended, sz.recommended_gpus) if sz else None
    now = sz.candidate(sz.current, 1) if sz else None
    diagnosis = doc.diagnosis
    return Headline(
        bound=diagnosis.bound if diagnosis else None,
        confidence=diagnosis.confidence if diagnosis else None,
        verdict=sz.verdict if sz else None,
        device_name=(primary.name or "GPU not named in the trace") if primary else None,
        current_gpu=sz.current if sz else None,
        recommended_gpu=sz.recommended if sz else None,
        recommended_gpus=sz.recommended_gpus if sz else 1,
        step_ms=doc.steps.mean_ms,
        projected_step_ms=rec.projected_step_ms if rec else None,
        usd_per_1k_steps_now=now.usd_per_1k_steps if now else None,
        usd_per_1k_steps_recommended=rec.usd_per_1k_steps if rec else None,
        savings_pct=sz.savings_pct if sz else None,
        reason=sz.reason if sz else None,
        projected_low_ms=rec.projected_step_ms_low if rec else None,
        projected_high_ms=rec.projected_step_ms_high if rec else None,
        from_samples=diagnosis is not None and diagnosis.device == DeviceKind.COUNTERS,
        win=biggest_win(doc),
    )


def biggest_win(doc: Document) -> Win | None:
    """The recommendation or GPU move that saves the most cost per step, by its point
    prediction: a what-if on the same GPU saves its share of the step; the sizing's move
    saves ``savings_pct``. ``None`` when none saves ``MIN_WIN_PCT``."""
    step = doc.steps.mean_ms
    wins: list[Win] = []
    for r in doc.recommendations:
        w = r.what_if
        if w is not None and step:
            wins.append(Win("advice", r.title, 100.0 * (1.0 - w.step_ms / step), step,
                            w.step_ms, w.step_ms_low, w.step_ms_high))
    sz = doc.sizing
    if sz and sz.recommended and sz.savings_pct and sz.recommended != sz.current:
        rec = sz.candidate(sz.recommended, sz.recommended_gpus)
        gpus = f"{sz.recommended_gpus} x " if sz.recommended_gpus > 1 else ""
        wins.append(Win("gpu", f"Move to {gpus}{sz.recommended}", sz.savings_pct, step,
                        rec.projected_step_ms if rec else None,
                        rec.projected_step_ms_low if rec else None,
                        rec.projected_step_ms_high if rec else None))
    best = max(wins, key=lambda w: w.saving_pct, default=None)
    return best if best is not None and best.saving_pct >= MIN_WIN_PCT else None


def overview(doc: Document) -> Overview:
    s, m = doc.steps, doc.metrics
    return Overview(s.count, s.source, s.mean_ms, s.min_ms, s.max_ms, m.gpu_util_pct,
                    m.sm_efficiency_pct, m.achieved_occupancy_pct, m.tensor_core_kernel_pct,
                    m.tensor_core_kernel_pct_extended, m.memcpy)


def evidence(doc: Document) -> Evidence:
    d = doc.diagnosis
    if d is None:
        return Evidence(None, (), (), (), utilization(doc.metrics, None),
                        "No diagnosis in this analysis: the bottleneck verdict, "
                        "its evidence and thresholds are not available.")
    keys = [k for k in SHARE_ORDER if k in d.shares_pct]
    keys += sorted(set(d.shares_pct) - set(SHARE_ORDER))
    shares = tuple(ShareRow(k, float(v)) for k in keys if (v := d.shares_pct[k]) is not None)
    thresholds = tuple(NamedValue(labels.threshold(k), fmt.value(v))
                       for k, v in d.thresholds.items())
    counts: dict[str, int] = {}
    for g in d.signals:
        key = g.signal or "default"
        counts[key] = counts.get(key, 0) + 1
    signals = tuple(NamedValue(labels.signal(k), f"{n} kernel group{'s' if n != 1 else ''}")
                    for k, n in sorted(counts.items()))
    return Evidence(d, shares, thresholds, signals,
                    utilization(doc.metrics, d.utilization), None)


def utilization(m: Metrics, util: dd.Utilization | None) -> tuple[UtilRow, ...]:
    """Trace-derived figures beside the NVML/GPM counters that measure the same thing."""
    tr = util.trace if util else None
    nv = util.nvml if util else None

    def counter(metric: str, stat: str = "mean") -> float | None:
        return nv.counter(metric, stat) if nv else None

    rows = [
        UtilRow("GPU busy, mean over the steps (a kernel running)",
                tr.gpu_busy_pct_mean if tr else m.gpu_util_pct, counter("gpu_util")),
        UtilRow("GPU busy, peak (step / sample)",
                tr.gpu_busy_pct_peak_step if tr else None, counter("gpu_util", "peak")),
        UtilRow("SM efficiency (trace estimate) / SM activity (GPM)", m.sm_efficiency_pct,
                counter("gpm_sm_util")),
        UtilRow("Achieved occupancy (trace estimate) / SM occupancy (GPM)",
                m.achieved_occupancy_pct, counter("gpm_sm_occupancy")),
        UtilRow("Memory controller busy (NVML utilization.memory)", None, counter("mem_util")),
        UtilRow("Tensor pipes active (GPM)", None, counter("gpm_tensor_util")),
        UtilRow("DRAM bandwidth used (GPM)", None, counter("gpm_dram_bw_util")),
    ]
    return tuple(r for r in rows if r.trace is not None or r.nvml is not None)


def breakdown(doc: Document) -> Breakdown:
    m = doc.metrics
    b = m.breakdown_ms
    steps = doc.steps.count
    hta_rows = () if m.hta is None else tuple(
        NamedValue(label, f"{v:.1f}%") for key, label in HTA_LABELS.items()
        if (v := getattr(m.hta, key)) is not None)
    definition = doc.definitions.get("breakdown_ms")
    if b is None:
        why = ("No steps found (no ProfilerStep annotations): there is no per-step breakdown."
               if steps == 0 else "The step-time breakdown could not be computed.")
        return Breakdown((), None, steps, definition, hta_rows, why)
    step = b.step
    rows = tuple(BreakdownRow(k, label, float(getattr(b, k)),
                              100.0 * getattr(b, k) / step if step else None)
                 for k, label in BREAKDOWN_LABELS.items())
    return Breakdown(rows, step, steps, definition, hta_rows, None)


def timeline(tl: ds.Timeline | None) -> ds.Timeline | None:
    """The document's timeline, in at most :data:`MAX_TIMELINE_POINTS` buckets (means of
    neighbours: the page stays small); ``None``: nothing to draw."""
    if tl is None or not tl.t_ms:
        return None
    factor = max(1, -(-len(tl.t_ms) // MAX_TIMELINE_POINTS))  # ceil
    if factor == 1:
        return tl
    nvml = tl.nvml_gpu_util_pct
    return ds.Timeline(tl.bucket_ms * factor, tl.t_ms[::factor],
                       cast(tuple[float, ...], _mean_buckets(tl.trace_busy_pct, factor)),
                       None if nvml is None else _mean_buckets(nvml, factor))


def _mean_buckets(values: Sequence[float | None], factor: int) -> tuple[float | None, ...]:
    out: list[float | None] = []
    for i in range(0, len(values), factor):
        chunk = [v for v in values[i : i + factor] if v is not None]
        out.append(round(sum(chunk) / len(chunk), 3) if chunk else None)
    return tuple(out)
