"""The report model: everything a report shows, built purely from the typed analysis document.

Input: a :class:`~rightsize.analyzers.document.Document` (read back from JSON with
``Document.from_json``) and, for a run directory, its ``manifest.json``. Output: a frozen
:class:`ReportModel` that the html, json and text renderers (``rightsize.reports.render``) all
take. No I/O, no analysis: a missing section becomes an empty one with the reason, never an
error.

Sizes are capped here so that every renderer stays small: top-k tables, a downsampled timeline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rightsize.analyzers import sections as analyzer_sections
from rightsize.analyzers.document import Document
from rightsize.analyzers.document.diagnosis import Recommendation
from rightsize.analyzers.document.metrics import NO_STEPS
from rightsize.analyzers.document.sizing import Timeline
from rightsize.reports import charts as views
from rightsize.reports import fmt, labels, tables
from rightsize.reports import sections as parts
from rightsize.reports.charts import CATEGORY_COLORS, category_color
from rightsize.reports.job_view import JobView, job_view
from rightsize.reports.sections import (
    Breakdown,
    Evidence,
    Headline,
    InputRow,
    NamedValue,
    Overview,
    Provenance,
)
from rightsize.reports.tables import KernelRow, Memory, OpRow, SizingView
from rightsize.rundir import RunInfo, run_info
from rightsize.vocab import Bound

TOP_KERNELS = 15
TOP_OPS = 15
__all__ = ["CATEGORY_COLORS", "ReportModel", "build_model", "category_color"]


@dataclass(frozen=True, slots=True)
class ReportModel:
    """One report: sections for the renderers, ``document`` for the JSON contract."""

    title: str
    version: str  # of the rightsize that analyzed
    headline: Headline
    overview: Overview
    evidence: Evidence
    breakdown: Breakdown
    timeline: Timeline | None  # the document's, downsampled; None: nothing to draw
    kernels: tuple[KernelRow, ...]
    precision: tables.PrecisionView | None
    ops: tuple[OpRow, ...]
    memory: Memory
    sizing: SizingView
    recommendations: tuple[Recommendation, ...]
    provenance: Provenance
    document: Document = field(repr=False)
    warnings: tuple[str, ...] = ()  # the page's banner: read the numbers with care
    step_split: views.StepSplit = field(default_factory=lambda: views.step_split(NO_STEPS))
    host: views.HostChart = field(default_factory=lambda: views.host_chart(None))
    sections: tuple[tables.SectionTable, ...] = ()  # analyzer sections drawn as tables
    job: JobView | None = None  # several ranks of one job: the job section

    def charts(self) -> dict[str, Any]:
        """The data the page's charts draw, as plain JSON types (into JavaScript via tojson)."""
        tl = self.timeline
        return {
            "breakdown": {
                "labels": [r.label for r in self.breakdown.rows],
                "ms": [r.ms for r in self.breakdown.rows],
                "colors": [category_color(r.key) for r in self.breakdown.rows],
            },
            "shares": {
                "labels": [s.name for s in self.evidence.shares],
                "pct": [s.pct for s in self.evidence.shares],
                "colors": [category_color(s.name) for s in self.evidence.shares],
            },
            "timeline": {
                "t_ms": list(tl.t_ms) if tl else [],
                "trace_busy_pct": list(tl.trace_busy_pct) if tl else None,
                "nvml_gpu_util_pct": _opt_list(tl.nvml_gpu_util_pct if tl else None),
            },
            "step_split": {
                "kind": self.step_split.kind,
                "labels": list(self.step_split.labels),
                "series": [{"name": x.name, "color": x.color, "ms": list(x.ms)}
                           for x in self.step_split.series],
            },
            "host": {
                "t_s": list(self.host.t_s),
                "cpu_util_pct": list(self.host.cpu_util_pct),
                "job_cpu_util_pct": list(self.host.job_cpu_util_pct),
                "rss_mib": list(self.host.rss_mib),
                "dataloader_workers": list(self.host.dataloader_workers),
                "window_s": None if self.host.window_s is None else list(self.host.window_s),
                "dataloader_color": category_color("dataloader"),
            },
            "sizing_axes": _axes(self.sizing.chart_points, self.sizing.rows,
                                 self.headline.step_ms if self.headline.device_name is None
                                 else None),
            "sizing_now": _unpriced_now(self.sizing, self.headline),
            "sizing": [
                {
                    "label": r.label,
                    "step_ms": r.candidate.projected_step_ms,
                    "step_low_ms": r.candidate.projected_step_ms_low,
                    "step_high_ms": r.candidate.projected_step_ms_high,
                    "usd_per_1k_steps": r.candidate.usd_per_1k_steps,
                    "current": r.current,
                    "recommended": r.recommended,
                    "fits": r.candidate.fits_memory is not False,
                }
                for r in self.sizing.chart_points
            ],
        }


