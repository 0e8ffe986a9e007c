"""GPU sizing of one rank as a section (``sizing``): the measured workload the projection
starts from, then every candidate GPU and the recommendation (:func:`.projection.project`).

Input: a section's view of one rank (:class:`~rightsize.analyzers.sections.SectionInput`: the
trace, steps, the primary device, the verdict and the peak memory; the catalog, constraints and
samples per step of the context). Output: :class:`~rightsize.analyzers.document.sizing.Sizing`,
``None`` without a diagnosis or a catalog, or when the workload cannot be sized (said in the
notes). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import polars as pl

from rightsize.analyzers.diagnosis.host_work import named_stall
from rightsize.analyzers.document.diagnosis import Diagnosis
from rightsize.analyzers.document.sizing import Sizing
from rightsize.analyzers.metrics.devices import prop
from rightsize.analyzers.metrics.headline import peak
from rightsize.analyzers.metrics.steps import Steps
from rightsize.analyzers.sizing import projection as sizing
from rightsize.analyzers.sizing.measured import measured_inputs
from rightsize.traces.schema import Trace

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput


def section(rank: SectionInput) -> Sizing | None:
    """Section ``sizing`` (needs ``step_ranges``, ``device_use``, ``memory_peaks``,
    ``verdict``)."""
    diag, work = rank["verdict"].diagnosis, rank["verdict"].work
    context = rank.context
    if diag is None or context.catalog is None:  # no catalog: a library caller's choice
        return None
    top = peak(rank)
    try:
        return sizing.project(_workload(rank.trace, rank.steps, diag, work, rank.device,
                                        top.peak_allocated_bytes if top else None,
                                        context.samples_per_step),
                              context.catalog, context.constraints)
    except sizing.SizingError as exc:
        rank.note(f"no sizing: {exc}")
        return None


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
        current_sm_count=prop(trace, device, "sm_count"),
        current_memory_bytes=prop(trace, device, "memory_bytes"),
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
