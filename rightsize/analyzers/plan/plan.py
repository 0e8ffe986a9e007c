"""Build a serving plan from an analysis: capacity per candidate GPU, replicas over the demand
curve, costs, partitions, the recommended GPU and the autoscaling targets.

Input: a :class:`~rightsize.analyzers.document.Document` (its sizing candidates: projected
step with its range, price), the :class:`Workload` taken from it, :class:`PlanInputs` (what the
user knows) and the catalog (GPU memory). Output: a frozen :class:`Plan`; :meth:`Plan.to_json`
is the ``rightsize plan --format json`` contract (docs/plan.md). Pure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from rightsize.analyzers.document import Document
from rightsize.analyzers.document.sizing import Candidate
from rightsize.analyzers.plan.capacity import (
    Capacity,
    SloStatus,
    replicas_for,
    slo_status,
    with_costs,
)
from rightsize.analyzers.plan.demand import Demand
from rightsize.analyzers.plan.partitions import Partition, fit
from rightsize.analyzers.plan.serving import KvBudget, max_concurrent, served
from rightsize.analyzers.plan.workload import Workload
from rightsize.analyzers.sizing.model_shape import ModelShape
from rightsize.catalog import Catalog
from rightsize.catalog.mig import profiles_for
from rightsize.errors import RightsizeError

PLAN_SCHEMA_VERSION = 1


class PlanError(RightsizeError):
    """The analysis cannot support a plan (no steps, no sizing)."""


@dataclass(frozen=True, slots=True)
class PlanInputs:
    samples_per_step: int
    unit: str  # samples | tokens: what --samples-per-step and --demand count
    slo_ms: float | None
    demand: Demand
    headroom: float  # fraction of each replica's throughput kept free
    kv: KvBudget | None = None
    shape: ModelShape | None = None  # with kv: the serving step model bounds and scales the batch


@dataclass(frozen=True, slots=True)
class Plan:
    workload: Workload
    inputs: PlanInputs
    capacities: tuple[Capacity, ...]
    excluded: tuple[str, ...]  # candidate GPUs left out, and why
    partitions: tuple[Partition, ...]
    recommended: str | None
    reason: str
    util_on_recommended_pct: float | None
    hpa_target_pct: int | None
    keda_threshold_per_s: float | None
    notes: tuple[str, ...]
    deploy_on: Partition | None = None  # the MIG slice or time share the manifests request

    def capacity(self, gpu: str | None) -> Capacity | None:
        return next((c for c in self.capacities if c.gpu == gpu), None)

    def partition(self, gpu: str | None) -> Partition | None:
        return next((p for p in self.partitions if p.gpu == gpu), None)

    def to_json(self) -> dict[str, Any]:
        d = self.inputs.demand
        return {
            "schema_version": PLAN_SCHEMA_VERSION,
            "workload": asdict(self.workload),
            "inputs": {"samples_per_step": self.inputs.samples_per_step,
                       "unit": self.inputs.unit, "latency_slo_ms": self.inputs.slo_ms,
                       "headroom": self.inputs.headroom,
                       "kv": asdict(self.inputs.kv) if self.inputs.kv else None},
            "demand": {"source": d.source, "t_s": list(d.t_s),
                       "rate_per_s": list(d.rate_per_s), "end_s": d.end_s,
                       "peak_per_s": d.peak_per_s, "mean_per_s": round(d.mean_per_s, 4)},
            "candidates": [asdict(c) for c in self.capacities],
            "excluded": list(self.excluded),
            "partitions": [asdict(p) for p in self.partitions],
            "recommended": self.recommended,
            "reason": self.reason,
            "deploy_on": asdict(self.deploy_on) if self.deploy_on else None,
            "autoscaling": {"util_on_recommended_pct": self.util_on_recommended_pct,
                            "hpa_target_gpu_util_pct": self.hpa_target_pct,
                            "keda_threshold_per_s": self.keda_threshold_per_s},
            "notes": list(self.notes),
        }


def util_on(w: Workload, step_ms: float) -> float | None:
    """Busy share of a step on a candidate: the measured non-busy time does not shrink, the
    busy time is what is left of the projected step."""
    if w.util_pct is None or w.step_ms is None:
        return None
    idle = (1 - w.util_pct / 100) * w.step_ms
    return round(max(0.0, min(100.0, 100 * (step_ms - idle) / step_ms)), 2)


def _capacity(c: Candidate, w: Workload, inputs: PlanInputs,
              catalog: Catalog) -> Capacity | str:
    assert c.projected_step_ms is not None
    batch, batch_source = inputs.samples_per_step, "--samples-per-step (measured batch)"
    scale = 1.0
    if inputs.kv is not None:
        by_model = served(inputs.shape, inputs.kv.precision, c.gpu, catalog, inputs.kv.seq,
                          batch, inputs.headroom) if inputs.shape is not None else None
        limit = by_model.limit if by_model is not None else max_concurrent(
            inputs.kv, catalog.gpu(c.gpu).memory_bytes, inputs.headroom)
        if limit == 0:
            return f"{c.gpu}: {inputs.kv.model} does not fit ({inputs.kv.fixed_bytes / 2**30:.2f}" \
                   f" GiB before any KV cache, with {inputs.headroom:.0%} headroom)"
        if limit < batch and by_model is not None:
            batch, batch_source, scale = limit, by_model.why, by_model.step_scale
        elif limit < batch:
            batch, batch_source = limit, (f"KV cache bound: {limit} requests of {inputs.kv.seq}"
                                          " tokens fit (step assumed unchanged: conservative)")
    step = c.projected_step_ms * scale
    low, high_end = _times(c.projected_step_ms_low, scale), _times(c.projected_step_ms_high, scale)
    status, note = slo_status(step, high_end, inputs.slo_ms)
    high = high_end or step
    source = "projection (analysis sizing)" if c.gpu != w.current_gpu else "measured on this GPU"
    if scale != 1.0:
        source += f", x{scale:.3g} at the KV-bound batch (serving model)"
    cap = Capacity(c.gpu, step, low, high_end, source, batch, batch_source,
                   round(batch * 1000 / step, 3), round(batch * 1000 / high, 3),
                   status, note, c.usd_per_hour,
                   f"{c.price_provider} {c.price_instance} ({c.price_date_seen})"
                   if c.price_provider else None, None)
    if status is SloStatus.MISSES:
        return cap
    usable = cap.per_replica_per_s * (1 - inputs.headroom)
    return with_costs(cap, replicas_for(inputs.demand, usable))


def _times(x: float | None, k: float) -> float | None:
    return None if x is None else x * k


def gpu_resource(vendor: str) -> str:
    """The whole-GPU extended resource of the vendor's Kubernetes device plugin."""
    return "amd.com/gpu" if vendor.upper() == "AMD" else "nvidia.com/gpu"


