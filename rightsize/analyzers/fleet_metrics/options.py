"""The placements a workload could run on, and which one to recommend.

Inputs: what the window shows (:class:`~rightsize.analyzers.fleet_metrics.stats.Measured`), the
current GPU and MIG profile, the catalog, the thresholds. Every option is *r replicas, each on
a placement*: the whole current GPU, a MIG profile of it, a time-sliced share of it, or a
cheaper catalog GPU. Each replica needs the peak memory x (1 + headroom); the replicas together
must carry the summed activity p95 at the target busy share (1 - headroom) of their capacity:

* whole GPU: capacity 100 (percent of one GPU) per replica;
* MIG profile: its compute fraction of the SMs (SM_ACTIVE) and its memory fraction of the DRAM
  bandwidth (DRAM_ACTIVE, where recorded); the duty cycle, which only says that *a* kernel ran,
  is an upper bound of SM activity: a slice that fits it surely fits, one that does not may
  still fit (the decision then depends on it, and the answer is inconclusive);
* time share of k replicas per GPU: 100/k of the GPU's *time* per replica, measured by the duty
  cycle (the right metric here: time-sliced contexts take turns); k limited by memory;
* smaller GPU: the activity stretched by the slower of the datasheet ratios of dense fp16
  tensor throughput and memory bandwidth (a projection: low confidence).

r never exceeds the replicas now (more replicas is not right-sizing; a workload above its
target says so). The cheapest fitting option wins; options within ``tie_share`` of it are a tie,
broken by least disruption (keep, fewer replicas, MIG, time share, smaller GPU). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rightsize.analyzers.fleet_metrics.model import DISRUPTION, Option, Outcome
from rightsize.analyzers.fleet_metrics.stats import Measured
from rightsize.analyzers.fleet_metrics.thresholds import HOURS_PER_MONTH, Thresholds
from rightsize.catalog import NO_BF16_ARCHITECTURES, Catalog, Gpu
from rightsize.catalog.mig import MigProfile, profiles_for

GB = 1e9


@dataclass(frozen=True, slots=True)
class Needs:
    """A workload's needs per replica and together, in whole-GPU percent of the current GPU."""

    replicas_now: int
    need_bytes: float  # peak memory x (1 + headroom)
    activity_metric: str  # sm_active_pct or gpu_util_pct
    summed_activity: float  # p95 over time of the sum over replicas
    summed_util: float | None  # the duty cycle's, for time shares
    summed_dram: float | None  # DRAM_ACTIVE's, for MIG memory bandwidth
    weak: bool  # activity from the duty cycle only (no SM_ACTIVE)


def needs_of(x: Measured, th: Thresholds, scale: float) -> Needs:
    """``scale``: the current slice's compute fraction (activity on a MIG slice is relative to
    the slice; 1 on a whole GPU)."""
    am = x.activity_metric or "gpu_util_pct"
    dram = x.summed_p95.get("dram_active_pct")
    util = x.summed_p95.get("gpu_util_pct")
    return Needs(x.replicas_now, x.metrics["mem_used_bytes"].max * (1 + th.headroom), am,
                 x.summed_p95[am] * scale, util * scale if util is not None else None,
                 dram * scale if dram is not None else None, am == "gpu_util_pct")


def _replicas(load: float, capacity: float) -> int:
    return max(1, math.ceil(load / capacity - 1e-9)) if capacity > 0 else 10**9


def _cost(price: float | None, share: float, replicas: int) -> float | None:
    return None if price is None else price * share * replicas * HOURS_PER_MONTH


def whole(gpu: Gpu, price: float | None, n: Needs, th: Thresholds, kind: Outcome) -> Option:
    r = _replicas(n.summed_activity, th.target_pct)
    fits = r <= n.replicas_now and n.need_bytes <= gpu.memory_bytes
    label = f"{min(r, n.replicas_now)} x {gpu.name}"
    why = (f"summed activity p95 {n.summed_activity:.1f}% needs {r} GPU(s) at "
           f"{th.target_pct:.0f}% busy")
    return Option(kind, label, gpu.name, None, "nvidia.com/gpu", min(r, n.replicas_now), 1.0,
                  _cost(price, 1.0, min(r, n.replicas_now)), fits, why)


