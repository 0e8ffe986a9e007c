"""One trace (rank) -> every metric rightsize reports, as one frozen result.

Input: a normalized :class:`~rightsize.traces.schema.Trace`. Output: :class:`RankAnalysis`;
several ranks make an :class:`Analysis`. Pure: nothing printed, nothing read, inputs untouched.
Metrics that cannot be computed stay ``None`` and the reason is added to ``notes`` once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from rightsize.analyzers import sections
from rightsize.analyzers.diagnosis import advise, attention, copies, steady
from rightsize.analyzers.diagnosis.host_work import host_parts, named_stall
from rightsize.analyzers.diagnosis.verdict import diagnose
from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document.diagnosis import Diagnosis
from rightsize.analyzers.document.job import Job
from rightsize.analyzers.job.fabric import interconnect_advice
from rightsize.analyzers.job.job import job_of
from rightsize.analyzers.job.summary import RankSummary, summarize
from rightsize.analyzers.metrics import hta, kernels, tb_plugin
from rightsize.analyzers.metrics.host_timeline import HostTimeline, host_timeline
from rightsize.analyzers.metrics.steps import StepOptions, Steps, find_steps
from rightsize.analyzers.metrics.timeline import Timeline, timeline
from rightsize.analyzers.sizing import projection as sizing
from rightsize.analyzers.sizing.measured import measured_inputs
from rightsize.catalog import Catalog, DeviceMatch, Gpu
from rightsize.traces.schema import Trace
from rightsize.vocab import DeviceKind


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
    trace: Trace
    steps: Steps
    breakdown: dm.BreakdownMs | None
    devices: tuple[dm.DeviceMetrics, ...]
    primary_device: int | None  # the device with the most kernel time
    tensor_cores: kernels.TensorCores
    temporal: dm.Hta | None  # without idle_by_stream: that is ``idle``
    idle: tuple[dm.StreamIdle, ...]
    launch: dm.Launch
    top_kernels: pl.DataFrame
    top_ops: pl.DataFrame
    copies: pl.DataFrame
    memory: tuple[dm.MemoryPeak, ...]
    communication: dm.Communication | None
    notes: tuple[str, ...]
    device_match: DeviceMatch | None = None  # the catalog GPU the primary device is
    diagnosis: Diagnosis | None = None
    work: pl.DataFrame | None = None  # classified device work (kernels, or CPU leaf ops)
    recommendations: tuple[advise.Recommendation, ...] = ()
    sizing: sizing.Sizing | None = None
    timeline: Timeline | None = None
    sections: Mapping[str, Any] = field(default_factory=dict)  # analyzers.sections, by key

    @property
    def rank(self) -> int | None:
        return self.trace.meta.rank

    def device(self, index: int | None) -> dm.DeviceMetrics | None:
        return next((d for d in self.devices if d.device == index), None)

    @property
    def kernel_ns(self) -> int:
        return max((d.kernel_ns for d in self.devices), default=0)

    @property
    def peak_memory(self) -> dm.MemoryPeak | None:
        """Peak of the primary device, else of the host for CPU-only traces."""
        by_dev = {m.device: m for m in self.memory}
        if self.primary_device is not None and self.primary_device in by_dev:
            return by_dev[self.primary_device]
        if self.primary_device is None:
            return by_dev.get(-1)
        return None


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


_STEP_SOURCE_NOTES = {
    "cpu_span": "no ProfilerStep annotations: one step spans the host operators",
    "gpu_span": "no step ranges: one step spans the GPU activity",
    "trace_span": "no ProfilerStep annotations or host operators: one step spans the trace",
    "none": "no timed events: no steps",
}


def analyze_trace(trace: Trace, context: Context = Context()) -> RankAnalysis:
    """Every metric of one rank; what cannot be computed is ``None`` with a note."""
    notes: list[str] = []
    steps = _steps(trace, context, notes)
    devices = tuple(tb_plugin.device_metrics(trace, steps))
    primary = max(devices, key=lambda d: d.kernel_ns).device if devices else None
    prim_kernels = trace.kernels.filter(pl.col("device") == primary) if primary is not None \
        else trace.kernels.clear()
    notes += _kernel_notes(trace, primary)
    temporal, idle = _hta(trace)
    memory = tuple(kernels.memory_peaks(trace.memory))  # computed once, used three times
    match = _device_match(trace, primary, context.catalog)
    if match is not None and match.gpu is None:
        notes.append(match.note)
    ridge = advise.ridge_for(match.gpu) if match is not None and match.gpu is not None else None
    ncu = _ncu_for(trace, primary, context.ncu, notes)
    diag, work = diagnose(trace, steps, primary, ridge, ncu, context.gpu_samples)
    if ncu is not None and diag is not None and work.height and "signal" in work.columns \
            and not (work["signal"] == "ncu").any():
        notes.append("no kernel of the trace matched a kernel of the Nsight Compute rows (by "
                     "name): they did not classify any kernel; profile the same job with ncu")
    peak = _peak(memory, primary)
    recs: tuple[advise.Recommendation, ...] = ()
    plan = None
    if diag is not None:
        dev = next((d for d in devices if d.device == primary), None)
        gpu_spec = match.gpu if match is not None else None
        measures, words = _measures(trace, steps, prim_kernels, diag, work, dev, peak,
                                    _device_prop(trace, primary, "memory_bytes"), temporal,
                                    idle, gpu_spec)
        recs = tuple(advise.recommend(measures, diag.bound,
                                      diag.step_ns / steps.count / 1e6, gpu_spec,
                                      {"host_parts": host_parts(diag.host_work),
                                       "interconnect": interconnect_advice(
                                           gpu_spec, trace.meta.world_size or 1), **words}))
        plan = _sizing(trace, steps, diag, work, primary, peak, context, notes)
    window = (int(steps.start_ns[0]), int(steps.end_ns[-1])) if steps.count else None
    return RankAnalysis(
        trace=trace,
        steps=steps,
        breakdown=tb_plugin.breakdown(trace, steps, context.breakdown_options)
        if steps.count else None,
        devices=devices,
        primary_device=primary,
        tensor_cores=kernels.tensor_cores(prim_kernels),
        temporal=temporal,
        idle=idle,
        launch=hta.launch_stats(trace),
        top_kernels=kernels.top_kernels(trace.kernels),
        top_ops=kernels.top_ops(trace),
        copies=kernels.copies(trace.transfers),
        memory=memory,
        communication=kernels.communication(prim_kernels, *window)
        if window and prim_kernels.height else None,
        notes=tuple(notes),
        device_match=match,
        diagnosis=diag,
        work=work,
        recommendations=recs,
        sizing=plan,
        timeline=timeline(prim_kernels, *window, context.gpu_samples, primary)
        if window else None,
        sections=sections.run(sections.SECTIONS,
                              sections.SectionInput(trace, steps, primary, work)),
    )


def _hta(trace: Trace) -> tuple[dm.Hta | None, tuple[dm.StreamIdle, ...]]:
    """HTA's temporal and idle breakdowns from one set of kept rows, freed on return (a row
    per kernel, copy and runtime call: not to be held through the rest of the analysis)."""
    rows = hta.kept_rows(trace)
    return hta.temporal_breakdown(trace, rows=rows), tuple(hta.idle_breakdown(trace, rows=rows))


def _steps(trace: Trace, context: Context, notes: list[str]) -> Steps:
    steps = find_steps(trace, context.step_options)
    if trace.meta.window is not None:
        notes.append(trace.meta.window.note(Path(trace.meta.path).name))
    if steps.source in _STEP_SOURCE_NOTES:
        notes.append(_STEP_SOURCE_NOTES[steps.source])
    if steps.dropped:
        notes.append(f"dropped {steps.dropped} trailing step(s) with missing or truncated GPU work")
    return steps


def _kernel_notes(trace: Trace, primary: int | None) -> list[str]:
    notes = []
    if trace.kernels.height == 0:
        notes.append("no GPU kernels in the trace: GPU metrics are null")
    if primary is not None and not trace.kernels["blocks_per_sm"].is_not_null().any():
        notes.append("kernels carry no 'blocks per SM' (e.g. AMD/ROCm): Est. SM efficiency is null")
    if primary is not None and not trace.kernels["occupancy_pct"].is_not_null().any():
        notes.append("kernels carry no occupancy estimate: Est. achieved occupancy is null")
    if trace.memory.height == 0:
        notes.append("no [memory] events (profile_memory was off): peak memory is null")
    return notes


def _sizing(trace: Trace, steps: Steps, diag: Diagnosis, work: pl.DataFrame,
            primary: int | None, peak: int | None, context: Context,
            notes: list[str]) -> sizing.Sizing | None:
    if context.catalog is None:  # a library caller's choice; the pipeline and API always pass one
        return None
    try:
        return sizing.project(_workload(trace, steps, diag, work, primary, peak,
                                        context.samples_per_step),
                              context.catalog, context.constraints)
    except sizing.SizingError as exc:
        notes.append(f"no sizing: {exc}")
        return None


def analyze(traces: list[Trace], context: Context = Context()) -> Analysis:
    ranks = tuple(analyze_trace(t, context) for t in traces)
    counters = None
    if not ranks and context.gpu_samples is not None:
        from rightsize.analyzers.diagnosis.counters import diagnose_counters
        counters = diagnose_counters(context.gpu_samples)
    if not ranks and counters is None and context.ncu is not None:
        from rightsize.analyzers.diagnosis.ncu_only import diagnose_ncu
        counters = diagnose_ncu(context.ncu)
    first = max(ranks, key=lambda r: r.kernel_ns) if ranks else None
    window = (int(first.steps.start_ns[0]), int(first.steps.end_ns[-1])) \
        if first is not None and first.steps.count else None
    return Analysis(ranks, counters, host_timeline(context.host_samples, window),
                    _job(ranks, context))


def _job(ranks: tuple[RankAnalysis, ...], context: Context) -> Job | None:
    """The job of several ranks (its summaries reduced: ``analyzers/job``), else None: one
    trace, or traces of one rank (the profiling windows of one process in a run directory)."""
    if not is_job([r.rank for r in ranks]):
        return None
    return job_of([summarize(r) for r in ranks], context.catalog, context.constraints.provider)


def is_job(numbers: list[int | None]) -> bool:
    """Whether traces of these rank numbers are ranks of one job: two or more, each its own."""
    known = [n for n in numbers if n is not None]
    return len(set(known)) >= 2 and len(set(known)) == len(known)


def job_of_summaries(numbers: list[int | None], summaries: list[RankSummary],
                     catalog: Catalog | None, provider: str | None) -> Job | None:
    """:func:`_job` from summaries made elsewhere (by the workers of ``rightsize.job_map``)."""
    return job_of(summaries, catalog, provider) if is_job(numbers) else None


def _ncu_for(trace: Trace, device: int | None, ncu: pl.DataFrame | None,
             notes: list[str]) -> pl.DataFrame | None:
    """The Nsight Compute rows, unless they were recorded on another kind of GPU than the
    trace's primary device (by compute capability): then they are left out, with a note."""
    if ncu is None or device is None or "compute_capability" not in ncu.columns:
        return ncu
    major, minor = (_device_prop(trace, device, "compute_major"),
                    _device_prop(trace, device, "compute_minor"))
    theirs = sorted({c for c in ncu["compute_capability"].drop_nulls().to_list()})
    if major is None or minor is None or not theirs or f"{major}.{minor}" in theirs:
        return ncu
    notes.append(f"the Nsight Compute rows were recorded on compute capability "
                 f"{', '.join(theirs)}, the trace's GPU is {major}.{minor}: they are not used "
                 "(another GPU's speed of light does not classify these kernels)")
    return None


