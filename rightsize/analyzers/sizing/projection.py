"""Right-sizing projection: how fast and how costly this job would be on each catalog GPU.

Inputs: a :class:`Workload` (measured step time split into the diagnosis' exclusive shares,
precision, peak memory, the device it ran on; or, for a CPU-only run, op-level FLOPs and bytes),
a :class:`~rightsize.catalog.Catalog` and :class:`Constraints`. Output: a frozen
:class:`Sizing` with one :class:`Candidate` per GPU, the recommendation, the verdict
(over-provisioned / right-sized / under-provisioned), savings and the reason in words.

The GPU part of the step is projected kernel by kernel from achievable rates fitted on
measured cross-GPU timings (``rates``, ``kernels_projection``), or, without kernels, share by
share at the same rates (compute by the large-GEMM rate at the precision used, memory by
achievable bandwidth, PCIe by the host link); data-loader, host and idle time do not shrink on
a faster GPU; a distributed job's communication is projected onto each candidate's GPU and
fabric (at the measured rank count, or at ``Constraints.layout_gpus``/``layout_gpus_per_node``)
by NCCL's cost model (``comm``), per collective type and message size of the rank's calls,
waiting for late ranks held; it is kept as measured where the candidate keeps the measured GPU
and layout, and a candidate whose calls the model cannot project (no sizes recorded) is not
like-for-like and is not recommended. Every projection carries a range from the validation
error. See docs/sizing.md. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

from rightsize.analyzers.sizing import objective, reasons
from rightsize.analyzers.sizing.comm import CommProjection, Layout
from rightsize.analyzers.sizing.comm_sizing import (
    NOT_LIKE,
    comm_caveats,
    job_comm,
    validate_layout,
)
from rightsize.analyzers.sizing.kernels_projection import project_kernels_ms
from rightsize.analyzers.sizing.model import (
    FIXED_SHARES,
    NATIVE_PRECISIONS,
    UNNAMED_GPU,
    Candidate,
    Constraints,
    Objective,
    Sizing,
    SizingError,
    Verdict,
    Workload,
)
from rightsize.analyzers.sizing.placement import (
    GPU_COUNTS,
    GPUS_PER_NODE,
    nvlink_group,
    parallelism_for,
)
from rightsize.analyzers.sizing.ranges import ranges
from rightsize.analyzers.sizing.rates import (
    TYPICAL_GEMM_FLOPS,
    RatesTable,
    load_rates,
    peak_flops,
)
from rightsize.analyzers.sizing.run_setup import ASSUMPTIONS as MEMORY_ASSUMPTIONS
from rightsize.analyzers.thresholds import SIZING as THRESHOLDS
from rightsize.analyzers.thresholds import SizingThresholds
from rightsize.catalog import Catalog, Gpu
from rightsize.vocab import Bound, Precision, Share

# The data model lives in ``model``; these names stay importable from here.
__all__ = [
    "THRESHOLDS",
    "UNNAMED_GPU",
    "Candidate",
    "Constraints",
    "Objective",
    "Sizing",
    "SizingError",
    "SizingThresholds",
    "Verdict",
    "Workload",
    "project",
    "project_step_ms",
]
_DEFAULT = Constraints()


def _ratio(cur: float | None, new: float | None) -> float:
    return cur / new if cur and new else 1.0


def project_step_ms(workload: Workload, current: Gpu | None, gpu: Gpu, gpus: int = 1,
                    rates: RatesTable | None = None) -> float | None:
    """Projected step time on ``gpus`` x ``gpu``; bound shares shrink ideally with ``gpus``."""
    fixed, bound = _split_ms(workload, current, gpu, rates or load_rates())
    if bound is None:
        return None
    return fixed + bound * workload.gpus / gpus


def _split_ms(workload: Workload, current: Gpu | None, gpu: Gpu,
              table: RatesTable) -> tuple[float, float | None]:
    """(time that stays as measured, projected GPU-bound time on one ``gpu``) per step."""
    shares = {Share(k): v for k, v in workload.shares_ms.items()}
    fixed = sum(shares.get(s, 0.0) for s in FIXED_SHARES)
    if current is None:  # CPU-only: roofline of the op-level work at achieved rates
        if workload.flops_per_step is None and workload.bytes_per_step is None:
            return fixed, None
        peak, _ = gpu.tflops(workload.precision)
        t_flops = (workload.flops_per_step or 0) / (
            (peak or 0) * 1e12 * THRESHOLDS.achieved_flops_fraction or math.inf)
        t_bytes = (workload.bytes_per_step or 0) / (
            gpu.memory_bandwidth_gbs * 1e9 * THRESHOLDS.achieved_bandwidth_fraction)
        return fixed, max(t_flops, t_bytes) * 1e3
    src, dst = (current, table.for_gpu(current)), (gpu, table.for_gpu(gpu))
    gpu_ms = shares.get(Share.COMPUTE, 0.0) + shares.get(Share.MEMORY, 0.0)
    measured, projected = project_kernels_ms(workload.kernels, src, dst)
    if measured > 0:  # per kernel: the busy time scales as the step's kernels do
        gpu_ms *= projected / measured
    else:  # no kernels: each share at its achievable rate
        p = workload.precision
        rate_s = peak_flops(current, p) * src[1].gemm_fraction(
            str(current.tflops(p)[1]), TYPICAL_GEMM_FLOPS)
        rate_d = peak_flops(gpu, p) * dst[1].gemm_fraction(str(gpu.tflops(p)[1]),
                                                           TYPICAL_GEMM_FLOPS)
        gpu_ms = (shares.get(Share.COMPUTE, 0.0) * rate_s / rate_d
                  + shares.get(Share.MEMORY, 0.0)
                  * _ratio(current.memory_bandwidth_gbs * src[1].stream_fraction,
                           gpu.memory_bandwidth_gbs * dst[1].stream_fraction))
    pcie = shares.get(Share.PCIE, 0.0) * pcie_ratio(workload.host_copy_gbs,
                                                    current.host_link_gbs_per_direction,
                                                    gpu.host_link_gbs_per_direction)
    return fixed, gpu_ms + pcie




def pcie_ratio(measured_gbs: float | None, cur_link: float | None,
               new_link: float | None) -> float:
    """New / current time of the host<->device copies. Link-bound copies (at least
    ``link_bound_fraction`` of the current link) scale with the link; host-bound ones (pageable
    staging) keep their rate on any link that carries it, and slow down only where the new
    link's achievable rate is lower still."""
    if not (measured_gbs and cur_link and new_link):
        return _ratio(cur_link, new_link)
    if measured_gbs >= THRESHOLDS.link_bound_fraction * cur_link:  # link-bound
        return cur_link / new_link
    return measured_gbs / min(measured_gbs, new_link * THRESHOLDS.link_achievable_fraction)


