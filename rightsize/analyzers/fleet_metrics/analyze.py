"""Cluster metric series -> one recommendation per workload (``rightsize fleet metrics``).

Inputs: a :class:`~rightsize.traces.fleet_series.SeriesSet`, the GPU catalog, the
:class:`~rightsize.analyzers.fleet_metrics.thresholds.Thresholds`, and what the metrics may not
say (``gpu``: the GPU's name where no ``modelName``/``model`` label names it; ``group_by``;
``provider`` of the prices). Output: a :class:`~rightsize.analyzers.fleet_metrics.model.
FleetMetrics`, rows ordered by savings per month. Pure.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rightsize.analyzers.fleet_metrics.model import (
    SCHEMA_VERSION,
    Confidence,
    FleetMetrics,
    Option,
    Outcome,
    WorkloadRow,
)
from rightsize.analyzers.fleet_metrics.options import (
    choose,
    keep_reason,
    needs_of,
    options,
    undecided,
)
from rightsize.analyzers.fleet_metrics.stats import Measured, measure
from rightsize.analyzers.fleet_metrics.thresholds import HOURS_PER_MONTH, Thresholds
from rightsize.analyzers.fleet_metrics.workloads import Assignment, assign, owner_kind
from rightsize.catalog import Catalog, CatalogError, Gpu
from rightsize.catalog.mig import MigProfile, profiles_for
from rightsize.traces.fleet_series import CANONICAL, METRICS, SeriesSet

GIB = 1 << 30
_RANK = {Confidence.HIGH: 2, Confidence.MEDIUM: 1, Confidence.LOW: 0}
NEEDS_SM = ("DCGM_FI_PROF_SM_ACTIVE (dcgm-exporter's profiling metrics, on by default in its "
            "dcp-metrics-included.csv)")


def iso(t_ns: int) -> str:
    return datetime.fromtimestamp(t_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    return f"{seconds / 86400:.1f} d" if seconds >= 86400 else f"{seconds / 3600:.1f} h"


def _lowest(*levels: Confidence) -> Confidence:
    return min(levels, key=lambda c: _RANK[c])


class _Workload:
    """Labels-derived facts about one workload: its GPU, MIG profile, nodes, metrics."""

    def __init__(self, data: SeriesSet, idx: list[int]) -> None:
        labels = [data.series[i].labels for i in idx]
        self.models = Counter(lb["model"] for lb in labels if lb.get("model"))
        self.profiles = Counter(lb["mig_profile"] for lb in labels if lb.get("mig_profile"))
        self.nodes = len({lb["node"] for lb in labels if lb.get("node")})
        present = {data.series[i].source_metric for i in idx}
        self.metrics = tuple(m for m in METRICS if m in present)  # the table's order
        self.containers = tuple(sorted({lb["container"] for lb in labels
                                        if lb.get("container")}))
        kinds = Counter(owner_kind(lb["pod"])[1] for lb in labels
                        if lb.get("pod") and not lb.get("file"))
        self.kind = kinds.most_common(1)[0][0] if kinds else None
        self.canonical = {data.series[i].metric for i in idx}


def _gate(x: Measured, th: Thresholds) -> str | None:
    """Why the window cannot support a recommendation (None: it can)."""
    if "mem_used_bytes" not in x.metrics:
        return ("no GPU memory series: record DCGM_FI_DEV_FB_USED or "
                "container_accelerator_memory_used_bytes")
    am = x.activity_metric
    if am is None:
        return f"no activity series: record {NEEDS_SM}, else DCGM_FI_DEV_GPU_UTIL"
    if x.window_s < th.min_window_s:
        return (f"window {_span(x.window_s)} is under {_span(th.min_window_s)}: it cannot show a "
                "daily peak (a longer --since)")
    few = min(x.metrics["mem_used_bytes"].samples, x.metrics[am].samples)
    if few < th.min_samples:
        return f"{few} samples: under {th.min_samples}, too sparse for percentiles"
    if x.coverage < th.min_coverage:
        return (f"samples cover {x.coverage:.0%} of the window's steps: under "
                f"{th.min_coverage:.0%}, gaps could hide the peak")
    return None


def _evidence(x: Measured, n_metrics: tuple[str, ...], th: Thresholds) -> list[str]:
    ev = []
    mem = x.metrics.get("mem_used_bytes")
    if mem:
        ev.append(f"peak memory {mem.max / GIB:.2f} GiB over {mem.samples:,} samples "
                  f"({mem.max * (1 + th.headroom) / 1e9:.2f} GB with {th.headroom:.0%} headroom)")
    sm = x.metrics.get("sm_active_pct")
    if sm:
        ev.append(f"SM_ACTIVE p95 {sm.p95:.1f}%, p99 {sm.p99:.1f}%, mean {sm.mean:.1f}% "
                  "(DCGM_FI_PROF_SM_ACTIVE: real SM activity)")
    util = x.metrics.get("gpu_util_pct")
    if util:
        name = next((m for m in n_metrics if METRICS[m].canonical == "gpu_util_pct"), "")
        ev.append(f"duty cycle p95 {util.p95:.1f}%, p99 {util.p99:.1f}%, mean {util.mean:.1f}% "
                  f"({name}: the share of time a kernel ran, an upper bound of SM activity)")
    for m, label in (("tensor_active_pct", "TENSOR_ACTIVE"), ("dram_active_pct", "DRAM_ACTIVE")):
        if m in x.metrics:
            ev.append(f"{label} p95 {x.metrics[m].p95:.1f}%")
    am = x.activity_metric
    if am and x.replicas_max > 1:
        ev.append(f"{x.replicas_now} replicas (at most {x.replicas_max}): summed {am} p95 "
                  f"{x.summed_p95[am]:.1f}% of one GPU")
    ev.append(f"window {_span(x.window_s)} at {x.step_s:g} s steps, coverage {x.coverage:.1%}")
    return ev


def _confidence(x: Measured, chosen: Option, weak: bool, th: Thresholds) -> Confidence:
    evidence = Confidence.MEDIUM if weak else Confidence.HIGH
    if chosen.kind is Outcome.SMALLER_GPU:
        evidence = Confidence.LOW
    window = (Confidence.HIGH if x.window_s >= th.week_window_s else
              Confidence.MEDIUM if x.window_s >= th.day_window_s else Confidence.LOW)
    cover = Confidence.HIGH if x.coverage >= th.full_coverage else Confidence.MEDIUM
    return _lowest(evidence, window, cover)


def _current(wl: _Workload, cat: Catalog, gpu: str | None) -> tuple[Gpu | None, str | None, str]:
    reported = wl.models.most_common(1)[0][0] if wl.models else gpu
    if reported is None:
        return None, None, ("the current GPU is unknown: no modelName/model label; pass --gpu "
                            "NAME")
    try:
        return cat.gpu(reported), reported, ""
    except CatalogError:  # not a catalog name: match it as the driver spells it
        m = cat.match(reported)
        return m.gpu, reported, m.note if m.gpu is None else ""


def row(data: SeriesSet, a: Assignment, x: Measured, cat: Catalog, th: Thresholds,
        gpu: str | None, provider: str | None, idx: list[int]) -> WorkloadRow:
    """The row of workload ``x.index``, whose series are ``idx``."""
    wl = _Workload(data, idx)
    now, reported, why_unknown = _current(wl, cat, gpu)
    profile_now: MigProfile | None = None
    if now is not None and wl.profiles:
        name = wl.profiles.most_common(1)[0][0]
        profile_now = next((p for p in profiles_for(now.name) if p.profile == name), None)
    price = cat.price(now.name, provider) if now is not None else None
    am = x.activity_metric
    base: dict[str, Any] = {
        "source": "metrics", "workload": a.names[x.index], "labels": dict(a.workloads[x.index]),
        "owner_kind": wl.kind if "owner" in a.workloads[x.index] else None,
        "containers": wl.containers,
        "key": hashlib.sha256(f"{a.names[x.index]}|{x.first_ns}|{x.last_ns}".encode())
        .hexdigest()[:16],
        "recorded_at": iso(x.last_ns), "window_start": iso(x.first_ns), "window_s": x.window_s,
        "step_s": x.step_s, "coverage_pct": 100 * x.coverage,
        "samples": {m: x.metrics[m].samples for m in CANONICAL if m in x.metrics},
        "metrics": wl.metrics,
        "metrics_missing": tuple(m for m in CANONICAL if m not in wl.canonical),
        "gpu": now.name if now else None, "gpu_reported": reported,
        "mig_profile_now": profile_now.profile if profile_now else None,
        "replicas_now": x.replicas_now, "replicas_max": x.replicas_max,
        "gpus_per_replica": x.gpus_per_replica, "nodes": wl.nodes, "pods": x.pods,
        "gpus_now": x.replicas_now * (1.0 / profile_now.max_instances if profile_now
                                      else float(x.gpus_per_replica)),
        "mem_used_peak_bytes": (int(x.metrics["mem_used_bytes"].max)
                                if "mem_used_bytes" in x.metrics else None),
        "activity_metric": am, "summed_activity_p95_pct": x.summed_p95.get(am) if am else None,
        "summed_activity_max_pct": x.summed_max.get(am) if am else None,
        "util_by_hour_pct": x.by_hour,
        "price": (f"{price.provider} {price.instance_type} ${price.usd_per_gpu_hour:g}/GPU-h "
                  f"({price.date_seen or 'undated'})" if price else None),
        "usd_per_gpu_hour": price.usd_per_gpu_hour if price else None,
        "evidence": tuple(_evidence(x, wl.metrics, th))}
    for m, pre in (("gpu_util_pct", "gpu_util"), ("sm_active_pct", "sm_active")):
        if m in x.metrics:
            s = x.metrics[m]
            base.update({f"{pre}_mean_pct": s.mean, f"{pre}_p95_pct": s.p95,
                         f"{pre}_p99_pct": s.p99})
    for m in ("tensor_active_pct", "dram_active_pct"):
        if m in x.metrics:
            base[m.replace("_pct", "_p95_pct")] = x.metrics[m].p95
    gate = _gate(x, th)
    if gate is None and now is None:
        gate = why_unknown
    if gate is not None:
        return WorkloadRow(**base, outcome=Outcome.INCONCLUSIVE, why=gate, needs=gate)
    assert now is not None
    scale = profile_now.compute_fraction if profile_now else 1.0
    n = needs_of(x, th, scale)
    usd = price.usd_per_gpu_hour if price else None
    opts = options(now, profile_now, cat, usd, n, th, x.gpus_per_replica, provider)
    keep = opts[0]
    if am is not None and x.metrics[am].p99 < th.idle_p99_pct:
        return _idle(base, x, keep, am, th)
    chosen = choose(opts, th)
    alternatives = tuple(sorted((o for o in opts[1:] if o.fits and o is not chosen),
                                key=lambda o: (o.cost_per_month_usd or 0, o.share_of_gpu))[:3])
    common: dict[str, Any] = {"cost_per_month_now_usd": keep.cost_per_month_usd,
                              "alternatives": alternatives}
    open_ = undecided(opts, chosen, n, th)
    if open_ is not None:
        why = (f"{open_.label} holds the memory and would cost "
               f"${open_.cost_per_month_usd or 0:,.0f}/month, but the duty cycle (p95 "
               f"{n.summed_activity:.1f}%) exceeds its compute share; the duty cycle overstates "
               f"SM activity, so only SM_ACTIVE can decide (safe now: {chosen.label})")
        return WorkloadRow(**base, **common, outcome=Outcome.INCONCLUSIVE, why=why,
                           needs=f"record {NEEDS_SM}")
    outcome = chosen.kind
    if chosen.kind is Outcome.FEWER_REPLICAS and chosen.replicas >= x.replicas_now:
        outcome = Outcome.KEEP
    busy = n.summed_activity > th.target_pct * x.replicas_now * (chosen.share_of_gpu or 1)
    why = chosen.reason if chosen is not keep else (
        f"busy: summed {am} p95 {n.summed_activity:.1f}% is above the {th.target_pct:.0f}% "
        "target of the current GPUs" if busy else keep_reason(opts, n)
        if len(opts) > 1 else "a pod of several GPUs: right-size it from a trace "
        "(rightsize run), not from its counters")
    rec_cost = chosen.cost_per_month_usd
    return WorkloadRow(
        **base, **common, outcome=outcome, confidence=_confidence(x, chosen, n.weak, th),
        recommended=chosen.label, recommended_gpu=chosen.gpu,
        recommended_profile=chosen.profile, recommended_resource=chosen.resource,
        replicas_recommended=chosen.replicas, share_of_gpu=chosen.share_of_gpu,
        cost_per_month_recommended_usd=rec_cost,
        savings_per_month_usd=(keep.cost_per_month_usd - rec_cost
                               if keep.cost_per_month_usd is not None and rec_cost is not None
                               else None),
        why=why)


def _idle(base: dict[str, Any], x: Measured, keep: Option, am: str,
          th: Thresholds) -> WorkloadRow:
    """A workload that ran nothing over its window: release what it holds, all of it saved."""
    a = x.metrics[am]
    cost = keep.cost_per_month_usd
    saves = f" and save its ${cost:,.0f}/month" if cost is not None else ""
    them = "them" if (base.get("gpus_now") or 1) > 1 else "it"
    why = (f"idle: {am} p99 {a.p99:.1f}%, mean {a.mean:.2f}% (max {a.max:.1f}%) over "
           f"{_span(x.window_s)}, p99 under {th.idle_p99_pct:g}%: next to nothing ran on the "
           f"{keep.label} it holds; release {them}{saves} (scale to 0 or delete the pods; a "
           "replica kept warm for requests can scale to zero between them), rather than move "
           "to a smaller GPU")
    window = (Confidence.HIGH if x.window_s >= th.week_window_s else
              Confidence.MEDIUM if x.window_s >= th.day_window_s else Confidence.LOW)
    cover = Confidence.HIGH if x.coverage >= th.full_coverage else Confidence.MEDIUM
    return WorkloadRow(
        **base, cost_per_month_now_usd=keep.cost_per_month_usd, outcome=Outcome.IDLE,
        confidence=_lowest(window, cover), recommended=f"release {keep.label}",
        recommended_gpu=None, recommended_profile=None, recommended_resource=None,
        replicas_recommended=0, share_of_gpu=0.0,
        cost_per_month_recommended_usd=0.0 if cost is not None else None,
        savings_per_month_usd=cost, why=why)


def analyze(data: SeriesSet, cat: Catalog, th: Thresholds | None = None, *,
            gpu: str | None = None, group_by: Sequence[str] | None = None,
            provider: str | None = None) -> FleetMetrics:
    th = th or Thresholds()
    a = assign([s.labels for s in data.series], group_by)
    measured = measure(data, a, th.percentile)
    series_of: list[list[int]] = [[] for _ in measured]  # each workload's series, in one pass
    for i, w in enumerate(a.workload):
        series_of[w].append(i)
    rows = [row(data, a, x, cat, th, gpu, provider, series_of[x.index]) for x in measured]
    rows.sort(key=lambda r: (-(r.savings_per_month_usd or 0), r.workload))
    notes = []
    if gpu and any(r.gpu_reported == gpu for r in rows):
        notes.append(f"--gpu {gpu}: the current GPU of workloads whose metrics do not name one")
    outcomes = Counter(r.outcome.value for r in rows)

    def total(field: str) -> float | None:
        vals = [getattr(r, field) for r in rows if r.outcome is not Outcome.INCONCLUSIVE]
        return sum(vals) if vals and all(v is not None for v in vals) else None

    return FleetMetrics(
        SCHEMA_VERSION, data.source,
        iso(data.start_ns) if data.start_ns is not None else
        (iso(min(x.first_ns for x in measured)) if measured else None),
        iso(data.end_ns) if data.end_ns is not None else
        (iso(max(x.last_ns for x in measured)) if measured else None),
        data.step_s, th.headroom, HOURS_PER_MONTH,
        {o.value: outcomes.get(o.value, 0) for o in Outcome},
        total("cost_per_month_now_usd"), total("cost_per_month_recommended_usd"),
        total("savings_per_month_usd"), tuple(notes), tuple(rows))