def _device_prop(trace: Trace, device: int | None, col: str) -> int | None:
    if device is None:
        return None
    row = trace.devices.filter(pl.col("device") == device)
    return None if row.height == 0 or row[col][0] is None else int(row[col][0])


def _device_match(trace: Trace, device: int | None, catalog: Catalog | None) -> DeviceMatch | None:
    if device is None or catalog is None:
        return None
    row = trace.devices.filter(pl.col("device") == device).to_dicts()
    if not row or not row[0]["name"]:
        return DeviceMatch("unknown", None, f"device {device} has no name in the trace: "
                           "it cannot be matched to the GPU catalog")
    return catalog.match(row[0]["name"], row[0]["memory_bytes"], row[0]["sm_count"])


def _peak(memory: tuple[dm.MemoryPeak, ...], device: int | None) -> int | None:
    by_dev = {m.device: m for m in memory}
    m = by_dev.get(device if device is not None else -1)
    return m.peak_allocated_bytes if m is not None else None


def _measures(trace: Trace, steps: Steps, kernels: pl.DataFrame, diag: Diagnosis,
              work: pl.DataFrame, dev: dm.DeviceMetrics | None, peak: int | None,
              memory_bytes: int | None, temporal: dm.Hta | None,
              idle: tuple[dm.StreamIdle, ...],
              gpu_spec: Gpu | None = None) -> tuple[advise.Measures, dict[str, str]]:
    """The measured values the tuning rules compare with their thresholds, and the words
    some rules' details take from the trace."""
    link_gbs = gpu_spec.host_link_gbs_per_direction if gpu_spec else None
    s = cast(Mapping[str, float], diag.shares_pct)  # diagnose() measures every share
    span = temporal.span_ms if temporal is not None else 0.0
    gpu = diag.device == DeviceKind.GPU
    pageable = copies.large_h2d(trace, "pageable")
    main = _main_stream(kernels, idle)
    eager, attention_words = attention.measures(
        attention.find(trace.cpu_ops, kernels, steps.start_ns, steps.end_ns) if gpu else None,
        gpu_spec, diag.step_ns, attention.in_windows_ns(kernels, steps.start_ns, steps.end_ns),
        steps.count)
    fp32_rows = advise.fp32_off_tensor_cores(work) if gpu else None  # once, for both
    fp32 = None if fp32_rows is None else int(fp32_rows["dur_ns"].sum())
    pinned, pinned_steps = copies.pinned_model(trace, steps, pageable, diag, link_gbs) \
        if gpu else ({}, {})
    nvml = diag.utilization.nvml
    hw = diag.host_work
    gpm = nvml.gpm_sm_util_pct_mean if nvml is not None else None
    return (advise.Measures(
        dataloader_pct=s["dataloader"],
        gpu_util_pct=dev.gpu_util_pct if dev is not None else None,
        gpu_idle_pct=100.0 - dev.gpu_util_pct if dev is not None and dev.gpu_util_pct
        is not None else None,
        communication_pct=s["communication"],
        memory_of_device_pct=100.0 * peak / memory_bytes if peak and memory_bytes else None,
        fp32_matmul_pct=_pct(fp32, int(work["dur_ns"].sum())) if gpu else None,
        host_wait_pct=100.0 * main.host_wait_ms / span if span and main else None,
        kernel_wait_pct=100.0 * main.kernel_wait_ms / span if span and main else None,
        pageable_h2d_copies=float(pageable.height) if gpu else None,
        sync_idle_pct=advise.sync_idle_pct(
            trace.cpu_ops, trace.runtime, pl.concat([
                kernels.select("ts_ns", "dur_ns"),
                trace.transfers.filter(pl.col("device") == dev.device).select("ts_ns", "dur_ns")
                if dev is not None else kernels.select("ts_ns", "dur_ns").clear()]),
            steps.start_ns, steps.end_ns, diag.step_ns) if gpu else None,
        fp32_step_pct=_pct(fp32, diag.step_ns) if gpu else None,
        **eager,
        sm_activity_pct=gpm,
        data_parallel_ops=float(advise.data_parallel_ops(trace.cpu_ops)),
        memory_pct=s["memory"],
        pcie_pct=s["pcie"],
        host_cpu_work_pct=hw.cpu_work_pct if hw is not None else (0.0 if gpu else None),
        framework_pct=s["host"] + s["idle"] - (hw.cpu_work_pct + hw.ranges_pct
                                                 if hw is not None else 0.0),
        tracer_pct=hw.framework_pct / 2 if hw is not None and hw.python_frames else None,
        **({"host_rest_pct": s["host"] + s["idle"]} | pinned if gpu else {}),
        per_step_ms=steady.series(diag, steps, pinned_steps, fp32_rows),
        step_numbers=tuple(p.step for p in diag.per_step),
        step_dur_ms=tuple(p.dur_ms for p in diag.per_step),
    ), attention_words)


