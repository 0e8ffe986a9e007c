"""One trace (rank) -> every section rightsize reports, as one frozen result.

Input: a normalized :class:`~rightsize.traces.schema.Trace` and a :class:`Context`. Output:
:class:`RankAnalysis`, the values of the analyzer sections (``rightsize.analyzers.sections``:
:func:`analyze_trace` runs the registry, each section after those it needs); several ranks make
an :class:`Analysis` (with the job of the ranks together). Pure: nothing printed, nothing read,
inputs untouched. What cannot be computed stays ``None`` and the reason is added to ``notes``
once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from rightsize.analyzers import sections
from rightsize.analyzers.document.diagnosis import Diagnosis, Recommendation
from rightsize.analyzers.document.job import Job
from rightsize.analyzers.document.sizing import Sizing
from rightsize.analyzers.job.job import job_of
from rightsize.analyzers.job.summary import RankSummary, summarize
from rightsize.analyzers.metrics import tb_plugin
from rightsize.analyzers.metrics.host_timeline import HostTimeline, host_timeline
from rightsize.analyzers.metrics.steps import StepOptions, Steps
from rightsize.analyzers.sizing import projection as sizing
from rightsize.catalog import Catalog, DeviceMatch
from rightsize.node import entry
from rightsize.traces.limits import usable_cpus
from rightsize.traces.schema import Trace


@dataclass(frozen=True, slots=True)
class Context:
    """What an analysis may use beyond the trace itself (all optional)."""

    catalog: Catalog | None = None  # GPU specs and prices (ridge points, sizing)
    ncu: pl.DataFrame | None = None  # Nsight Compute per-kernel rows
    gpu_samples: pl.DataFrame | None = None  # NVML / DCGM / nvidia-smi samples
    host_samples: pl.DataFrame | None = None  # CPU, RSS, loader workers of a run directory
    constraints: sizing.Constraints = field(default_factory=sizing.Constraints)
    step_options: StepOptions = field(default_factory=StepOptions)
    breakdown_options: tb_plugin.BreakdownOptions = field(
        default_factory=tb_plugin.BreakdownOptions)  # plugin defects on: definitions=tb-plugin
    samples_per_step: int | None = None  # for throughput targets and cost per 1k samples


@dataclass(frozen=True, slots=True)
class RankAnalysis:
    """One rank: its trace, every section's value by key (``rightsize.analyzers.sections``:
    the document's sections and the values they share) and the notes they made."""

    trace: Trace
    values: Mapping[str, Any]
    notes: tuple[str, ...] = ()

    @property
    def rank(self) -> int | None:
        return self.trace.meta.rank

    steps = entry[Steps]("values", key="step_ranges", required=True)
    diagnosis = entry[Diagnosis | None]("values")
    recommendations = entry[tuple[Recommendation, ...]]("values", ())
    sizing = entry[Sizing | None]("values")
    device_match = entry[DeviceMatch | None]("values")

    @property
    def primary_device(self) -> int | None:
        """The device with the most kernel time (``None``: no GPU kernels)."""
        primary: int | None = self.values["device_use"].primary
        return primary

    @property
    def kernel_ns(self) -> int:
        kernel_ns: int = self.values["device_use"].kernel_ns
        return kernel_ns

    @property
    def work(self) -> pl.DataFrame | None:
        """The classified device work (kernels, or CPU leaf ops)."""
        work: pl.DataFrame | None = self.values["verdict"].work
        return work


@dataclass(frozen=True, slots=True)
class Analysis:
    ranks: tuple[RankAnalysis, ...]
    # from GPU samples alone, or else from Nsight Compute rows alone, when there is no trace
    counters: Diagnosis | None = None
    host: HostTimeline | None = None  # host samples of a run, with the profiled window
    job: Job | None = None  # the ranks together, when the traces are ranks of one job

    @property
    def primary(self) -> RankAnalysis | None:
        """The rank holding the device with the most kernel time (the first rank if none)."""
        return max(self.ranks, key=lambda r: r.kernel_ns) if self.ranks else None


def section_threads() -> int:
    """Threads one rank's sections run on: two where two CPUs are usable (independent
    sections at once: ``sections.run``), else one."""
    return 2 if usable_cpus() > 1 else 1


def analyze_trace(trace: Trace, context: Context = Context(),
                  threads: int | None = None) -> RankAnalysis:
    """Every section of one rank (``sections.SECTIONS``, each after those it needs); what
    cannot be computed is ``None`` with a note. ``threads``: how many run at once (None:
    :func:`section_threads`); the result is the same."""
    notes: list[str] = []
    values = sections.run(sections.SECTIONS, trace, context, notes,
                          section_threads() if threads is None else threads)
    return RankAnalysis(trace, values, tuple(notes))


def analyze(traces: list[Trace], context: Context = Context()) -> Analysis:
    ranks = tuple(analyze_trace(t, context) for t in traces)
    found = None if ranks else counters(context)
    first = max(ranks, key=lambda r: r.kernel_ns) if ranks else None
    window = (int(first.steps.start_ns[0]), int(first.steps.end_ns[-1])) \
        if first is not None and first.steps.count else None
    return Analysis(ranks, found, host_timeline(context.host_samples, window),
                    _job(ranks, context))


def counters(context: Context) -> Diagnosis | None:
    """The verdict of inputs without a trace: from GPU samples, else from Nsight Compute
    rows alone (None: neither)."""
    if context.gpu_samples is not None:
        from rightsize.analyzers.diagnosis.counters import diagnose_counters
        found = diagnose_counters(context.gpu_samples)
        if found is not None:
            return found
    if context.ncu is not None:
        from rightsize.analyzers.diagnosis.ncu_only import diagnose_ncu
        return diagnose_ncu(context.ncu)
    return None


def _job(ranks: tuple[RankAnalysis, ...], context: Context) -> Job | None:
    """The job of several ranks (its summaries reduced: ``analyzers/job``), else None: one
    trace, or traces of one rank (the profiling windows of one process in a run directory)."""
    if not is_job([r.rank for r in ranks]):
        return None
    return job_of([summarize(r) for r in ranks], context.catalog, context.constraints.provider,
                  context.constraints.comm_model)


def is_job(numbers: list[int | None]) -> bool:
    """Whether traces of these rank numbers are ranks of one job: two or more, each its own."""
    known = [n for n in numbers if n is not None]
    return len(set(known)) >= 2 and len(set(known)) == len(known)


def job_of_summaries(numbers: list[int | None], summaries: list[RankSummary],
                     catalog: Catalog | None, provider: str | None,
                     comm_model: Any = None) -> Job | None:
    """:func:`_job` from summaries made elsewhere (by the workers of ``rightsize.job_map``)."""
    return job_of(summaries, catalog, provider, comm_model) if is_job(numbers) else None
