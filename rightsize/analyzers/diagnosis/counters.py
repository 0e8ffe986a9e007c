"""A verdict from GPU counters alone (nvidia-smi / DCGM / NVML samples, no trace).

Input: GPU_SAMPLES rows (``rightsize.traces.samples``). Output: a
:class:`~rightsize.analyzers.diagnosis.verdict.Diagnosis` with ``device == "counters"`` and a
confidence capped (``thresholds.SIGNALS.counters_only_max_confidence``), because counters cannot
see what a trace sees: they cannot tell data loading from other host work, and without profiling
fields (GPM / DCGM_FI_PROF) they cannot split busy time into compute and memory.

Definition, over every GPU of the log while a job held it (``counter_gpus``: the samples at 0%
busy with under 1 GiB used are the log's time before and after the job, left out and said),
each GPU named in the evidence with its busy share, power and memory:

* busy = mean ``utilization.gpu`` (% of time a kernel ran) less the samples *spinning*: 90%+
  busy under half of that GPU's busy power, kernels waiting in a collective for a late peer
  (``communication``, with each stall's time, the GPUs that spun and the one they waited for);
  the rest is waiting (``host``, which here includes data loading);
* busy splits into compute and memory in proportion to the busiest math pipe (tensor, FP32,
  FP16 utilization) vs DRAM bandwidth utilization, when those are sampled; otherwise the split
  is unknown (null);
* ``pcie`` = mean of max(TX, RX) throughput over the link's capacity (PCIe generation x width),
  reported next to the shares, and the verdict when it exceeds ``SIGNALS.pcie_bound_pct``.

The verdict follows the trace rule: busy >= 60% -> the larger of compute/memory; else host.
"""

from __future__ import annotations

from typing import cast

import polars as pl

from rightsize.analyzers.diagnosis import counter_gpus as cg
from rightsize.analyzers.document.diagnosis import (
    Diagnosis,
    Evidence,
    NvmlUtilization,
    Utilization,
)
from rightsize.analyzers.thresholds import DIAGNOSIS as THRESHOLDS
from rightsize.analyzers.thresholds import SIGNALS, DiagnosisThresholds
from rightsize.vocab import Bound, DeviceKind

# PCIe payload bandwidth per lane per direction, GB/s (gen 1..6), as gpus.csv counts x16 links.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 1.0, 4: 2.0, 5: 4.0, 6: 8.0}
MATH = ("gpm_tensor_util_pct", "gpm_fp32_util_pct", "gpm_fp16_util_pct")


def _mean(df: pl.DataFrame, col: str) -> float | None:
    if col not in df.columns or df[col].null_count() == df.height:
        return None
    return float(df[col].mean())  # type: ignore[arg-type]


def diagnose_counters(samples: pl.DataFrame,
                      thresholds: DiagnosisThresholds = THRESHOLDS) -> Diagnosis | None:
    s = samples.filter(pl.col("gpu_util_pct").is_not_null())
    if s.height == 0:
        return None
    on, not_running = cg.running(s)
    g, power = cg.with_spin(on if on.height else s)
    gpus = cg.summaries(g, power)
    names = f"GPU {gpus[0].gpu}" if len(gpus) == 1 else \
        f"{len(gpus)} GPUs: {cg.gpu_list([x.gpu for x in gpus])}"
    util = float(g["gpu_util_pct"].mean())  # type: ignore[arg-type]
    spin = float(g.select((pl.col("gpu_util_pct") * pl.col("spin")).mean()).item())
    busy = util - spin
    maths = [m for m in (_mean(g, c) for c in MATH) if m is not None]
    dram = _mean(g, "gpm_dram_bw_util_pct")
    compute = memory = None
    if maths and dram is not None and max(maths) + dram > 0:
        compute = busy * max(maths) / (max(maths) + dram)
        memory = busy - compute
    pcie = _pcie_pct(g)
    shares: dict[str, float | None] = {
        "compute": compute, "memory": memory, "pcie": pcie, "dataloader": None,
        "communication": spin if power else None, "host": 100.0 - util, "idle": None,
    }
    evidence = [Evidence("signals", float(g.height), None,
                         f"diagnosed from GPU counters alone ({g.height} samples of {names}, "
                         "no trace): confidence is capped at "
                         f"{SIGNALS.counters_only_max_confidence}")]
    if not_running:
        evidence.append(Evidence("coverage", float(on.height), None, not_running))
    evidence.append(Evidence("utilization", util, thresholds.work_bound_pct,
                             f"mean utilization.gpu {util:.1f}%"
                             f" (peak {cast(float, g['gpu_util_pct'].max()):.0f}%)"
                             + (f", {spin:.1f}% of it spinning (below "
                                f"{SIGNALS.spin_power_fraction:g} of the busy power)"
                                if spin > 0 else "")))
    evidence.extend(_per_gpu(gpus))
    evidence.extend(_stalls(cg.stalls(g, power)))
    if pcie is not None:
        evidence.append(Evidence("pcie", pcie, SIGNALS.pcie_bound_pct,
                                 f"host link carries {pcie:.1f}% of its capacity on average"))
    peak = float(cast(float, g["gpu_util_pct"].max()))
    best = gpus[0].gpu
    if g.height < SIGNALS.min_counter_samples or peak < SIGNALS.idle_gpu_util_pct:
        # Seen on a DCGM scrape of an idle T4: one sample at 0% was called host-bound (0.50).
        why = (f"one sample of GPU {best}: a single reading is no workload"
               if g.height < SIGNALS.min_counter_samples else
               f"GPU {best} was idle in every sample (utilization.gpu at most {peak:.0f}%): "
               "no work ran to judge" if len(gpus) == 1 else
               f"every GPU was idle in every sample (utilization.gpu at most {peak:.0f}%): "
               "no work ran to judge")
        evidence.insert(0, Evidence("signals", float(g.height), None,
                                    f"inconclusive: {why}; sample the GPU while the job runs "
                                    "(rightsize run, or dcgmi dmon / nvidia-smi --query-gpu "
                                    "over the job), or record a trace"))
        bound, margin = Bound.INCONCLUSIVE, 0.0
    elif pcie is not None and pcie > SIGNALS.pcie_bound_pct:
        bound, margin = Bound.PCIE, pcie / 100.0
    elif busy < thresholds.work_bound_pct:
        wait = 100.0 - busy
        bound = Bound.COMMUNICATION if spin > 100.0 - util else Bound.HOST
        margin = wait / 100.0
        evidence.append(Evidence("host", 100.0 - util, None,
                                 "the GPU waits most of the time; counters cannot tell data "
                                 "loading from other host work: record a trace to separate them")
                        if bound is Bound.HOST else
                        Evidence("communication", spin, None,
                                 "the GPUs spin in collectives most of the time: a peer "
                                 "holds them up (see the stalls)"))
    elif compute is not None and memory is not None:
        bound = Bound.COMPUTE if compute >= memory else Bound.MEMORY
        margin = abs(compute - memory) / busy if busy else 0.0
        evidence.append(Evidence(bound.value, max(maths), dram,
                                 f"busiest math pipe {max(maths):.1f}% vs DRAM bandwidth "
                                 f"{dram:.1f}%"))
    else:
        bound, margin = None, 0.0
        evidence.append(Evidence("signals", None, None,
                                 "busy, but no profiling counters (GPM/DCGM_FI_PROF) to split "
                                 "compute from memory"))
    confidence = None if bound in (None, Bound.INCONCLUSIVE) else round(
        SIGNALS.counters_only_max_confidence * (0.5 + 0.5 * min(margin, 1.0)), 2)
    nvml = Utilization(None, NvmlUtilization(
        samples=g.height, gpu_util_pct_mean=util,
        gpu_util_pct_peak=peak))
    return Diagnosis(bound=bound, confidence=confidence, device=DeviceKind.COUNTERS,
                     shares_pct=shares, evidence=tuple(e.text for e in evidence),
                     thresholds=thresholds.as_dict(), utilization=nvml,
                     evidence_items=tuple(evidence))


