"""A verdict from GPU counters alone (nvidia-smi / DCGM / NVML samples, no trace).

Input: GPU_SAMPLES rows (``rightsize.traces.samples``). Output: a
:class:`~rightsize.analyzers.diagnosis.verdict.Diagnosis` with ``device == "counters"`` and a
confidence capped (``thresholds.SIGNALS.counters_only_max_confidence``), because counters cannot
see what a trace sees: they cannot tell data loading from other host work, and without profiling
fields (GPM / DCGM_FI_PROF) they cannot split busy time into compute and memory.

Definition, on the GPU with the highest mean utilization:

* busy = mean ``utilization.gpu`` (% of time a kernel ran); the rest is waiting (``host``, which
  here includes data loading);
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
    best = (s.group_by("gpu_index").agg(pl.col("gpu_util_pct").mean())
            .sort(["gpu_util_pct", "gpu_index"], descending=[True, False])["gpu_index"][0])
    g = s.filter(pl.col("gpu_index") == best)
    busy = float(g["gpu_util_pct"].mean())  # type: ignore[arg-type]
    maths = [m for m in (_mean(g, c) for c in MATH) if m is not None]
    dram = _mean(g, "gpm_dram_bw_util_pct")
    compute = memory = None
    if maths and dram is not None and max(maths) + dram > 0:
        compute = busy * max(maths) / (max(maths) + dram)
        memory = busy - compute
    pcie = _pcie_pct(g)
    shares: dict[str, float | None] = {
        "compute": compute, "memory": memory, "pcie": pcie, "dataloader": None,
        "communication": None, "host": 100.0 - busy, "idle": None,
    }
    evidence = [Evidence("signals", float(g.height), None,
                         f"diagnosed from GPU counters alone ({g.height} samples of GPU {best}, "
                         "no trace): confidence is capped at "
                         f"{SIGNALS.counters_only_max_confidence}"),
                Evidence("utilization", busy, thresholds.work_bound_pct,
                         f"mean utilization.gpu {busy:.1f}%"
                         f" (peak {cast(float, g['gpu_util_pct'].max()):.0f}%)")]
    if pcie is not None:
        evidence.append(Evidence("pcie", pcie, SIGNALS.pcie_bound_pct,
                                 f"host link carries {pcie:.1f}% of its capacity on average"))
    peak = float(cast(float, g["gpu_util_pct"].max()))
    if g.height < SIGNALS.min_counter_samples or peak < SIGNALS.idle_gpu_util_pct:
        # Seen on a DCGM scrape of an idle T4: one sample at 0% was called host-bound (0.50).
        why = (f"one sample of GPU {best}: a single reading is no workload"
               if g.height < SIGNALS.min_counter_samples else
               f"GPU {best} was idle in every sample (utilization.gpu at most {peak:.0f}%): "
               "no work ran to judge")
        evidence.insert(0, Evidence("signals", float(g.height), None,
                                    f"inconclusive: {why}; sample the GPU while the job runs "
                                    "(rightsize run, or dcgmi dmon / nvidia-smi --query-gpu "
                                    "over the job), or record a trace"))
        bound, margin = Bound.INCONCLUSIVE, 0.0
    elif pcie is not None and pcie > SIGNALS.pcie_bound_pct:
        bound, margin = Bound.PCIE, pcie / 100.0
    elif busy < thresholds.work_bound_pct:
        bound, margin = Bound.HOST, (100.0 - busy) / 100.0
        evidence.append(Evidence("host", 100.0 - busy, None,
                                 "the GPU waits most of the time; counters cannot tell data "
                                 "loading from other host work: record a trace to separate them"))
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
    util = Utilization(None, NvmlUtilization(
        samples=g.height, gpu_util_pct_mean=busy,
        gpu_util_pct_peak=peak))
    return Diagnosis(bound=bound, confidence=confidence, device=DeviceKind.COUNTERS,
                     shares_pct=shares, evidence=tuple(e.text for e in evidence),
                     thresholds=thresholds.as_dict(), utilization=util,
                     evidence_items=tuple(evidence))


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