def _host_ms(workload: Workload) -> float:
    """Time per step the CPU sets: host, idle and data-loader shares."""
    return sum(workload.shares_ms.get(str(s), 0.0)
               for s in (Share.HOST, Share.IDLE, Share.DATALOADER))


def _needed_bytes(workload: Workload, constraints: Constraints) -> float | None:
    if workload.peak_memory_bytes is None:
        return None
    need = float(workload.peak_memory_bytes)
    if workload.current_device_name is None:  # host RAM peak: add what CUDA itself takes
        need += MEMORY_ASSUMPTIONS.cuda_context_bytes
    return need * (1 + constraints.headroom_fraction)


def _candidate(workload: Workload, constraints: Constraints, catalog: Catalog,
               current: Gpu | None, gpu: Gpu, gpus: int, table: RatesTable,
               named: bool = False) -> Candidate:
    need = _needed_bytes(workload, constraints)
    fits = None if need is None else need / gpus <= gpu.memory_bytes  # peak splits N ways
    fixed, bound = _split_ms(workload, current, gpu, table)
    price = catalog.price(gpu.name, constraints.provider)
    comm, layout = job_comm(workload, constraints, current, gpu, gpus, price)
    comm_ms = workload.shares_ms.get(str(Share.COMMUNICATION), 0.0)
    comm_low = comm_high = 0.0
    if comm is not None and comm.measured_exposed_ms:  # the share scaled as the calls project
        new_ms = comm_ms * comm.exposed_ms / comm.measured_exposed_ms
        comm_low = new_ms - comm_ms * comm.exposed_low_ms / comm.measured_exposed_ms
        comm_high = comm_ms * comm.exposed_high_ms / comm.measured_exposed_ms - new_ms
        fixed += new_ms - comm_ms
        comm_ms = new_ms
    step = None if bound is None else fixed + bound * workload.gpus / gpus
    r = ranges(step, None if bound is None else bound * workload.gpus / gpus, comm_ms,
               comm_low, comm_high, _host_ms(workload), table.error_for(current or gpu, gpu),
               THRESHOLDS.host_move_fraction, gpu is not current, comm is not None)
    # the whole job pays: every rank runs on ``gpus`` of them (one trace is one rank of N)
    ranks = workload.ranks if workload.gpus == 1 else 1
    if layout is not None:
        ranks = layout.ranks
    usd_h = price.usd_per_gpu_hour * gpus * ranks if price else None
    usd_1k = usd_h * step * 1000 / 3.6e6 if usd_h is not None and step is not None else None
    energy = gpu.tdp_w * gpus * ranks * step / 1000 if gpu.tdp_w and step is not None else None
    meets = step is not None
    if step is not None and constraints.target_step_ms is not None:
        meets = step <= constraints.target_step_ms
    if (meets and step is not None and constraints.target_throughput is not None
            and workload.samples_per_step):
        meets = workload.samples_per_step / (step / 1000) >= constraints.target_throughput
    if constraints.max_usd_per_hour is not None:
        meets = meets and usd_h is not None and usd_h <= constraints.max_usd_per_hour
    words, wire = parallelism_for(workload.training, gpus, gpu)
    used = gpu.tflops(workload.precision)[1]
    warnings, ok = _caveats(workload, constraints, current, gpu, gpus, used, named, comm,
                            layout)
    return Candidate(gpu.name, gpus, fits, step, usd_h, usd_1k, energy,
                     price.provider if price else None, price.instance_type if price else None,
                     price.date_seen if price else None, meets, str(used), words, wire,
                     r.step_low_ms, r.step_high_ms, gpu.consumer,
                     not any(w.startswith(NOT_LIKE) for w in warnings),
                     ok, tuple(warnings),
                     # the host's own spread moves every machine alike, the current one too:
                     # the objective judges what the GPU changes
                     objective.meets(step, r.objective_high_ms, workload, constraints,
                                     gpu is current and gpus == 1 and comm is None),
                     ranks=ranks if ranks > 1 else None,
                     projected_gpu_ms=r.gpu_ms, projected_gpu_ms_low=r.gpu_low_ms,
                     projected_gpu_ms_high=r.gpu_high_ms,
                     communication_ms=comm_ms if layout is not None else None,
                     fabric=layout.words if layout is not None else None)


