"""Document classes for GPU sizing and the utilization timeline.

Keys and meanings: docs/json-contract.md and docs/sizing.md. The sizing object is shaped by
:meth:`rightsize.analyzers.sizing.projection.Sizing.to_json` and read back here; keys a newer
projection adds are kept in ``extra`` until they get their own field (one line each). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Candidate:
    gpu: str
    gpus: int
    fits_memory: bool | None  # None: peak memory unknown
    projected_step_ms: float | None
    usd_per_hour: float | None  # all ``gpus`` together
    usd_per_1k_steps: float | None
    energy_j_per_step: float | None
    price_provider: str | None
    price_instance: str | None
    price_date_seen: str | None
    meets_constraints: bool
    precision_used: str
    parallelism: str
    interconnect: str
    projected_step_ms_low: float | None = None  # the range from the projection's validation
    projected_step_ms_high: float | None = None
    consumer: bool = False  # a consumer GPU (recommended only with --include-consumer)
    like_for_like: bool = True  # False: the rank count or fabric would change
    recommendable: bool = True  # False: lacks the precision, consumer, or not like-for-like
    warnings: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupPrecision:
    group: str
    precision: str | None
    time_ms: float


@dataclass(frozen=True, slots=True)
class PrecisionMix:
    """Time-weighted precision of the primary device's kernels (``metrics/precision.py``)."""

    workload: str | None
    time_pct: Mapping[str, float]
    unknown_pct: float
    groups: tuple[GroupPrecision, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sizing:
    current: str | None
    recommended: str | None
    recommended_gpus: int
    verdict: str | None  # over-provisioned / right-sized / under-provisioned
    savings_pct: float | None
    candidates: tuple[Candidate, ...]
    reason: str
    current_note: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def candidate(self, gpu: str | None, gpus: int = 1) -> Candidate | None:
        return next((c for c in self.candidates if c.gpu == gpu and c.gpus == gpus), None)


@dataclass(frozen=True, slots=True)
class Timeline:
    bucket_ms: float
    t_ms: tuple[float, ...]  # bucket starts from the first step's start
    trace_busy_pct: tuple[float, ...]
    nvml_gpu_util_pct: tuple[float | None, ...] | None = field(
        default=None, metadata={"omit_none": True})


@dataclass(frozen=True, slots=True)
class HostTimeline:
    """Host samples of a run directory over time (``metrics/host_timeline.py``)."""

    t_s: tuple[float, ...]  # from the first sample
    cpu_util_pct: tuple[float | None, ...]  # whole machine, 0-100
    job_cpu_util_pct: tuple[float | None, ...]  # the job's process tree, 100 = one core
    job_rss_bytes: tuple[int | None, ...]
    dataloader_workers: tuple[int | None, ...]
    cpu_count: int | None
    window_s: tuple[float, ...] | None  # [start, end] of the profiled steps