def _partition(c: Capacity, w: Workload, inputs: PlanInputs, catalog: Catalog) -> Partition:
    """Peak memory per replica: the estimator's (weights + KV cache of the batch) with
    ``--hf-config``, else the measured peak."""
    gpu = catalog.gpu(c.gpu)
    peak = w.peak_memory_bytes
    if inputs.kv is not None:
        peak = inputs.kv.fixed_bytes + c.batch * inputs.kv.kv_bytes_per_request
    part = fit(c.gpu, gpu.memory_bytes, profiles_for(c.gpu), c.step_ms, util_on(w, c.step_ms),
               peak, inputs.headroom, inputs.slo_ms, gpu_resource(gpu.vendor))
    if part.step_ms is None:
        return part
    # replicas on the partition at the peak, packed per_gpu to a GPU
    usable = c.batch * 1000 / part.step_ms * (1 - inputs.headroom)
    replicas = max(1, math.ceil(inputs.demand.peak_per_s / usable - 1e-9))
    part = replace(part, gpus_at_peak=math.ceil(replicas / part.per_gpu))
    whole = c.replicas.peak if c.replicas is not None else None
    # GPU capacity the slices take at the peak (a slice leaves the rest of its GPU to others)
    if part.kind != "whole-gpu" and whole is not None and replicas / part.per_gpu >= whole:
        # A slice runs each replica slower; seen on the shared Qwen H100 step (90% busy):
        # 3g.40gb needed 8 H100 PCIe at the peak against 6 whole GPUs.
        return replace(part, kind="whole-gpu", profile=None, resource=gpu_resource(gpu.vendor),
                       per_gpu=1, step_ms=c.step_ms, gpus_at_peak=whole,
                       reason=f"a whole GPU: {whole} at the peak, where the best slice "
                              f"({part.profile or part.kind}) would need {part.gpus_at_peak}",
                       rejected=(*part.rejected, (f"{part.profile or part.kind}: "
                                                  f"{part.gpus_at_peak} GPUs at the peak, not "
                                                  f"fewer than {whole} whole ones")))
    if part.kind != "whole-gpu" and whole is not None:
        # Kept: say what it saves, in GPU capacity at the peak (the rest of a partly used GPU
        # holds other work), so a slice on as many GPUs as whole ones is not read as no gain.
        part = replace(part, reason=f"{part.reason}; {_n(replicas, 'replica')} at the peak, "
                                    f"{part.per_gpu} a GPU: {replicas / part.per_gpu:.3g} GPU"
                                    f"{'' if replicas == part.per_gpu else 's'} of capacity against {_n(whole, 'whole GPU')}")
    return part


