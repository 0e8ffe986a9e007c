"""Document classes for the verdict: diagnosis, its signals and utilization, recommendations.

Keys and meanings: docs/json-contract.md and docs/diagnosis.md. A new key is one field line here
(give it a default so older documents still read) plus its value in
:mod:`rightsize.analyzers.document.build`. Pure; no polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The NVML/GPM counters sampled during a run, in the order the verdict reports them.
NVML_METRICS = ("gpu_util", "mem_util", "gpm_sm_util", "gpm_sm_occupancy", "gpm_tensor_util",
                "gpm_dram_bw_util")


def _opt() -> Any:
    return field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, slots=True)
class SignalGroup:
    """Classified work summed per kernel group (or per kernel / op name)."""

    group: str
    class_: str | None = field(metadata={"key": "class"})  # compute / memory / communication
    signal: str | None  # ncu / counters / roofline / name / default
    time_ms: float | None
    calls: int


@dataclass(frozen=True, slots=True)
class TraceUtilization:
    """Kernel busy time on the primary device, over the step windows (trace-derived)."""

    gpu_busy_pct_mean: float
    gpu_busy_pct_peak_step: float


@dataclass(frozen=True, slots=True)
class NvmlUtilization:
    """NVML / GPM / DCGM samples whose averaged time lies inside the step windows: mean and
    peak of each counter that was sampled (a counter never sampled has no key). ``samples``
    counts utilization.gpu rows, ``gpm_samples`` GPM rows; ``utilization_period_ms`` is the
    driver's averaging period assumed for utilization.gpu (1/6 s to 1 s)."""

    samples: int
    gpm_samples: int | None = _opt()
    utilization_period_ms: float | None = _opt()
    gpu_util_pct_mean: float | None = _opt()
    gpu_util_pct_peak: float | None = _opt()
    mem_util_pct_mean: float | None = _opt()
    mem_util_pct_peak: float | None = _opt()
    gpm_sm_util_pct_mean: float | None = _opt()
    gpm_sm_util_pct_peak: float | None = _opt()
    gpm_sm_occupancy_pct_mean: float | None = _opt()
    gpm_sm_occupancy_pct_peak: float | None = _opt()
    gpm_tensor_util_pct_mean: float | None = _opt()
    gpm_tensor_util_pct_peak: float | None = _opt()
    gpm_dram_bw_util_pct_mean: float | None = _opt()
    gpm_dram_bw_util_pct_peak: float | None = _opt()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def counter(self, metric: str, stat: str) -> float | None:
        """``counter("gpu_util", "mean")``: one of :data:`NVML_METRICS`, ``mean`` or ``peak``."""
        return getattr(self, f"{metric}_pct_{stat}", None)


@dataclass(frozen=True, slots=True)
class Utilization:
    trace: TraceUtilization | None
    nvml: NvmlUtilization | None


@dataclass(frozen=True, slots=True)
class DeviceMatch:
    reported: str
    catalog: str | None
    note: str


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    """One piece of evidence: the share (or capture fact) it is about, the measured value, the
    threshold it was compared with, and the sentence shown to users."""

    share: str
    value: float | None
    threshold: float | None
    text: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What bounds the step; ``shares_pct`` sum to 100 (``None``: not measured)."""

    bound: str | None
    confidence: float | None
    device: str  # gpu | cpu
    shares_pct: Mapping[str, float | None]
    evidence: tuple[str, ...]
    signals: tuple[SignalGroup, ...]
    signal_pct: Mapping[str, float | None]
    thresholds: Mapping[str, Any]
    utilization: Utilization
    device_match: DeviceMatch | None
    evidence_items: tuple[EvidenceItem, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Recommendation:
    id: str
    title: str
    detail: str
    evidence: str | tuple[str, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)