def _caveats(workload: Workload, constraints: Constraints, current: Gpu | None, gpu: Gpu,
             gpus: int, used: Precision, named: bool, comm: CommProjection | None = None,
             layout: Layout | None = None) -> tuple[list[str], bool]:
    """Warnings for one candidate, and whether it may be recommended."""
    warnings, ok = [], True
    want = Precision(workload.precision)
    if want in NATIVE_PRECISIONS and used != want:
        warnings.append(f"the {gpu.name} has no {want} math: projected at {used}, which"
                        " changes numerics and speed")
        ok = False
    if gpu.consumer and not constraints.include_consumer:
        warnings.append("consumer GPU: pass --include-consumer to recommend it")
        ok = named and ok
    more, comm_ok = comm_caveats(workload, constraints, current, gpu, gpus, comm, layout)
    return warnings + more, ok and comm_ok


def _pick(cands: list[Candidate], allowed: Callable[[Candidate], bool]) -> Candidate | None:
    ok = [c for c in cands if c.fits_memory is not False and c.usd_per_1k_steps is not None
          and c.meets_constraints and c.meets_objective and c.recommendable and allowed(c)]
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
    validate_layout(constraints.layout_gpus, constraints.layout_gpus_per_node, workload.ranks)


def project(workload: Workload, catalog: Catalog, constraints: Constraints = _DEFAULT,
            gpus: tuple[str, ...] = (), rates: RatesTable | None = None) -> Sizing:
    """Size ``workload`` on every catalog GPU (or only those named in ``gpus``).

    ``rates``: achievable rates (default: the shipped, fitted table).
    """
    _validate(workload, constraints)
    table = rates or load_rates()
    current: Gpu | None = None
    note = "CPU-only run: sized from op-level FLOPs and bytes"
    if workload.current_device_name == UNNAMED_GPU:
        note = ("the trace names no GPU model (no deviceProperties: a sampled or filtered "
                "trace), so it cannot be matched to the catalog")
    elif workload.current_device_name is not None:
        match = catalog.match(workload.current_device_name, workload.current_memory_bytes,
                              workload.current_sm_count)
        current, note = match.gpu, match.note
    pool = [g for g in catalog.gpus if not gpus or g.name in gpus]
    if current is not None and current not in pool:
        pool.append(current)
    if workload.current_device_name is not None and current is None:
        # Shares cannot be scaled without the current GPU's specs: report, do not guess.
        listed = tuple(_candidate(workload, constraints, catalog, None, g, 1, table,
                                  g.name in gpus)
                       for g in pool) if workload.flops_per_step else ()
        return Sizing(current=None, current_note=note, recommended=None, recommended_gpus=1,
                      verdict=None, savings_pct=None, candidates=listed,
                      reason=f"{note}; without its specs the measured step cannot be projected.")
    singles = [_candidate(workload, constraints, catalog, current, g, 1, table, g.name in gpus)
               for g in pool]
    memory = {g.name: g.memory_bytes for g in pool}

    def allowed(c: Candidate) -> bool:
        return objective.allowed(c, current, memory, workload.peak_memory_bytes is not None)

    best = _pick(singles, allowed)
    cands = list(singles)
    if not any(c.fits_memory is not False for c in singles):
        cands += _multi_gpu(workload, constraints, catalog, current, pool, table, gpus)
        best = _pick(cands[len(singles):], allowed)
    elif best is None:  # nothing meets the step/throughput targets: the fastest that fits,
        # as far as the memory evidence and the price cap allow (a cap is never crossed)
        cap = constraints.max_usd_per_hour
        fitting = [c for c in singles if c.fits_memory is not False and c.recommendable
                   and c.projected_step_ms is not None and allowed(c)
                   and (cap is None or (c.usd_per_hour is not None and c.usd_per_hour <= cap))]
        best = min(fitting, key=lambda c: cast(float, c.projected_step_ms)) if fitting else None
    cur_cand = next((c for c in singles if current and c.gpu == current.name), None)
    # with the peak unknown, the pick the memory rule passed over (named in the reason)
    unseen = _pick(singles, lambda c: not allowed(c)) \
        if workload.peak_memory_bytes is None else None
    return _judge(workload, constraints, current, note, cur_cand, best, tuple(cands), unseen)


