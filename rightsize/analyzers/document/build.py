"""Analysis results -> the typed document: rounding, units and the aggregation reports show.

Input: an :class:`~rightsize.analyzers.analysis.Analysis` and the descriptions of the files read.
Output: a :class:`~rightsize.analyzers.document.Document`. Times become milliseconds (``*_ms``,
6 decimals) or µs, shares are rounded to 2-4 decimals; a value that cannot be computed stays
``None``. The classified device work is summed here into signal groups and top-kernel classes,
so no renderer aggregates analysis. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rightsize import __version__
from rightsize.analyzers import sections
from rightsize.analyzers.analysis import Analysis, RankAnalysis
from rightsize.analyzers.document import SCHEMA_VERSION, Document
from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document.codec import decode
from rightsize.analyzers.document.definitions import definitions_for
from rightsize.analyzers.document.diagnosis import Diagnosis, Recommendation
from rightsize.analyzers.document.job import Job
from rightsize.analyzers.document.sizing import HostTimeline, PrecisionMix, Sizing, Timeline
from rightsize.analyzers.job import advice as job_advice
from rightsize.analyzers.metrics.precision import workload_precision
from rightsize.vocab import DeviceKind

NS_PER_MS = 1e6


def _ms(ns: float | None) -> float | None:
    return None if ns is None else _msv(ns)


def _msv(ns: float) -> float:
    """Nanoseconds as milliseconds, 6 decimals (whole ns)."""
    return round(ns / NS_PER_MS, 6)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def document(analysis: Analysis, inputs: Sequence[Mapping[str, Any]],
             definitions: str = "rightsize") -> Document:
    """The document of ``analysis``, as its JSON reads back: the analyzers' nodes hold full
    precision, and what every consumer (reports, compare, serve, the API) sees is the rounded
    value the JSON publishes, so a document read from a file equals the one made here."""
    return rounded(_document(analysis, inputs, definitions))


def _document(analysis: Analysis, inputs: Sequence[Mapping[str, Any]],
              definitions: str) -> Document:
    p = analysis.primary
    return assemble([rank_doc(r, primary=False) for r in analysis.ranks],
                    primary_doc(p) if p else None, inputs, definitions,
                    counters=analysis.counters, host=analysis.host, job=analysis.job)


@dataclass(frozen=True, slots=True)
class PrimaryDoc:
    """What the document takes from its primary rank alone (the headline sections)."""

    steps: dm.StepStats
    metrics: dm.Metrics
    diagnosis: Diagnosis | None
    recommendations: tuple[Recommendation, ...]
    sizing: Sizing | None
    precision: PrecisionMix | None
    timeline: Timeline | None
    top_kernels: tuple[dm.TopKernel, ...]
    top_ops: tuple[dm.TopOp, ...]
    sections: Mapping[str, Any]
    step_mean_ms: float | None  # unrounded: the step the job's advice is weighed against
    window_ns: tuple[int, int] | None  # the steps' span: a run's host samples are cut to it


@dataclass(frozen=True, slots=True)
class RankDoc:
    """One rank's share of the document, small enough to send from the worker that analyzed
    the rank: its ``ranks`` entry, devices and notes, its kernel time (which rank is the
    primary) and, when asked for, its :class:`PrimaryDoc`."""

    rank: dm.Rank
    devices: tuple[dm.Device, ...]
    notes: tuple[str, ...]
    kernel_ns: int
    primary: PrimaryDoc | None = None


def rank_doc(r: RankAnalysis, primary: bool = True) -> RankDoc:
    return RankDoc(_rank(r), tuple(_devices(r)), r.notes, r.kernel_ns,
                   primary_doc(r) if primary else None)


def primary_doc(p: RankAnalysis) -> PrimaryDoc:
    return PrimaryDoc(
        steps=_steps(p), metrics=_metrics(p), diagnosis=_diagnosis(p),
        recommendations=p.recommendations, sizing=p.sizing,
        precision=workload_precision(p.work, p.device_match), timeline=p.timeline,
        top_kernels=_top_kernels(p), top_ops=_top_ops(p), sections=p.sections,
        step_mean_ms=float(p.steps.dur_ns.mean()) / NS_PER_MS if p.steps.count else None,
        window_ns=(int(p.steps.start_ns[0]), int(p.steps.end_ns[-1])) if p.steps.count
        else None)


def primary_index(ranks: Sequence[RankDoc]) -> int | None:
    """The rank holding the device with the most kernel time (the first such), as
    :attr:`Analysis.primary` picks it."""
    return max(range(len(ranks)), key=lambda i: ranks[i].kernel_ns) if ranks else None


def assemble(ranks: Sequence[RankDoc], p: PrimaryDoc | None,
             inputs: Sequence[Mapping[str, Any]], definitions: str,
             counters: Diagnosis | None = None, host: HostTimeline | None = None,
             job: Job | None = None) -> Document:
    """The document from its ranks' shares (``p``: the primary's), unrounded: the same
    whether the ranks were analyzed here or by workers."""
    diagnosis = p.diagnosis if p else counters
    job_recs: tuple[Recommendation, ...] = ()
    if job is not None:  # the ranks together: stragglers as rules, the verdict's evidence
        diagnosis = job_advice.with_job_evidence(diagnosis, job)
        job_recs = job_advice.recommendations(job, p.step_mean_ms if p else None)
    return Document(
        schema_version=SCHEMA_VERSION,
        tool=dm.Tool("rightsize", __version__),
        inputs=tuple(decode(dm.InputFile, dict(i), "inputs") for i in inputs),
        devices=tuple(d for r in ranks for d in r.devices),
        steps=p.steps if p else dm.NO_STEPS,
        metrics=p.metrics if p else dm.NO_METRICS,
        diagnosis=diagnosis,
        recommendations=job_recs + (p.recommendations if p else ()),
        sizing=p.sizing if p else None,
        precision=p.precision if p else None,
        timeline=p.timeline if p else None,
        top_kernels=p.top_kernels if p else (),
        top_ops=p.top_ops if p else (),
        ranks=tuple(r.rank for r in ranks),
        definitions=definitions_for(definitions),
        notes=tuple(sorted({n for r in ranks for n in r.notes})),
        sections=p.sections if p else sections.empty(sections.SECTIONS),
        host_timeline=host,
        job=job,
    )


def rounded(doc: Document) -> Document:
    """The document as its JSON reads back (what :func:`document` returns)."""
    return Document.from_json(doc.to_json())


def _devices(r: RankAnalysis) -> list[dm.Device]:
    props = {row["device"]: row for row in r.trace.devices.to_dicts()}
    out = []
    for d in r.devices:
        p = props.get(d.device, {})
        out.append(dm.Device(
            index=d.device, rank=r.rank, name=p.get("name"), sm_count=p.get("sm_count"),
            memory_bytes=p.get("memory_bytes"),
            compute_capability=(f"{p['compute_major']}.{p['compute_minor']}"
                                if p.get("compute_major") is not None else None),
            primary=d.device == r.primary_device,
            metrics=d,
        ))
    return out


def _steps(r: RankAnalysis) -> dm.StepStats:
    s = r.steps
    if not s.count:
        return dm.StepStats(0, None, None, None, s.source, s.device_aware, s.dropped, s.names)
    durs = s.dur_ns
    d = r.diagnosis
    return dm.StepStats(
        s.count, _ms(float(durs.mean())), _ms(int(durs.min())), _ms(int(durs.max())), s.source,
        s.device_aware, s.dropped, tuple(s.names),
        per_step=d.per_step if d is not None else (),
        split_over_time=d.split if d is not None else None)


def _metrics(r: RankAnalysis) -> dm.Metrics:
    dev = r.device(r.primary_device)
    b, t, peak, comm = r.breakdown, r.temporal, r.peak_memory, r.communication
    return dm.Metrics(
        device=r.primary_device,
        gpu_util_pct=dev.gpu_util_pct if dev else None,
        sm_efficiency_pct=dev.sm_efficiency_pct if dev else None,
        achieved_occupancy_pct=dev.achieved_occupancy_pct if dev else None,
        tensor_core_kernel_pct=r.tensor_cores.plugin_pct,
        tensor_core_kernel_pct_extended=r.tensor_cores.extended_pct,
        breakdown_ms=b,
        hta=None if t is None else dataclasses.replace(t, idle_by_stream=r.idle),
        peak_memory_bytes=peak.peak_allocated_bytes if peak else None,
        peak_reserved_bytes=peak.peak_reserved_bytes if peak else None,
        memory=r.memory,
        memcpy=tuple(dm.Memcpy(c["direction"], c["host_memory"], c["count"], c["bytes"],
                               _ms(c["busy_ns"]), _r(c["gbps"])) for c in r.copies.to_dicts()),
        communication=comm,
        launch=r.launch,
    )


def kernel_classes(r: RankAnalysis) -> dict[str, tuple[str | None, str | None]]:
    """Kernel name -> (compute/memory class, deciding signal), for GPU diagnoses."""
    if r.work is None or r.diagnosis is None or r.diagnosis.device != DeviceKind.GPU:
        return {}
    return {row[0]: (row[1], row[2])
            for row in r.work.select("name", "work", "signal").unique("name").iter_rows()}


def _top_kernels(r: RankAnalysis) -> tuple[dm.TopKernel, ...]:
    cls = kernel_classes(r)
    return tuple(
        dm.TopKernel(k["name"], k["calls"], _ms(k["total_ns"]), _r(k["mean_ns"] / 1000, 3),
                     _r(k["max_ns"] / 1000, 3), _r(k["pct"]), *cls.get(k["name"], (None, None)))
        for k in r.top_kernels.to_dicts())


def _diagnosis(r: RankAnalysis) -> Diagnosis | None:
    if r.diagnosis is None:
        return None
    return dataclasses.replace(r.diagnosis, device_match=r.device_match)


def _top_ops(r: RankAnalysis) -> tuple[dm.TopOp, ...]:
    return tuple(dm.TopOp(o["name"], o["calls"], _ms(o["host_ns"]), _ms(o["gpu_ns"]),
                          o["kernels"]) for o in r.top_ops.to_dicts())


def _rank(r: RankAnalysis) -> dm.Rank:
    return dm.Rank(r.rank, r.trace.meta.path, r.trace.meta.world_size, _steps(r), _metrics(r))