def _axes(points: Sequence[tables.CandidateRow], rows: Sequence[tables.CandidateRow],
          step_ms: float | None) -> dict[str, dict[str, object]] | None:
    now: list[tuple[float | None, float | None, float | None, float | None]] = [
        (r.candidate.projected_step_ms, r.candidate.projected_step_ms,
         r.candidate.projected_step_ms, None) for r in rows if r.current]  # an unpriced GPU now is still drawn (a line)
    if step_ms is not None:
        now.append((step_ms, step_ms, step_ms, None))
    axes = views.sizing_axes([(c.projected_step_ms_low, c.projected_step_ms_high,
                               c.projected_step_ms, c.usd_per_1k_steps)
                              for c in (r.candidate for r in points)] + now)
    return None if axes is None else {"x": axes[0].to_json(), "y": axes[1].to_json()}


def _unpriced_now(s: tables.SizingView, h: Headline) -> dict[str, Any] | None:
    """What runs the job now when it is no point of the scatter: a GPU without a price, or
    the CPU of a CPU-only run (its measured step)."""
    if any(c.current for c in s.chart_points):
        return None
    now = next((c for c in s.rows if c.current), None)
    if now is not None and now.candidate.projected_step_ms is not None:
        return {"label": now.label, "step_ms": now.candidate.projected_step_ms,
                "note": "no price"}
    if now is None and h.device_name is None and h.step_ms is not None and s.chart_points:
        return {"label": "this CPU", "step_ms": h.step_ms, "note": "measured"}
    return None


def _opt_list(values: Sequence[float | None] | None) -> list[float | None] | None:
    return None if values is None else list(values)


def build_model(doc: Document, manifest: Mapping[str, Any] | None = None) -> ReportModel:
    """The report of one analysis document (and the manifest of its run directory, if any)."""
    run = run_info(manifest) if manifest else None
    signals = tables.signal_index(doc.diagnosis)
    return ReportModel(
        title=_title(doc, run),
        version=doc.tool.version,
        headline=parts.headline(doc),
        overview=parts.overview(doc),
        evidence=parts.evidence(doc),
        breakdown=parts.breakdown(doc),
        timeline=parts.timeline(doc.timeline),
        kernels=tuple(tables.kernel_row(k, signals) for k in doc.top_kernels[:TOP_KERNELS]),
        precision=tables.precision_view(doc.precision),
        ops=tuple(tables.self_op_row(o, signals) for o in doc.section("self_ops")[:TOP_OPS])
        or tuple(tables.op_row(o, signals) for o in doc.top_ops[:TOP_OPS]),
        memory=tables.memory(doc),
        sizing=tables.sizing_view(doc.sizing),
        recommendations=doc.recommendations,
        provenance=provenance(doc, run),
        document=doc,
        warnings=capture_warnings(doc, manifest),
        step_split=views.step_split(doc.steps),
        host=views.host_chart(doc.host_timeline),
        sections=tuple(tables.section_table(s, doc.sections[s.key])
                       for s in analyzer_sections.SECTIONS
                       if s.columns and s.key in doc.sections),
        job=job_view(doc.job),
    )