def _multi_gpu(workload: Workload, constraints: Constraints, catalog: Catalog,
               current: Gpu | None, pool: list[Gpu], table: RatesTable,
               named: tuple[str, ...]) -> list[Candidate]:
    need = _needed_bytes(workload, constraints) or 0.0
    out = []
    for g in pool:
        n = next((n for n in GPU_COUNTS if need / n <= g.memory_bytes), None)
        if n is not None and n > 1:
            out.append(_candidate(workload, constraints, catalog, current, g, n, table,
                                  g.name in named))
    # Sharding over PCIe-only cards is proposed only when no NVLink part can do it.
    linked = [c for c in out if c.gpus <= nvlink_group(catalog.gpu(c.gpu))
              or nvlink_group(catalog.gpu(c.gpu)) == GPUS_PER_NODE]
    return linked or out


def _judge(workload: Workload, constraints: Constraints, current: Gpu | None, note: str,
           cur: Candidate | None, best: Candidate | None,
           cands: tuple[Candidate, ...], unseen: Candidate | None = None) -> Sizing:
    shares = workload.shares_ms
    stall = sum(shares.get(str(s), 0.0) for s in (Share.DATALOADER, Share.HOST, Share.IDLE))
    stall_frac = stall / workload.step_ms
    words = []
    on_gpu = workload.current_device_name is not None  # a CPU run's host time is its work
    if on_gpu and (stall_frac >= THRESHOLDS.stall_fraction
                   or workload.bound in (Bound.DATALOADER, Bound.HOST)):
        words.append(reasons.stall_words(shares, workload.step_ms, workload.host_cpu_work_ms,
                                         workload.named_stall_ms, workload.named_stall,
                                         remedies=workload.bound != Bound.INCONCLUSIVE))

    def sizing(recommended: Candidate | None, verdict: Verdict | None,
               savings: float | None) -> Sizing:
        return Sizing(current=current.name if current else None, current_note=note,
                      recommended=recommended.gpu if recommended else None,
                      recommended_gpus=recommended.gpus if recommended else 1, verdict=verdict,
                      savings_pct=savings, candidates=cands, reason="; ".join(words) + ".",
                      objective=constraints.objective, slower_ok_pct=constraints.slower_ok_pct,
                      frontier=objective.frontier(cands))

    why = objective.unearned(workload, current)
    if why is not None:
        words.append(why)
        return sizing(None, None, None)
    if best is None:
        words.append("no catalog GPU fits the peak memory with the requested headroom, even"
                     f" as {GPU_COUNTS[-1]} GPUs" if not any(c.fits_memory is not False
                                                             for c in cands)
                     else reasons.memory_unknown(current, unseen, True)
                     if unseen is not None and current is not None
                     else "no priced GPU meets the constraints; relax them or add a price"
                     " with --catalog")
        return sizing(None, None, None)
    if best.gpus > 1:
        words.append(f"nothing fits on one GPU: run on {best.gpus} x {best.gpu} with"
                     f" {best.parallelism}; needs {best.interconnect}")
    savings = None
    if cur and cur.usd_per_1k_steps and best.usd_per_1k_steps is not None:
        savings = (cur.usd_per_1k_steps - best.usd_per_1k_steps) / cur.usd_per_1k_steps * 100
    verdict: Verdict | None = None
    if current is not None and cur is not None:
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
        elif (not cur.meets_constraints and not best.meets_constraints and best.gpu != cur.gpu
              and (best.projected_step_ms or 0.0) < (cur.projected_step_ms or 0.0)):
            verdict = Verdict.UNDER_PROVISIONED  # the closest to the target, said as such
            words.append(f"no GPU that fits meets the target; the {current.name} takes"
                         f" {cur.projected_step_ms:.1f} ms per step, the fastest, {best.gpu},"
                         f" {best.projected_step_ms:.1f} ms")
        elif (best.gpu != cur.gpu and savings is not None
              and savings >= THRESHOLDS.over_provisioned_savings_pct):
            verdict = Verdict.OVER_PROVISIONED
            speed, detail = reasons.speed_words(best, cur)
            seen = (f"prices seen {best.price_date_seen}" if best.price_date_seen not in
                    (None, "undated") else "the price is undated")
            words.append(f"{best.gpu} is {speed}, {savings:.0f}% cheaper per step ({detail};"
                         f" {seen})")
        elif savings is None:
            # Cheaper than an unknown price cannot be told: no recommendation, the option named.
            option = (f"the cheapest per step that meets {reasons.goal(constraints)} is"
                      f" {best.gpu} at {best.projected_step_ms:.1f} ms" if best.gpu != cur.gpu else
                      reasons.memory_unknown(current, unseen, True) if unseen is not None else
                      f"no priced GPU meets {reasons.goal(constraints)}")
            words.append(f"the catalog has no price for the {current.name}, so no GPU is"
                         f" recommended; {option} (add the {current.name}'s price with"
                         " --catalog to compare)")
            return sizing(None, None, None)
        else:
            verdict = Verdict.RIGHT_SIZED
            words.append(f"the {current.name} is the cheapest per step among GPUs that fit"
                         f" and meet {reasons.goal(constraints)}" if best.gpu == cur.gpu else
                         f"{best.gpu} would save only {savings or 0:.0f}% per step, below the"
                         f" {THRESHOLDS.over_provisioned_savings_pct:.0f}% worth a move")
            best, savings = cur, 0.0
    else:
        words.append(f"cheapest per step: {best.gpu} at {best.projected_step_ms:.1f} ms")
    slower = objective.cheaper_slower(cands, best) \
        if constraints.objective == Objective.TIME else None
    if slower is not None and cur is not None:
        words.append(f"cheaper if you accept slower: {reasons.slower_words(objective.label(slower), slower, cur)};"
                     " --objective cost sizes for cost")
    if current is not None and workload.peak_memory_bytes is None:
        words.append(reasons.memory_unknown(current, unseen))
    if (constraints.objective == Objective.COST and constraints.target_step_ms is None
            and constraints.target_throughput is None and verdict is Verdict.OVER_PROVISIONED):
        words.append("no step-time target was given; pass --target-step-ms to bound latency")
    return sizing(best, verdict, savings)
