"""Partitions: the smallest MIG profile, or time-slicing, that a job fits on.

Inputs: the candidate GPU, its projected step, the job's utilization on it, its peak memory and
the MIG profiles (:mod:`rightsize.catalog.mig`). A slice gets ``f = min(compute fraction,
memory fraction)`` of the GPU, so the busy part of the step stretches by ``1/f`` and the rest
(host, data loader) does not: ``step_slice = step x ((1 - u) + u / f)``. A profile fits when the
peak memory with headroom fits its memory and the slice's step meets the SLO (without an SLO:
when ``u <= f``, the busy work fits in the slice's share). Without a fitting profile,
time-slicing shares one GPU between ``k`` replicas when ``k x u <= 1 - headroom`` and ``k``
peaks fit in its memory (no memory or fault isolation). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rightsize.catalog.mig import MigProfile


@dataclass(frozen=True, slots=True)
class Partition:
    gpu: str
    kind: str  # mig | time-slicing | whole-gpu | unknown
    profile: str | None
    resource: str  # the Kubernetes resource a replica requests
    per_gpu: int  # replicas one GPU holds
    step_ms: float | None  # projected step on the slice
    reason: str
    rejected: tuple[str, ...]  # each smaller profile and why it does not fit
    gpus_at_peak: int | None = None  # whole GPUs the peak demand needs on this partition


def slice_step_ms(step_ms: float, util_pct: float, fraction: float) -> float:
    u = util_pct / 100
    return step_ms * ((1 - u) + u / fraction)


def _try(p: MigProfile, step_ms: float, util_pct: float, need_bytes: float,
         slo_ms: float | None) -> tuple[float, str | None]:
    f = min(p.compute_fraction, p.memory_fraction)
    step = slice_step_ms(step_ms, util_pct, f)
    if need_bytes > p.memory_bytes:
        return step, f"{p.profile}: needs {need_bytes / 1e9:.2f} GB, has {p.memory_gb:g} GB"
    if slo_ms is not None and step > slo_ms:
        return step, f"{p.profile}: step {step:.3g} ms on {f:.0%} of the GPU > SLO {slo_ms:g} ms"
    if slo_ms is None and util_pct / 100 > f:
        return step, f"{p.profile}: busy {util_pct:.0f}% of the step > its {f:.0%} share"
    return step, None


def fit(gpu: str, memory_bytes: int, profiles: tuple[MigProfile, ...], step_ms: float,
        util_pct: float | None, peak_bytes: int | None, headroom: float,
        slo_ms: float | None, gpu_resource: str = "nvidia.com/gpu") -> Partition:
    """The smallest partition of ``gpu`` that fits; ``whole-gpu`` with the reasons if none.
    ``gpu_resource`` is the device plugin's whole-GPU resource (``amd.com/gpu`` for AMD)."""
    if util_pct is None or peak_bytes is None:
        what = " and ".join(w for w, v in (("utilization", util_pct), ("peak memory", peak_bytes))
                            if v is None)
        return Partition(gpu, "unknown", None, gpu_resource, 1, None,
                         f"unknown {what}: cannot tell whether a slice fits", ())
    need = peak_bytes * (1 + headroom)
    rejected: list[str] = []
    for p in profiles:
        if p.compute_slices == 7:
            break  # the whole GPU is not a partition
        step, why = _try(p, step_ms, util_pct, need, slo_ms)
        if why is None:
            return Partition(gpu, "mig", p.profile, p.resource, p.max_instances, round(step, 4),
                             f"{p.profile}: {need / 1e9:.2f} GB with headroom fits "
                             f"{p.memory_gb:g} GB; step {step:.3g} ms on "
                             f"{min(p.compute_fraction, p.memory_fraction):.0%} of the GPU",
                             tuple(rejected))
        rejected.append(why)
    if not profiles:
        rejected.append(f"{gpu} has no MIG profiles")
    u = max(util_pct / 100, 1e-9)
    k = min(math.floor((1 - headroom) / u), math.floor(memory_bytes / need)) if need > 0 else 1
    if k >= 2:
        return Partition(gpu, "time-slicing", None, gpu_resource, k, round(step_ms, 4),
                         f"time-slicing: {k} replicas share one GPU (busy {util_pct:.0f}% "
                         f"each, {need / 1e9:.2f} GB each with headroom); no memory or fault "
                         "isolation between them", tuple(rejected))
    return Partition(gpu, "whole-gpu", None, gpu_resource, 1, round(step_ms, 4),
                     f"a whole GPU: busy {util_pct:.0f}% of the step, {need / 1e9:.2f} GB with "
                     "headroom; no slice or time share fits", tuple(rejected))
