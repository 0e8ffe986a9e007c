"""What ``rightsize plan`` takes from an analysis: the measured step, utilization and memory.

Input: a typed analysis :class:`~rightsize.analyzers.document.Document` and, for a run
directory, the host usage its samples measured (:class:`HostUsage`). Output: a frozen
:class:`Workload` whose every number names where it came from, and ``missing`` lines that say
what the capture lacks for a given decision. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.analyzers.document import Document
from rightsize.vocab import Bound


@dataclass(frozen=True, slots=True)
class HostUsage:
    """Host samples of the job's process tree (``samples/host.parquet``)."""

    cpu_cores_peak: float  # job_cpu_util_pct max / 100 (percent of one core)
    cpu_cores_mean: float
    rss_bytes_peak: int  # job_rss_bytes max
    samples: int


@dataclass(frozen=True, slots=True)
class Workload:
    step_ms: float | None
    step_source: str
    current_gpu: str | None
    util_pct: float | None  # fraction of the step the device was busy, on the measured GPU
    util_source: str
    peak_memory_bytes: int | None
    memory_source: str
    bound: str | None
    confidence: float | None
    host: HostUsage | None
    missing: tuple[str, ...]


def _util(doc: Document) -> tuple[float | None, str]:
    d = doc.diagnosis
    nvml = d.utilization.nvml if d else None
    if nvml is not None and nvml.gpu_util_pct_mean is not None:
        return nvml.gpu_util_pct_mean, (f"NVML gpu_util mean over {nvml.samples} samples in "
                                        "the step windows (what DCGM_FI_DEV_GPU_UTIL reports)")
    trace = d.utilization.trace if d else None
    if trace is not None:
        return trace.gpu_busy_pct_mean, "trace: kernel busy time / step time, mean over steps"
    return None, "none: no GPU in the capture (CPU-only run) and no NVML samples"


def _memory(doc: Document) -> tuple[int | None, str]:
    m = doc.metrics
    if m.peak_memory_bytes is None:
        return None, "none: the capture has no memory events (record with profile_memory=True)"
    where = "host (CPU-only run)" if m.device is None else f"device {m.device}"
    return m.peak_memory_bytes, f"trace: peak allocated bytes on {where}"


def from_document(doc: Document, host: HostUsage | None = None) -> Workload:
    """The planning inputs of ``doc``; ``missing`` names each one the capture lacks."""
    missing: list[str] = []
    step = doc.steps.mean_ms
    if step is None:
        missing.append("no step time: the capture has no steps (record a few ProfilerSteps)")
    elif doc.steps.count < 3:
        missing.append(f"only {doc.steps.count} step(s) recorded: the step time, and every "
                       "replica count built on it, rests on so few; record more steps")
    util, util_source = _util(doc)
    if util is None:
        missing.append("no GPU utilization: partitions and the HPA target need a GPU run "
                       "(with NVML samples, e.g. rightsize run) or a trace with kernels")
    peak, memory_source = _memory(doc)
    if peak is None:
        missing.append("no peak memory: MIG slices and time-slicing need it (record with "
                       "profile_memory=True)")
    d = doc.diagnosis
    if d is None or d.bound in (None, Bound.INCONCLUSIVE):
        missing.append("inconclusive diagnosis: the projection of other GPUs rests on a "
                       "verdict the capture could not support; treat the plan as a rough guide")
    return Workload(step, f"trace: mean of {doc.steps.count} steps ({doc.steps.source})",
                    doc.sizing.current if doc.sizing else None, util, util_source, peak,
                    memory_source, d.bound if d else None, d.confidence if d else None, host,
                    tuple(missing))