def mig(gpu: Gpu, p: MigProfile, price: float | None, n: Needs, th: Thresholds) -> Option:
    share = 1.0 / p.max_instances
    r = _replicas(n.summed_activity, 100 * p.compute_fraction * (1 - th.headroom))
    why = [f"{p.profile}: {p.memory_gb:g} GB for {n.need_bytes / GB:.2f} GB",
           f"{p.compute_slices}/7 of the SMs for summed p95 {n.summed_activity:.1f}%"]
    if n.summed_dram is not None:
        r = max(r, _replicas(n.summed_dram, 100 * p.memory_fraction * (1 - th.headroom)))
        why.append(f"{p.memory_slices}/8 of the DRAM bandwidth for DRAM p95 "
                   f"{n.summed_dram:.1f}%")
    fits_mem = n.need_bytes <= p.memory_bytes
    fits = fits_mem and r <= n.replicas_now
    if fits_mem and not fits:
        why.append(f"would need {r} replicas, {n.replicas_now} now")
    return Option(Outcome.MIG, f"{min(r, n.replicas_now)} x MIG {p.profile} on {gpu.name}",
                  gpu.name, p.profile, p.resource, min(r, n.replicas_now), share,
                  _cost(price, share, min(r, n.replicas_now)), fits, "; ".join(why),
                  refused_on=None if fits else "memory" if not fits_mem else "activity")


def time_share(gpu: Gpu, price: float | None, n: Needs, th: Thresholds) -> Option | None:
    if n.summed_util is None or n.need_bytes <= 0:
        return None
    k = math.floor(gpu.memory_bytes / n.need_bytes)
    if k < 2:
        return None
    r = _replicas(n.summed_util, th.target_pct / k)
    fits = r <= n.replicas_now
    return Option(Outcome.TIME_SHARE, f"{min(r, n.replicas_now)} x 1/{k} time share of "
                  f"{gpu.name}", gpu.name, None, "nvidia.com/gpu", min(r, n.replicas_now),
                  1.0 / k, _cost(price, 1.0 / k, min(r, n.replicas_now)), fits,
                  f"{k} replicas' peaks fit {gpu.memory_gib:g} GiB; duty cycle summed p95 "
                  f"{n.summed_util:.1f}% against {th.target_pct / k:.1f}% each; no memory or "
                  "fault isolation, the other slots go to other workloads")


def speed_ratio(now: Gpu, new: Gpu) -> float:
    """How much longer the same work keeps ``new`` busy: the slower of the dense fp16 tensor
    and memory bandwidth ratios (a datasheet projection)."""
    ratios = [now.memory_bandwidth_gbs / new.memory_bandwidth_gbs]
    if now.fp16_bf16_tflops_dense and new.fp16_bf16_tflops_dense:
        ratios.append(now.fp16_bf16_tflops_dense / new.fp16_bf16_tflops_dense)
    return max(ratios)


def smaller(now: Gpu, cat: Catalog, price_now: float | None, n: Needs, th: Thresholds,
            provider: str | None) -> list[Option]:
    out: list[Option] = []
    if price_now is None:
        return out
    for g in cat.gpus:
        p = cat.price(g.name, provider)
        if (g.name == now.name or p is None or g.consumer or g.vendor != now.vendor
                or g.architecture.startswith(NO_BF16_ARCHITECTURES)
                or p.usd_per_gpu_hour >= price_now or g.memory_bytes < n.need_bytes):
            continue
        rho = speed_ratio(now, g)
        r = _replicas(n.summed_activity * rho, th.target_pct)
        out.append(Option(Outcome.SMALLER_GPU, f"{min(r, n.replicas_now)} x {g.name}", g.name,
                          None, "nvidia.com/gpu", min(r, n.replicas_now), 1.0,
                          _cost(p.usd_per_gpu_hour, 1.0, min(r, n.replicas_now)),
                          r <= n.replicas_now,
                          f"{g.memory_bytes / GB:.2f} GB for {n.need_bytes / GB:.2f} GB; "
                          f"projected busy "
                          f"{n.summed_activity * rho:.1f}% summed (x{rho:.2f}: the slower of "
                          "its fp16 tensor and memory-bandwidth ratios, from datasheets)"))
    return out


