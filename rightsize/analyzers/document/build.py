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
from typing import Any

from rightsize import __version__
from rightsize.analyzers import sections
from rightsize.analyzers.analysis import Analysis, RankAnalysis
from rightsize.analyzers.document import SCHEMA_VERSION, Document
from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document.codec import decode
from rightsize.analyzers.document.definitions import definitions_for
from rightsize.analyzers.document.diagnosis import Diagnosis, Recommendation
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
    return Document.from_json(_document(analysis, inputs, definitions).to_json())


def _document(analysis: Analysis, inputs: Sequence[Mapping[str, Any]],
              definitions: str) -> Document:
    p = analysis.primary
    diagnosis = _diagnosis(p) if p else analysis.counters
    job = analysis.job
    job_recs: tuple[Recommendation, ...] = ()
    if job is not None:  # the ranks together: stragglers as rules, the verdict's evidence
        diagnosis = job_advice.with_job_evidence(diagnosis, job)
        job_recs = job_advice.recommendations(  # against the step the report shows
            job, float(p.steps.dur_ns.mean()) / NS_PER_MS if p and p.steps.count else None)
    return Document(
        schema_version=SCHEMA_VERSION,
        tool=dm.Tool("rightsize", __version__),
        inputs=tuple(decode(dm.InputFile, dict(i), "inputs") for i in inputs),
        devices=tuple(d for r in analysis.ranks for d in _devices(r)),
        steps=_steps(p) if p else dm.NO_STEPS,
        metrics=_metrics(p) if p else dm.NO_METRICS,
        diagnosis=diagnosis,
        recommendations=job_recs + (p.recommendations if p else ()),
        sizing=p.sizing if p else None,
        precision=workload_precision(p.work, p.device_match) if p else None,
        timeline=p.timeline if p else None,
        top_kernels=_top_kernels(p) if p else (),
        top_ops=_top_ops(p) if p else (),
        ranks=tuple(_rank(r) for r in analysis.ranks),
        definitions=definitions_for(definitions),
        notes=tuple(sorted({n for r in analysis.ranks for n in r.notes})),
        sections=p.sections if p else sections.empty(sections.SECTIONS),
        host_timeline=analysis.host,
        job=job,
    )


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