def capture_warnings(doc: Document, manifest: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Why the numbers need care: the job ended inside the profiling window (its last step may
    be cut short and averaged into "Now"), or the capture gave no clear verdict."""
    out: list[str] = []
    procs = _processes(manifest)
    ended = [p for p in procs if any(str(n).startswith(("profiler stopped at", "trace cut by"))
                                     for n in p.get("notes") or [])]
    if ended or any(p.get("state") == "cut" for p in procs):
        fix = ("a job that runs longer after the time window opens, or --window-delay-s 0"
               if any(p.get("step_detection") == "time" for p in procs)
               else "fewer --active steps (or a longer job)")
        out.append("The job ended while the profiler was recording: the last recorded step may "
                   f"be cut short and is averaged into the step time. Rerun with {fix} for "
                   "clean steps.")
    d = doc.diagnosis
    if d is not None and d.bound == Bound.INCONCLUSIVE:
        out.append("The capture is inconclusive: no share of the step stands out enough for a "
                   "verdict. Treat the sizing as a hint; record more steps, or a busier part of "
                   "the job.")
    if doc.steps.count == 1:
        out.append("Only one step was recorded: there is no spread to judge it by.")
    return tuple(out)


def _processes(manifest: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    try:
        procs = manifest["collectors"]["profiler"]["processes"] if manifest else []
    except (KeyError, TypeError):
        return []
    return [p for p in procs if isinstance(p, Mapping)] if isinstance(procs, list) else []


def _title(doc: Document, run: RunInfo | None) -> str:
    if run and run.argv:
        first = run.argv[0].rsplit("/", 1)[-1]  # /venv/bin/python3 -> python3
        shown = [first if first.startswith("python") else run.argv[0], *run.argv[1:]]
        return "rightsize: " + " ".join(shown)
    if doc.inputs:
        name = doc.inputs[0].path.rstrip("/").rsplit("/", 1)[-1]
        more = f" (+{len(doc.inputs) - 1} more)" if len(doc.inputs) > 1 else ""
        return f"rightsize: {name}{more}"
    return "rightsize report"


def provenance(doc: Document, run: RunInfo | None) -> Provenance:
    """Where the numbers come from: inputs, versions, definitions, and what was missing."""
    inputs = tuple(InputRow(i.path, i.format, i.bytes, i.events) for i in doc.inputs)
    tools = [NamedValue(doc.tool.name, doc.tool.version)]
    rows: list[NamedValue] = []
    if run:
        tools += [NamedValue(k, fmt.value(v)) for k, v in run.environment]
        if run.argv:
            rows.append(NamedValue("command", " ".join(run.argv)))
        rows += [NamedValue(k, fmt.value(v)) for k, v in run.times]
        if run.exit:
            rows.append(NamedValue("exit", run.exit))
    keys = re.compile("|".join(rf"\b{re.escape(k)}\b" for k in sorted(doc.definitions, key=len,
                                                                       reverse=True)) or "(?!)")
    definitions = tuple(NamedValue(labels.humanize(k),
                                   keys.sub(lambda m: labels.humanize(m.group(0)), v))
                        for k, v in doc.definitions.items())
    return Provenance(inputs, tuple(tools), tuple(rows), definitions,
                      tuple(_missing(doc, run)), doc.notes)


def _missing(doc: Document, run: RunInfo | None) -> list[str]:
    out = [f"{name}: {status} ({reason})" for name, status, reason in
           (run.not_collected if run else ())]
    if not doc.devices:
        out.append("GPU: no GPU activity in the trace (a CPU-only run)")
    if not doc.steps.count:
        out.append("steps: none found, so no per-step numbers")
    for part, what in ((doc.diagnosis, "bottleneck diagnosis"), (doc.sizing, "GPU sizing"),
                       (doc.timeline, "utilization timeline")):
        if part is None:
            out.append(f"{what}: not in this analysis")
    if doc.timeline is not None and doc.timeline.nvml_gpu_util_pct is None:
        out.append("NVML samples: none (no NVIDIA driver, or not a `rightsize run`)")
    return out
