"""Analysis results -> the typed document: the ranks' sections put together, published once.

Input: an :class:`~rightsize.analyzers.analysis.Analysis` (or, from the workers of
``rightsize.job_map``, each rank's :class:`RankDoc`) and the descriptions of the files read.
Output: a :class:`~rightsize.analyzers.document.Document`. The sections' nodes arrive at full
precision and are taken as they are, by key (``rightsize.analyzers.sections``); the job of the
ranks together adds its evidence and rules; :func:`rounded` publishes the document as its JSON
reads back, each value rounded by its field's ``num`` metadata (:mod:`rightsize.node`), the one
place rounding happens. Pure.
"""

from __future__ import annotations

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
from rightsize.analyzers.document.diagnosis import Diagnosis
from rightsize.analyzers.document.job import Job
from rightsize.analyzers.document.sizing import HostTimeline
from rightsize.analyzers.job import advice as job_advice
from rightsize.node import published

NS_PER_MS = 1e6


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
    """What the document takes from its primary rank alone: its sections' values (the headline
    keys and those after ``notes``), the step the job's advice is weighed against and the
    steps' span (a run's host samples are cut to it)."""

    sections: Mapping[str, Any]
    step_mean_ms: float | None
    window_ns: tuple[int, int] | None


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
    v = r.values
    return RankDoc(dm.Rank(r.rank, r.trace.meta.path, r.trace.meta.world_size, v["steps"],
                           v["metrics"]),
                   tuple(_devices(r)), r.notes, r.kernel_ns, primary_doc(r) if primary else None)


def primary_doc(p: RankAnalysis) -> PrimaryDoc:
    s = p.steps
    return PrimaryDoc(
        sections={**sections.published(sections.SECTIONS, p.values, head=True),
                  **sections.published(sections.SECTIONS, p.values, head=False)},
        step_mean_ms=float(s.dur_ns.mean()) / NS_PER_MS if s.count else None,
        window_ns=(int(s.start_ns[0]), int(s.end_ns[-1])) if s.count else None)


def primary_index(ranks: Sequence[RankDoc]) -> int | None:
    """The rank holding the device with the most kernel time (the first such), as
    :attr:`Analysis.primary` picks it."""
    return max(range(len(ranks)), key=lambda i: ranks[i].kernel_ns) if ranks else None


def assemble(ranks: Sequence[RankDoc], p: PrimaryDoc | None,
             inputs: Sequence[Mapping[str, Any]], definitions: str,
             counters: Diagnosis | None = None, host: HostTimeline | None = None,
             job: Job | None = None) -> Document:
    """The document from its ranks' shares (``p``: the primary's), unrounded: the same
    whether the ranks were analyzed here or by workers. Without a rank, the sections' values
    of an empty document, and the diagnosis of the samples or Nsight Compute rows alone."""
    values = dict(p.sections) if p else {**sections.empty(sections.SECTIONS, head=True),
                                         **sections.empty(sections.SECTIONS, head=False),
                                         "diagnosis": counters}
    if job is not None:  # the ranks together: stragglers as rules, the verdict's evidence
        values["diagnosis"] = job_advice.with_job_evidence(values["diagnosis"], job)
        values["recommendations"] = (job_advice.recommendations(
            job, p.step_mean_ms if p else None, values["diagnosis"])
            + tuple(values["recommendations"]))
    head = set(sections.value_types(head=True))
    return Document(
        schema_version=SCHEMA_VERSION,
        tool=dm.Tool("rightsize", __version__),
        inputs=tuple(decode(dm.InputFile, dict(i), "inputs") for i in inputs),
        devices=tuple(d for r in ranks for d in r.devices),
        headline={k: v for k, v in values.items() if k in head},
        ranks=tuple(r.rank for r in ranks),
        definitions=definitions_for(definitions),
        notes=tuple(sorted({n for r in ranks for n in r.notes})),
        sections={k: v for k, v in values.items() if k not in head},
        host_timeline=host,
        job=job,
    )


def rounded(doc: Document) -> Document:
    """The document as its JSON reads back (what :func:`document` returns), made from its
    fields' metadata without writing it (:func:`rightsize.node.published`)."""
    return published(doc)


def _devices(r: RankAnalysis) -> list[dm.Device]:
    props = {row["device"]: row for row in r.trace.devices.to_dicts()}
    out = []
    for d in r.values["device_use"].devices:
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
