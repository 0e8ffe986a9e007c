"""The nodes of ``rightsize fleet metrics``: one row per workload, and the run's result.

A :class:`WorkloadRow` is a row of the fleet table (DESIGN.md, "Fleet"; issue 31) with
``source == "metrics"``: identity (key, workload, labels, window), hardware (GPU, replicas,
nodes), what was measured (percentiles, coverage, samples, missing metrics), and the
recommendation with its evidence, confidence and cost per month now and recommended. Field names
carry units; docs/fleet-metrics.md lists every key.
"""

from __future__ import annotations

from enum import StrEnum

from rightsize.analyzers.fleet_metrics.serving import ServingRow
from rightsize.node import Node, internal, node, num


class Outcome(StrEnum):
    KEEP = "keep"  # the current placement is needed (or nothing cheaper fits)
    FEWER_REPLICAS = "fewer-replicas"  # same GPU, fewer replicas carry the summed load
    MIG = "mig"  # a MIG slice of the current GPU
    TIME_SHARE = "time-share"  # a time-sliced share of the current GPU
    SMALLER_GPU = "smaller-gpu"  # a cheaper catalog GPU, projected from the counters
    IDLE = "idle"  # nothing ran over the window: release the GPUs it holds
    INCONCLUSIVE = "inconclusive"  # the metrics cannot support a recommendation (needs says why)


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


# Least disruptive first: the order that breaks a tie between options of about the same cost.
DISRUPTION: tuple[Outcome, ...] = (Outcome.KEEP, Outcome.FEWER_REPLICAS, Outcome.MIG,
                                   Outcome.TIME_SHARE, Outcome.SMALLER_GPU)


@node
class Option(Node):
    """One placement considered: where each replica runs, how many replicas, what it costs."""

    kind: Outcome
    label: str  # "MIG 3g.40gb on A100 80GB SXM", "2 replicas on A100 80GB SXM"
    gpu: str
    profile: str | None
    resource: str  # the Kubernetes resource one replica requests
    replicas: int
    share_of_gpu: float = num(6)  # of one GPU, per replica (1/7 for 1g.10gb of 7)
    cost_per_month_usd: float | None = num(2)
    fits: bool = True
    reason: str = ""
    refused_on: str | None = internal(default=None)  # "memory" or "activity" when it does not fit


@node
class WorkloadRow(Node):
    source: str  # always "metrics" (a trace-based fleet row says "trace")
    key: str  # sha256 of the workload and its first and last sample times, 16 hex digits
    workload: str  # namespace/owner, or the --group-by values joined by "/"
    labels: dict[str, str]
    owner_kind: str | None  # Deployment, StatefulSet, Job, CronJob, as the pod names suggest
    containers: tuple[str, ...]  # the containers that hold the GPUs
    recorded_at: str  # the window's end, ISO 8601 UTC
    window_start: str
    window_s: float = num(1)
    step_s: float = num(3)
    coverage_pct: float = num(2)
    samples: dict[str, int]  # per canonical metric
    metrics: tuple[str, ...] = ()  # the exporter metrics the row rests on
    metrics_missing: tuple[str, ...] = ()  # canonical metrics with no series
    gpu: str | None = None  # catalog name of the current GPU
    gpu_reported: str | None = None  # as the exporter or --gpu named it
    mig_profile_now: str | None = None
    replicas_now: int = 0  # median concurrent pods over the window
    replicas_max: int = 0
    gpus_per_replica: int = 1
    nodes: int = 0
    pods: int = 0
    # GPUs held now: replicas x GPUs per replica, a MIG slice its share (1g.10gb of 7: 1/7)
    gpus_now: float = num(6, default=0.0)
    mem_used_peak_bytes: int | None = None
    gpu_util_mean_pct: float | None = num(2, default=None)
    gpu_util_p95_pct: float | None = num(2, default=None)
    gpu_util_p99_pct: float | None = num(2, default=None)
    sm_active_mean_pct: float | None = num(2, default=None)
    sm_active_p95_pct: float | None = num(2, default=None)
    sm_active_p99_pct: float | None = num(2, default=None)
    tensor_active_p95_pct: float | None = num(2, default=None)
    dram_active_p95_pct: float | None = num(2, default=None)
    activity_metric: str | None = None  # sm_active_pct (real activity) or gpu_util_pct
    # all replicas together, 100 = one GPU
    summed_activity_p95_pct: float | None = num(2, default=None)
    summed_activity_max_pct: float | None = num(2, default=None)
    # the activity metric's mean per UTC hour of day (24 values, None: no samples)
    util_by_hour_pct: tuple[float | None, ...] = num(1, default=())
    outcome: Outcome = Outcome.INCONCLUSIVE
    confidence: Confidence | None = None
    recommended: str | None = None
    recommended_gpu: str | None = None
    recommended_profile: str | None = None
    recommended_resource: str | None = None
    replicas_recommended: int | None = None
    share_of_gpu: float | None = num(6, default=None)
    cost_per_month_now_usd: float | None = num(2, default=None)
    cost_per_month_recommended_usd: float | None = num(2, default=None)
    savings_per_month_usd: float | None = num(2, default=None)
    price: str | None = None  # the price used: provider, instance, $/GPU-h, date seen
    usd_per_gpu_hour: float | None = num(4, default=None)  # that price, of the whole GPU
    why: str = ""
    evidence: tuple[str, ...] = ()
    needs: str | None = None  # what to record for a conclusive answer
    alternatives: tuple[Option, ...] = ()


@node
class FleetMetrics(Node):
    schema_version: int
    source: str
    window_start: str | None
    window_end: str | None
    step_s: float | None = num(3)
    headroom: float = num(4)
    hours_per_month: float = num(1)
    outcomes: dict[str, int]
    cost_per_month_now_usd: float | None = num(2)
    cost_per_month_recommended_usd: float | None = num(2)
    savings_per_month_usd: float | None = num(2)
    notes: tuple[str, ...] = ()
    rows: tuple[WorkloadRow, ...] = ()
    serving: tuple[ServingRow, ...] = ()  # vLLM/SGLang workloads (fleet_metrics/serving.py)


SCHEMA_VERSION = 1
