"""Right-sizing projection: how fast and how costly this job would be on each catalog GPU.

Inputs: a :class:`Workload` (measured step time split into the diagnosis' exclusive shares,
precision, peak memory, the device it ran on; or, for a CPU-only run, op-level FLOPs and bytes),
a :class:`~rightsize.catalog.Catalog` and :class:`Constraints`. Output: a frozen
:class:`Sizing` with one :class:`Candidate` per GPU, the recommendation, the verdict
(over-provisioned / right-sized / under-provisioned), savings and the reason in words.

Each share is scaled by the resource that bounds it (compute by dense peak FLOPS at the
precision used, memory by bandwidth, PCIe by the host link); data-loader, host and idle time do
not shrink on a faster GPU; communication is kept as measured. See docs/sizing.md. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from rightsize.analyzers.sizing.estimator import ASSUMPTIONS as MEMORY_ASSUMPTIONS
from rightsize.analyzers.sizing.placement import (
    GPU_COUNTS,
    GPUS_PER_NODE,
    nvlink_group,
    parallelism_for,
)
from rightsize.catalog import Catalog, Gpu
from rightsize.errors import RightsizeError
from rightsize.vocab import Precision, Share


class SizingError(RightsizeError):
    """The workload or constraints cannot be sized as given."""


class Verdict(StrEnum):
    OVER_PROVISIONED = "over-provisioned"
    RIGHT_SIZED = "right-sized"
    UNDER_PROVISIONED = "under-provisioned"




@dataclass(frozen=True, slots=True)
class Thresholds:
    """Named judgement calls of the advisor, one reason each."""

    # A cheaper GPU must save at least this much per unit of work to call the current one
    # over-provisioned: prices move by more than 10% between providers and months.
    over_provisioned_savings_pct: float = 20.0
    # Peak allocated memory at or above this fraction of the device means the batch or model
    # is being squeezed (smaller batches, offload): under-provisioned.
    memory_pressure_fraction: float = 0.95
    # Data-loader + host + idle at or above half the step: the GPU is not what limits the job.
    stall_fraction: float = 0.5
    # CPU-only runs moved to a GPU: dense transformer training reaches 40-50% of peak tensor
    # FLOPS (PaLM: 46.2% MFU, Chowdhery et al. 2022); we take 40%.
    achieved_flops_fraction: float = 0.40
    # Streaming kernels reach 80-90% of HBM peak bandwidth (STREAM-style measurements).
    achieved_bandwidth_fraction: float = 0.80


THRESHOLDS = Thresholds()
_FIXED = (Share.DATALOADER, Share.HOST, Share.IDLE, Share.COMMUNICATION)


@dataclass(frozen=True, slots=True)
class Workload:
    """What one step of the job costs where it ran. ``shares_ms`` keys are :class:`Share`
    values and sum to ``step_ms``; a CPU-only run gives ``current_device_name=None`` and
    ``flops_per_step``/``bytes_per_step`` for the work its ops do."""

    step_ms: float
    shares_ms: Mapping[str, float]
    precision: str  # Precision value of the dominant compute
    peak_memory_bytes: int | None
    current_device_name: str | None
    current_sm_count: int | None = None
    current_memory_bytes: int | None = None
    samples_per_step: int | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    training: bool = True  # words for multi-GPU proposals (FSDP vs tensor parallel)
    gpus: int = 1  # devices the measured run used (cost counts all of them)
    bound: str | None = None  # the diagnosis verdict (Bound value), when there is one


@dataclass(frozen=True, slots=True)
class Constraints:
    target_step_ms: float | None = None
    target_throughput: float | None = None  # samples per second; needs samples_per_step
    max_usd_per_hour: float | None = None  # for all GPUs of a candidate together
    headroom_fraction: float = 0.10  # free memory kept above the peak
    provider: str | None = None  # price only from this provider


@dataclass(frozen=True, slots=True)
class Candidate:
    gpu: str
    gpus: int
    fits_memory: bool | None  # None: peak memory unknown
    projected_step_ms: float | None
    usd_per_hour: float | None  # all ``gpus`` together
    usd_per_1k_steps: float | None
    energy_j_per_step: float | None  # TDP x time: an upper bound
    price_provider: str | None
    price_instance: str | None
    price_date_seen: str | None
    meets_constraints: bool
    precision_used: str
    parallelism: str
    interconnect: str

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu, "gpus": self.gpus, "fits_memory": self.fits_memory,
            "projected_step_ms": _round(self.projected_step_ms),
            "usd_per_hour": _round(self.usd_per_hour),
            "usd_per_1k_steps": _round(self.usd_per_1k_steps),
            "energy_j_per_step": _round(self.energy_j_per_step),
            "price_provider": self.price_provider, "price_instance": self.price_instance,
            "price_date_seen": self.price_date_seen,
            "meets_constraints": self.meets_constraints, "precision_used": self.precision_used,
            "parallelism": self.parallelism, "interconnect": self.interconnect,
        }


@dataclass(frozen=True, slots=True)
class Sizing:
    current: str | None  # catalog name of the measured device; None: CPU-only or unknown
    current_note: str  # how the device was matched, or why not
    recommended: str | None
    recommended_gpus: int
    verdict: Verdict | None  # None when there is no current GPU to judge
    savings_pct: float | None  # cost per 1k steps, current vs recommended
    candidates: tuple[Candidate, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "current": self.current, "recommended": self.recommended,
            "recommended_gpus": self.recommended_gpus,
            "verdict": None if self.verdict is None else str(self.verdict),
            "savings_pct": _round(self.savings_pct, 1),
            "candidates": [c.to_json() for c in self.candidates],
            "reason": self.reason, "current_note": self.current_note,
        }


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def _ratio(cur: float | None, new: float | None) -> float:
    return cur / new if cur and new else 1.0


def project_step_ms(workload: Workload, current: Gpu | None, gpu: Gpu, gpus: int = 1) -> float | None:
    """Projected step time on ``gpus`` x ``gpu``; bound shares shrink ideally with ``gpus``."""
    shares = {Share(k): v for k, v in workload.shares_ms.items()}
    fixed = sum(shares.get(s, 0.0) for s in _FIXED)
    if current is None:  # CPU-only: roofline of the op-level work at achieved rates
        if workload.flops_per_step is None and workload.bytes_per_step is None:
            return None
        peak, _ = gpu.tflops(workload.precision)
        t_flops = (workload.flops_per_step or 0) / (
            (peak or 0) * 1e12 * THRESHOLDS.achieved_flops_fraction or math.inf)
        t_bytes = (workload.bytes_per_step or 0) / (
            gpu.memory_bandwidth_gbs * 1e9 * THRESHOLDS.achieved_bandwidth_fraction)
        return fixed + max(t_flops, t_bytes) * 1e3 / gpus
    bound = (shares.get(Share.COMPUTE, 0.0)
             * _ratio(current.tflops(workload.precision)[0], gpu.tflops(workload.precision)[0])
             + shares.get(Share.MEMORY, 0.0)
             * _ratio(current.memory_bandwidth_gbs, gpu.memory_bandwidth_gbs)
             + shares.get(Share.PCIE, 0.0)
             * _ratio(current.host_link_gbs_per_direction, gpu.host_link_gbs_per_direction))
    return fixed + bound * workload.gpus / gpus


def _needed_bytes(workload: Workload, constraints: Constraints) -> float | None:
    if workload.peak_memory_bytes is None:
        return None
    need = float(workload.peak_memory_bytes)
    if workload.current_device_name is None:  # host RAM peak: add what CUDA itself takes
        need += MEMORY_ASSUMPTIONS.cuda_context_bytes
    return need * (1 + constraints.headroom_fraction)


def _candidate(workload: Workload, constraints: Constraints, catalog: Catalog,
               current: Gpu | None, gpu: Gpu, gpus: int) -> Candidate:
    need = _needed_bytes(workload, constraints)
    fits = None if need is None else need / gpus <= gpu.memory_bytes  # peak splits N ways
    step = project_step_ms(workload, current, gpu, gpus)
    price = catalog.price(gpu.name, constraints.provider)
    usd_h = price.usd_per_gpu_hour * gpus if price else None
    usd_1k = usd_h * step * 1000 / 3.6e6 if usd_h is not None and step is not None else None
    energy = gpu.tdp_w * gpus * step / 1000 if gpu.tdp_w and step is not None else None
    meets = step is not None
    if step is not None and constraints.target_step_ms is not None:
        meets = step <= constraints.target_step_ms
    if (meets and step is not None and constraints.target_throughput is not None
            and workload.samples_per_step):
        meets = workload.samples_per_step / (step / 1000) >= constraints.target_throughput
    if constraints.max_usd_per_hour is not None:
        meets = meets and usd_h is not None and usd_h <= constraints.max_usd_per_hour
    words, wire = parallelism_for(workload.training, gpus, gpu)
    return Candidate(gpu.name, gpus, fits, step, usd_h, usd_1k, energy,
                     price.provider if price else None, price.instance_type if price else None,
                     price.date_seen if price else None, meets,
                     str(gpu.tflops(workload.precision)[1]), words, wire)


def _pick(cands: list[Candidate]) -> Candidate | None:
    ok = [c for c in cands if c.fits_memory is not False and c.usd_per_1k_steps is not None
          and c.meets_constraints]
    if ok:
        return min(ok, key=lambda c: (c.usd_per_1k_steps, c.projected_step_ms))
    return None


def _validate(workload: Workload, constraints: Constraints) -> None:
    try:
        Precision(workload.precision)
    except ValueError:
        raise SizingError(f"unknown precision {workload.precision!r}") from None
    bad = set(workload.shares_ms) - {str(s) for s in Share}
    if bad:
        raise SizingError(f"unknown step shares {sorted(bad)}")
    if constraints.target_throughput is not None and not workload.samples_per_step:
        raise SizingError("--target-throughput needs the samples per step of the run")
    if workload.step_ms <= 0:
        raise SizingError("step time must be positive")


def project(workload: Workload, catalog: Catalog, constraints: Constraints = Constraints(),
            gpus: tuple[str, ...] = ()) -> Sizing:
    """Size ``workload`` on every catalog GPU (or only those named in ``gpus``)."""
    _validate(workload, constraints)
    current: Gpu | None = None
    note = "CPU-only run: sized from op-level FLOPs and bytes"
    if workload.current_device_name is not None:
        match = catalog.match(workload.current_device_name, workload.current_memory_bytes,
                              workload.current_sm_count)
        current, note = match.gpu, match.note
    pool = [g for g in catalog.gpus if not gpus or g.name in gpus]
    if current is not None and current not in pool:
        pool.append(current)
    if workload.current_device_name is not None and current is None:
        # Shares cannot be scaled without the current GPU's specs: report, do not guess.
        listed = tuple(_candidate(workload, constraints, catalog, None, g, 1)
                       for g in pool) if workload.flops_per_step else ()
        return Sizing(None, note, None, 1, None, None, listed,
                      f"{note}; without its specs the measured step cannot be projected.")
    singles = [_candidate(workload, constraints, catalog, current, g, 1) for g in pool]
    best = _pick(singles)
    cands = list(singles)
    if not any(c.fits_memory is not False for c in singles):
        cands += _multi_gpu(workload, constraints, catalog, current, pool)
        best = _pick(cands[len(singles):])
    elif best is None:  # nothing meets the targets: the fastest that fits
        fitting = [c for c in singles if c.fits_memory is not False
                   and c.projected_step_ms is not None]
        best = min(fitting, key=lambda c: cast(float, c.projected_step_ms)) if fitting else None
    cur_cand = next((c for c in singles if current and c.gpu == current.name), None)
    return _judge(workload, constraints, current, note, cur_cand, best, tuple(cands))


def _multi_gpu(workload: Workload, constraints: Constraints, catalog: Catalog,
               current: Gpu | None, pool: list[Gpu]) -> list[Candidate]:
    need = _needed_bytes(workload, constraints) or 0.0
    out = []
    for g in pool:
        n = next((n for n in GPU_COUNTS if need / n <= g.memory_bytes), None)
        if n is not None and n > 1:
            out.append(_candidate(workload, constraints, catalog, current, g, n))
    # Sharding over PCIe-only cards is proposed only when no NVLink part can do it.
    linked = [c for c in out if c.gpus <= nvlink_group(catalog.gpu(c.gpu))
              or nvlink_group(catalog.gpu(c.gpu)) == GPUS_PER_NODE]
    return linked or out


def _judge(workload: Workload, constraints: Constraints, current: Gpu | None, note: str,
           cur: Candidate | None, best: Candidate | None,
           cands: tuple[Candidate, ...]) -> Sizing:
    shares = workload.shares_ms
    stall = sum(shares.get(str(s), 0.0) for s in (Share.DATALOADER, Share.HOST, Share.IDLE))
    stall_frac = stall / workload.step_ms
    words = []
    if stall_frac >= THRESHOLDS.stall_fraction or workload.bound in ("dataloader", "host"):
        words.append(_stall_words(shares, workload.step_ms))
    if best is None:
        words.append("no catalog GPU fits the peak memory with the requested headroom, even"
                     f" as {GPU_COUNTS[-1]} GPUs" if not any(c.fits_memory is not False
                                                             for c in cands)
                     else "no priced GPU meets the constraints; relax them or add a price"
                     " with --catalog")
        return Sizing(current.name if current else None, note, None, 1, None, None, cands,
                      "; ".join(words) + ".")
    if best.gpus > 1:
        words.append(f"nothing fits on one GPU: run on {best.gpus} x {best.gpu} with"
                     f" {best.parallelism}; needs {best.interconnect}")
    savings = None
    if cur and cur.usd_per_1k_steps and best.usd_per_1k_steps is not None:
        savings = (cur.usd_per_1k_steps - best.usd_per_1k_steps) / cur.usd_per_1k_steps * 100
    verdict: Verdict | None = None
    if workload.bound == "inconclusive":  # no provisioning verdict without a diagnosis
        savings = None
        words.append("no over-/under-provisioning verdict: the bottleneck diagnosis is"
                     f" inconclusive (see its evidence); cheapest per step: {best.gpu} at"
                     f" {best.projected_step_ms:.1f} ms")
    elif current is not None and cur is not None:
        pressure = (workload.peak_memory_bytes or 0) / current.memory_bytes
        if pressure >= THRESHOLDS.memory_pressure_fraction:
            verdict = Verdict.UNDER_PROVISIONED
            words.append(f"peak memory is {pressure:.0%} of the {current.name}: batch size"
                         " or model is squeezed; a GPU with more memory gives room")
        elif cur.fits_memory is False:
            verdict = Verdict.UNDER_PROVISIONED
            words.append(f"the peak leaves less than {constraints.headroom_fraction:.0%} of the"
                         f" {current.name} free; {best.gpus} x {best.gpu} gives that headroom")
        elif not cur.meets_constraints and best.meets_constraints and best.gpu != cur.gpu:
            verdict = Verdict.UNDER_PROVISIONED
            words.append(f"the {current.name} misses the target ({cur.projected_step_ms:.1f} ms"
                         f" per step); {best.gpu} meets it at {best.projected_step_ms:.1f} ms")
        elif (best.gpu != cur.gpu and savings is not None
              and savings >= THRESHOLDS.over_provisioned_savings_pct):
            verdict = Verdict.OVER_PROVISIONED
            words.append(f"{best.gpu} does the same work for {savings:.0f}% less per step"
                         f" ({best.projected_step_ms:.1f} ms vs {cur.projected_step_ms:.1f} ms,"
                         f" prices seen {best.price_date_seen})")
        elif best.gpu != cur.gpu and savings is None:
            words.append(f"the catalog has no price for the {current.name}, so it cannot be"
                         f" judged; the cheapest per step is {best.gpu} at"
                         f" {best.projected_step_ms:.1f} ms")
        else:
            verdict = Verdict.RIGHT_SIZED
            words.append(f"the {current.name} is the cheapest per step among GPUs that fit"
                         " and meet the constraints" if best.gpu == cur.gpu else
                         f"{best.gpu} would save only {savings or 0:.0f}% per step, below the"
                         f" {THRESHOLDS.over_provisioned_savings_pct:.0f}% worth a move")
            best, savings = cur, 0.0
    else:
        words.append(f"cheapest per step: {best.gpu} at {best.projected_step_ms:.1f} ms")
    if (constraints.target_step_ms is None and constraints.target_throughput is None
            and verdict is Verdict.OVER_PROVISIONED):
        words.append("no step-time target was given; pass --target-step-ms to bound latency")
    return Sizing(current.name if current else None, note, best.gpu, best.gpus, verdict,
                  savings, cands, "; ".join(words) + ".")


def _stall_words(shares: Mapping[str, float], step_ms: float) -> str:
    loader = shares.get(str(Share.DATALOADER), 0.0)
    host = shares.get(str(Share.HOST), 0.0) + shares.get(str(Share.IDLE), 0.0)
    if loader >= host:
        return (f"{loader / step_ms:.0%} of each step waits for the data loader, which a bigger"
                " GPU will not shrink: raise DataLoader num_workers, set pin_memory=True and"
                " persistent_workers=True, pre-process or cache the dataset")
    return (f"{host / step_ms:.0%} of each step is host/launch overhead (the GPU waits for the"
            " CPU), which a bigger GPU will not shrink: use larger batches, CUDA graphs or"
            " torch.compile(mode='reduce-overhead'), and avoid .item()/synchronize in the loop")
