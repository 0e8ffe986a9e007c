"""One trace (rank) -> every metric rightsize reports, as one frozen result.

Input: a normalized :class:`~rightsize.traces.schema.Trace`. Output: :class:`RankAnalysis`;
several ranks make an :class:`Analysis`. Pure: nothing printed, nothing read, inputs untouched.
Metrics that cannot be computed stay ``None`` and the reason is added to ``notes`` once.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from rightsize.analyzers import hta, kernels, tb_plugin
from rightsize.analyzers.steps import StepOptions, Steps, find_steps
from rightsize.traces.schema import Trace


@dataclass(frozen=True, slots=True)
class RankAnalysis:
    trace: Trace
    steps: Steps
    breakdown: tb_plugin.Breakdown | None
    devices: tuple[tb_plugin.DeviceMetrics, ...]
    primary_device: int | None  # the device with the most kernel time
    tensor_cores: kernels.TensorCores
    temporal: hta.Temporal | None
    idle: tuple[hta.StreamIdle, ...]
    launch: hta.LaunchStats
    top_kernels: pl.DataFrame
    top_ops: pl.DataFrame
    copies: pl.DataFrame
    memory: tuple[kernels.MemoryPeak, ...]
    communication: kernels.Communication | None
    notes: tuple[str, ...]

    @property
    def rank(self) -> int | None:
        return self.trace.meta.rank

    def device(self, index: int | None) -> tb_plugin.DeviceMetrics | None:
        return next((d for d in self.devices if d.device == index), None)

    @property
    def kernel_ns(self) -> int:
        return max((d.kernel_ns for d in self.devices), default=0)

    @property
    def peak_memory(self) -> kernels.MemoryPeak | None:
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

    @property
    def primary(self) -> RankAnalysis | None:
        """The rank holding the device with the most kernel time (the first rank if none)."""
        return max(self.ranks, key=lambda r: r.kernel_ns) if self.ranks else None


def analyze_trace(trace: Trace, step_options: StepOptions = StepOptions()) -> RankAnalysis:
    notes: list[str] = []
    steps = find_steps(trace, step_options)
    if steps.source == "cpu_span":
        notes.append("no ProfilerStep annotations: one step spans the host operators")
    elif steps.source == "gpu_span":
        notes.append("no step ranges: one step spans the GPU activity")
    elif steps.source == "trace_span":
        notes.append("no ProfilerStep annotations or host operators: one step spans the trace")
    elif steps.source == "none":
        notes.append("no timed events: no steps")
    if steps.dropped:
        notes.append(f"dropped {steps.dropped} trailing step(s) with missing or truncated GPU work")
    breakdown = tb_plugin.breakdown(trace, steps) if steps.count else None
    devices = tuple(tb_plugin.device_metrics(trace, steps))
    primary = max(devices, key=lambda d: d.kernel_ns).device if devices else None
    if trace.kernels.height == 0:
        notes.append("no GPU kernels in the trace: GPU metrics are null")
    prim_kernels = trace.kernels.filter(pl.col("device") == primary) if primary is not None \
        else trace.kernels.clear()
    if primary is not None and not trace.kernels["blocks_per_sm"].is_not_null().any():
        notes.append("kernels carry no 'blocks per SM' (e.g. AMD/ROCm): Est. SM efficiency is null")
    if primary is not None and not trace.kernels["occupancy_pct"].is_not_null().any():
        notes.append("kernels carry no occupancy estimate: Est. achieved occupancy is null")
    temporal = hta.temporal_breakdown(trace)
    if trace.memory.height == 0:
        notes.append("no [memory] events (profile_memory was off): peak memory is null")
    comm = None
    if steps.count and prim_kernels.height:
        comm = kernels.communication(prim_kernels, int(steps.start_ns[0]), int(steps.end_ns[-1]))
    return RankAnalysis(
        trace=trace,
        steps=steps,
        breakdown=breakdown,
        devices=devices,
        primary_device=primary,
        tensor_cores=kernels.tensor_cores(prim_kernels),
        temporal=temporal,
        idle=tuple(hta.idle_breakdown(trace)),
        launch=hta.launch_stats(trace),
        top_kernels=kernels.top_kernels(trace.kernels),
        top_ops=kernels.top_ops(trace),
        copies=kernels.copies(trace.transfers),
        memory=tuple(kernels.memory_peaks(trace.memory)),
        communication=comm,
        notes=tuple(notes),
    )


def analyze(traces: list[Trace]) -> Analysis:
    return Analysis(tuple(analyze_trace(t) for t in traces))