def options(now: Gpu, profile_now: MigProfile | None, cat: Catalog, price: float | None,
            n: Needs, th: Thresholds, gpus_per_replica: int,
            provider: str | None) -> list[Option]:
    """Every option, the current placement first."""
    if profile_now is not None:
        share = 1.0 / profile_now.max_instances
        keep = Option(Outcome.KEEP, f"{n.replicas_now} x MIG {profile_now.profile} on "
                      f"{now.name}", now.name, profile_now.profile, profile_now.resource,
                      n.replicas_now, share, _cost(price, share, n.replicas_now), True,
                      "the current slice")
    else:
        per = f"{gpus_per_replica} x " if gpus_per_replica > 1 else ""
        keep = Option(Outcome.KEEP, f"{n.replicas_now} x {per}{now.name}", now.name, None,
                      "nvidia.com/gpu", n.replicas_now, 1.0,
                      _cost(price, float(gpus_per_replica), n.replicas_now), True,
                      "the current GPUs")
    out = [keep]
    if gpus_per_replica > 1:
        return out  # a pod of several GPUs: its parallelism is the job's, not a slice's
    w = whole(now, price, n, th, Outcome.FEWER_REPLICAS)
    if w.replicas < n.replicas_now or profile_now is not None:
        out.append(w)
    for p in profiles_for(now.name):
        if p.compute_slices < 7 and (profile_now is None or p.profile != profile_now.profile):
            out.append(mig(now, p, price, n, th))
    ts = time_share(now, price, n, th)
    if ts is not None:
        out.append(ts)
    out.extend(smaller(now, cat, price, n, th, provider))
    return out


def _rank(o: Option) -> tuple[float, int, float]:
    cost = o.cost_per_month_usd if o.cost_per_month_usd is not None else o.share_of_gpu * o.replicas
    return cost, DISRUPTION.index(o.kind), o.share_of_gpu


def choose(opts: list[Option], th: Thresholds) -> Option:
    """The cheapest fitting option, ties (within ``tie_share``) to the least disruptive; a
    smaller GPU only when it beats the best option on the current GPU by ``move_share``."""
    fitting = [o for o in opts if o.fits]
    here = [o for o in fitting if o.kind is not Outcome.SMALLER_GPU]
    if here:
        bar = min(_rank(o)[0] for o in here) * (1 - th.move_share)
        fitting = here + [o for o in fitting if o.kind is Outcome.SMALLER_GPU
                          and _rank(o)[0] <= bar + 1e-9]
    best = min(_rank(o)[0] for o in fitting)
    tied = [o for o in fitting if _rank(o)[0] <= best * (1 + th.tie_share) + 1e-9]
    return min(tied, key=lambda o: (DISRUPTION.index(o.kind), _rank(o)[0]))


def keep_reason(opts: list[Option], n: Needs) -> str:
    """Why nothing cheaper than the current placement fits, shortly."""
    parts = []
    mem = [o for o in opts if o.kind is Outcome.MIG and o.refused_on == "memory"]
    act = [o for o in opts if o.kind is Outcome.MIG and o.refused_on == "activity"]
    if act:
        parts.append(f"the slices that hold {n.need_bytes / GB:.2f} GB lack compute "
                     f"(smallest: {act[0].reason})")
    elif mem:
        parts.append(f"no MIG slice below the whole GPU holds {n.need_bytes / GB:.2f} GB "
                     f"(largest: {mem[-1].profile})")
    if not any(o.kind is Outcome.TIME_SHARE for o in opts):
        parts.append("two peaks do not fit one GPU's memory (no time share)")
    gpus = [o for o in opts if o.kind is Outcome.SMALLER_GPU]
    parts.append(f"no cheaper GPU carries it ({len(gpus)} checked)" if gpus
                 else "no cheaper catalog GPU holds the memory")
    return "nothing cheaper fits: " + "; ".join(parts)


def undecided(opts: list[Option], chosen: Option, n: Needs, th: Thresholds) -> Option | None:
    """With the duty cycle alone: the cheapest MIG slice that holds the memory, was refused on
    the duty cycle only and, with today's replicas, would save more than the tie share: the
    decision depends on SM activity, which was not recorded."""
    if not n.weak:
        return None
    base = _rank(chosen)[0]
    open_ = [o for o in opts if o.kind is Outcome.MIG and o.refused_on == "activity"
             and _rank(o)[0] < base * (1 - th.tie_share)]
    return min(open_, key=_rank) if open_ else None