def _pct(part: int | None, whole: int) -> float | None:
    return None if part is None or whole <= 0 else 100.0 * part / whole


def _main_stream(kernels: pl.DataFrame,
                 idle: tuple[dm.StreamIdle, ...]) -> dm.StreamIdle | None:
    """HTA's idle breakdown of the compute stream with the most kernel time: host wait summed
    over streams counts the idle of copy and collective streams too (146-250% of the span on
    shared NCCL traces), and those idle by design."""
    if not idle or kernels.height == 0 or "stream" not in kernels.columns:
        return None
    compute = kernels.filter(~pl.col("name").str.contains(tb_plugin.COMM_KERNEL))
    if compute.height == 0:
        return None
    by = compute.group_by("stream").agg(pl.col("dur_ns").sum()).sort(
        ["dur_ns", "stream"], descending=[True, False])
    stream = by["stream"][0]
    return next((i for i in idle if i.stream == stream), None)


def _workload(trace: Trace, steps: Steps, diag: Diagnosis, work: pl.DataFrame,
              device: int | None, peak: int | None,
              samples_per_step: int | None) -> sizing.Workload:
    step_ms = diag.step_ns / steps.count / 1e6
    shares = cast(Mapping[str, float], diag.shares_pct)  # diagnose() measures every share
    shares_ms = {k: step_ms * v / 100.0 for k, v in shares.items()}
    flops = bytes_ = None
    if device is None and "flops" in work.columns:  # CPU-only: sized from op-level work
        flops = float(work["flops"].fill_null(0).sum()) / steps.count
        bytes_ = float(work["bytes"].fill_null(0).sum()) / steps.count
    return sizing.Workload(
        step_ms=step_ms, shares_ms=shares_ms,
        **measured_inputs(trace, work, steps.count, device),  # precision, kernels, ranks
        peak_memory_bytes=peak,
        current_device_name=_device_name(trace, device),
        current_sm_count=_device_prop(trace, device, "sm_count"),
        current_memory_bytes=_device_prop(trace, device, "memory_bytes"),
        flops_per_step=flops, bytes_per_step=bytes_, samples_per_step=samples_per_step,
        bound=diag.bound,
        host_copy_gbs=_host_copy_gbs(trace, device),
        host_cpu_work_ms=step_ms * diag.host_work.cpu_work_pct / 100
        if diag.host_work is not None else 0.0,
        **named_stall(diag.host_work, step_ms),
        training=bool(trace.cpu_ops.select((pl.col("name").str.starts_with("Optimizer.step")
                                            | pl.col("name").str.contains("Backward")).any()).item()),
    )


def _host_copy_gbs(trace: Trace, device: int | None) -> float | None:
    """GB/s the device's host<->device copies achieved: bytes / their busy time."""
    if device is None:
        return None
    m = trace.transfers.filter((pl.col("device") == device) & (pl.col("kind") == "memcpy")
                               & pl.col("direction").is_in(["HtoD", "DtoH"]))
    busy = int(m["dur_ns"].sum()) if m.height else 0
    return float(m["bytes"].sum()) / busy if busy > 0 else None


def _device_name(trace: Trace, device: int | None) -> str | None:
    """The primary GPU's name; a GPU without one (no deviceProperties) is still a GPU."""
    if device is None:
        return None
    row = trace.devices.filter(pl.col("device") == device)
    name = row["name"][0] if row.height else None
    return name if name else sizing.UNNAMED_GPU
