"""Cluster metric series (dcgm-exporter, cAdvisor, nvidia-smi/DCGM logs) in one normalized shape.

Role: the conversion boundary of ``rightsize fleet metrics``. Whatever a series came from (a
Prometheus range query, a saved range-query JSON, a CSV shaped like the Alibaba GenAI-2026 pod
files, an nvidia-smi or DCGM log), it becomes a :class:`SeriesSet`: one :class:`SeriesInfo` per
series (its canonical metric, the metric name it was read from, its normalized labels) and one
polars frame of points ``series`` (u32 index into ``series``), ``t_ns`` (int64 epoch ns) and
``value`` in the canonical metric's unit (percent 0-100, bytes). Units are converted here once.

Labels are normalized to the names the analyzer groups by: ``namespace``, ``pod``,
``container``, ``gpu`` (the exporter's device index), ``uuid``, ``model`` (the GPU's name as the
driver spells it), ``node`` and ``mig_profile``. dcgm-exporter scraped without ``honor_labels``
moves its own labels to ``exported_namespace``/``exported_pod``/``exported_container``: those win.
Every other label is kept as it is (``--group-by`` may name it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import polars as pl

from rightsize.traces import limits

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class MetricDef:
    """A metric name as an exporter publishes it and what it becomes here."""

    canonical: str  # the column-style name with its unit (gpu_util_pct, mem_used_bytes, ...)
    factor: float  # exporter unit -> canonical unit
    definition: str  # what the number is, for the docs and the evidence


# Exporter metric -> canonical metric. GPU_UTIL and the kubelet's duty cycle are the same NVML
# counter (percent of the sample period in which any kernel ran): one canonical name.
METRICS: Mapping[str, MetricDef] = MappingProxyType({
    "DCGM_FI_DEV_GPU_UTIL": MetricDef(
        "gpu_util_pct", 1.0, "percent of the sample period a kernel ran (NVML utilization.gpu)"),
    "container_accelerator_duty_cycle": MetricDef(
        "gpu_util_pct", 1.0, "percent of the sample period the accelerator was busy (cAdvisor, "
        "NVML utilization.gpu)"),
    "DCGM_FI_PROF_SM_ACTIVE": MetricDef(
        "sm_active_pct", 100.0, "SM-time with at least one warp resident, percent of all SMs"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": MetricDef(
        "tensor_active_pct", 100.0, "cycles the tensor pipes were active, percent"),
    "DCGM_FI_PROF_DRAM_ACTIVE": MetricDef(
        "dram_active_pct", 100.0, "cycles the memory interface was busy, percent of peak"),
    "DCGM_FI_DEV_FB_USED": MetricDef("mem_used_bytes", float(MIB), "framebuffer used (MiB)"),
    "container_accelerator_memory_used_bytes": MetricDef(
        "mem_used_bytes", 1.0, "accelerator memory the container uses (bytes)"),
})
CANONICAL: tuple[str, ...] = ("gpu_util_pct", "sm_active_pct", "tensor_active_pct",
                              "dram_active_pct", "mem_used_bytes")
# How each canonical metric is reduced over one query step: the peak of memory (a peak
# between two steps must not be lost), the mean of activity.
STEP_REDUCER: Mapping[str, str] = MappingProxyType({
    "mem_used_bytes": "max_over_time", "gpu_util_pct": "avg_over_time",
    "sm_active_pct": "avg_over_time", "tensor_active_pct": "avg_over_time",
    "dram_active_pct": "avg_over_time"})

# exporter label -> normalized label (later entries of one target lose to earlier ones)
_LABELS: tuple[tuple[str, str], ...] = (
    ("exported_namespace", "namespace"), ("namespace", "namespace"),
    ("exported_pod", "pod"), ("pod", "pod"), ("pod_name", "pod"),
    ("exported_container", "container"), ("container", "container"),
    ("container_name", "container"),
    ("gpu", "gpu"), ("UUID", "uuid"), ("acc_id", "uuid"),
    ("modelName", "model"), ("model", "model"),
    ("Hostname", "node"), ("node", "node"), ("kubernetes_node", "node"),
    ("GPU_I_PROFILE", "mig_profile"),
)
_RENAMED = {src for src, _ in _LABELS}

POINTS_SCHEMA: dict[str, pl.DataType] = {"series": pl.UInt32(), "t_ns": pl.Int64(),
                                         "value": pl.Float64()}


def normalize_labels(raw: Mapping[str, str]) -> dict[str, str]:
    """The exporter's labels with the names the analyzer uses (empty values dropped, as
    Prometheus drops them); ``__name__`` and ``job``/``instance`` (the scrape target) go."""
    out: dict[str, str] = {}
    for src, dst in _LABELS:
        value = raw.get(src)
        if value and dst not in out:
            out[dst] = value
    for k, v in raw.items():
        if v and k not in _RENAMED and k not in ("__name__", "job", "instance") \
                and k not in out:
            out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class SeriesInfo:
    metric: str  # canonical (gpu_util_pct, ...)
    source_metric: str  # as published (DCGM_FI_DEV_GPU_UTIL, container_accelerator_duty_cycle)
    labels: Mapping[str, str]

    def __post_init__(self) -> None:
        # every metrics reader makes its series here: labels capped once (limits.NAME_CHARS)
        object.__setattr__(self, "labels", limits.cap_json(dict(self.labels)))


@dataclass(frozen=True, slots=True)
class SeriesSet:
    """Series and their points (see the module docstring). ``step_s``: the query's step (each
    point stands for one step), or ``None`` where the file sets the rhythm (the analyzer then
    reads each series' own median interval). ``start_ns``/``end_ns``: the window asked for."""

    series: tuple[SeriesInfo, ...]
    points: pl.DataFrame
    source: str
    step_s: float | None = None
    start_ns: int | None = None
    end_ns: int | None = None

    @property
    def metrics(self) -> tuple[str, ...]:
        """The source metrics present, in first-seen order."""
        return tuple(dict.fromkeys(s.source_metric for s in self.series))


def empty_points() -> pl.DataFrame:
    return pl.DataFrame(schema=POINTS_SCHEMA)


def merge(sets: list[SeriesSet], source: str) -> SeriesSet:
    """Several sets as one (series renumbered in order). The step is kept when all agree."""
    series: list[SeriesInfo] = []
    frames: list[pl.DataFrame] = []
    for s in sets:
        frames.append(s.points.with_columns((pl.col("series") + len(series)).cast(pl.UInt32)))
        series.extend(s.series)
    steps = {s.step_s for s in sets}
    starts = [s.start_ns for s in sets if s.start_ns is not None]
    ends = [s.end_ns for s in sets if s.end_ns is not None]
    points = pl.concat(frames) if frames else empty_points()
    return SeriesSet(tuple(series), points, source, steps.pop() if len(steps) == 1 else None,
                     min(starts) if starts else None, max(ends) if ends else None)