def _per_gpu(gpus: tuple[cg.GpuSummary, ...]) -> list[Evidence]:
    """Every GPU of the log, in one item: busy, power against its busy power, memory."""
    if len(gpus) < 2:
        return []
    def one(x: cg.GpuSummary) -> str:
        watts = (f", {x.power_w:.0f} W mean of {x.busy_power_w:.0f} W busy"
                 if x.power_w is not None and x.busy_power_w is not None else
                 f", {x.power_w:.0f} W mean" if x.power_w is not None else "")
        mem = f", {x.mem_peak_bytes / 2**30:.1f} GiB peak" if x.mem_peak_bytes else ""
        spin = f" ({x.spin_pct:.1f}% of the time spinning)" if x.spin_pct else ""
        return f"GPU {x.gpu} {x.busy_pct:.1f}% busy{spin}{watts}{mem}"
    return [Evidence("utilization", float(len(gpus)), None,
                     "per GPU over the job's samples: " + "; ".join(one(x) for x in gpus))]


def _stalls(stalls: tuple[cg.Stall, ...]) -> list[Evidence]:
    """The longest stalls, each with its time, who spun and who they waited for."""
    out = []
    for st in stalls[:3]:
        who = (f"while GPU{'s' if len(st.stragglers) > 1 else ''} "
               f"{cg.gpu_list(st.stragglers)} sat under {cg.STRAGGLER_PCT:g}% busy: "
               f"{'they' if len(st.stragglers) > 1 else 'it'} held up the job (a straggler)"
               if st.stragglers else
               "while no GPU of this log was idle: the peer they waited for is elsewhere "
               "(another node's rank)")
        out.append(Evidence(
            "communication", st.seconds, None,
            f"stall from {cg.clock(st.start_ns)} for {st.seconds:.0f} s: GPUs "
            f"{cg.gpu_list(st.spinning)} at {st.spin_util_pct:.0f}% utilization drawing "
            f"{st.spin_power_w:.0f} W, "
            f"{st.spin_power_w / st.busy_power_w:.0%} of their {st.busy_power_w:.0f} W busy "
            f"power (kernels spinning in a collective, not computing), {who}"))
    return out


def _pcie_pct(g: pl.DataFrame) -> float | None:
    tx, rx = _mean(g, "pcie_tx_bytes_per_s"), _mean(g, "pcie_rx_bytes_per_s")
    gen = g["pcie_link_gen"].drop_nulls() if "pcie_link_gen" in g.columns else None
    width = g["pcie_link_width"].drop_nulls() if "pcie_link_width" in g.columns else None
    if tx is None and rx is None or gen is None or width is None or not gen.len() \
            or not width.len():
        return None
    lane = PCIE_LANE_GBS.get(int(gen.max()))  # type: ignore[arg-type]
    if lane is None:
        return None
    capacity = lane * 1e9 * int(width.max())  # type: ignore[arg-type]
    return 100.0 * max(tx or 0.0, rx or 0.0) / capacity