def _recommend(caps: tuple[Capacity, ...], slo_ms: float | None) -> tuple[str | None, str]:
    for ok in ((SloStatus.MEETS, SloStatus.NO_SLO), (SloStatus.AT_RISK,)):
        pool = [c for c in caps if c.slo in ok and c.usd_per_day is not None]
        if pool:
            best = min(pool, key=lambda c: (c.usd_per_day or 0.0, c.step_ms))
            assert best.replicas is not None
            risk = " (its projected range reaches past the SLO)" if best.slo is \
                SloStatus.AT_RISK else ""
            return best.gpu, (f"{best.gpu}: the lowest autoscaled cost, ${best.usd_per_day:,.2f}"
                              f"/day for {best.replicas.gpu_hours_per_day:g} GPU-hours "
                              f"(peak {_n(best.replicas.peak, 'replica')}){risk}")
    if not caps:
        return None, "no candidate GPU with a projected step"
    fastest = min(caps, key=lambda c: c.step_ms)
    if slo_ms is not None and all(c.slo is SloStatus.MISSES for c in caps):
        return None, (f"no candidate meets the {slo_ms:g} ms SLO: the fastest, {fastest.gpu}, "
                      f"projects {fastest.step_ms:.3g} ms per step; relax the SLO or shrink "
                      "the batch (--samples-per-step)")
    return None, "no candidate has a price: costs cannot be compared"


def build(doc: Document, w: Workload, inputs: PlanInputs, catalog: Catalog) -> Plan:
    """The plan for ``doc``'s workload; raises :class:`PlanError` when it cannot be made."""
    if w.step_ms is None:
        raise PlanError("the analysis has no step time; a plan needs steps (record a few "
                        "ProfilerSteps, or a run with rightsize run)")
    if doc.sizing is None or not doc.sizing.candidates:
        raise PlanError("the analysis has no GPU sizing (candidates); analyze it with the "
                        "catalog, e.g. rightsize analyze TRACE --format json")
    caps: list[Capacity] = []
    excluded: list[str] = []
    for c in doc.sizing.candidates:
        if c.gpus != 1 or c.projected_step_ms is None:
            continue
        if c.fits_memory is False or not c.recommendable:
            excluded.append(f"{c.gpu}: " + ("peak memory does not fit" if c.fits_memory is False
                                            else "not recommendable (" + "; ".join(
                                                c.warnings or ("consumer or precision",)) + ")"))
            continue
        got = _capacity(c, w, inputs, catalog)
        (excluded.append(got) if isinstance(got, str) else caps.append(got))
    capacities = tuple(caps)
    parts = tuple(_partition(c, w, inputs, catalog) for c in capacities
                  if c.slo is not SloStatus.MISSES)
    best, reason = _recommend(capacities, inputs.slo_ms)
    cap = next((c for c in capacities if c.gpu == best), None)
    part = next((p for p in parts if p.gpu == best), None)
    on = part if cap and part and _serves_peak(cap, part, inputs) else None
    util = util_on(w, cap.step_ms) if cap else None
    hpa = max(1, math.floor(util * (1 - inputs.headroom))) if util is not None else None
    keda = round(cap.per_replica_per_s * (1 - inputs.headroom), 3) if cap else None
    notes = list(w.missing)
    if on is not None:
        reason += f"; one replica on {on.profile or 'a time share'} serves the peak: " + on.reason
        keda = round(cap.batch * 1000 / (on.step_ms or cap.step_ms)  # type: ignore[union-attr]
                     * (1 - inputs.headroom), 3)
        if on.kind == "mig":
            hpa = None
            notes.append("no HPA on GPU utilization: DCGM_FI_DEV_GPU_UTIL is not reported per "
                         "MIG instance; scale with the KEDA ScaledObject (request rate)")
    if util is None and cap is not None:
        notes.append("no HPA on GPU utilization: the capture has no GPU utilization; the KEDA "
                     "ScaledObject (request rate) is the autoscaler to use")
    return Plan(w, inputs, capacities, tuple(excluded), parts, best, reason, util, hpa, keda,
                tuple(notes), on)


def _serves_peak(cap: Capacity, part: Partition, inputs: PlanInputs) -> bool:
    """A slice or time share is what the manifests request only for a tiny job: one replica on
    it serves the peak demand (otherwise the replica counts, sized for whole GPUs, stand)."""
    if part.kind not in ("mig", "time-slicing") or part.step_ms is None:
        return False
    usable = cap.batch * 1000 / part.step_ms * (1 - inputs.headroom)
    return usable >= inputs.demand.peak_per_s


def _n(count: int, noun: str) -> str:
    """``1 replica``, ``3 replicas``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
