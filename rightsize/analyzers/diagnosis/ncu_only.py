"""A verdict from an Nsight Compute export alone (``ncu --csv``, no trace).

Input: NCU_KERNELS rows (``rightsize.traces.ncu``). Output: a
:class:`~rightsize.analyzers.diagnosis.verdict.Diagnosis` with ``device == "ncu"`` and a
confidence capped at ``SIGNALS.ncu_only_max_confidence``: ncu times each profiled kernel on its own
(replayed, serialized), so it sees how the kernels use the GPU but not the time between them,
where host work, data loading and copies would show.

Definition: each profiled launch is compute- or memory-bound by the larger of its SM and memory
throughput (% of peak, speed of light), the rule the trace diagnosis uses for kernels matched to
ncu rows (``classify``); ``compute`` and ``memory`` are their shares of the summed kernel
duration (``gpu__time_duration``), and every other share is unknown (null). The verdict is the
larger of the two; the confidence is ``SIGNALS.ncu_only_max_confidence`` x (0.5 + 0.5 x the margin
between them) x the share of kernel time on a unit at 60% of its peak or more (below, ncu calls
a kernel latency-limited: neither unit bounds it). When that share is under half, the verdict
is ``inconclusive``. The evidence says what to add for a real
verdict: a trace of the same job (``rightsize analyze TRACE NCU.csv``).
"""

from __future__ import annotations

import polars as pl

from rightsize.analyzers.document.diagnosis import (
    Diagnosis,
    Evidence,
)
from rightsize.analyzers.thresholds import DIAGNOSIS as THRESHOLDS
from rightsize.analyzers.thresholds import SIGNALS, DiagnosisThresholds
from rightsize.vocab import Bound, DeviceKind


def diagnose_ncu(ncu: pl.DataFrame,
                 thresholds: DiagnosisThresholds = THRESHOLDS) -> Diagnosis | None:
    line, cap = SIGNALS.ncu_heavy_pct, SIGNALS.ncu_only_max_confidence
    k = ncu.filter(pl.col("duration_ns").is_not_null() & (pl.col("duration_ns") > 0)
                   & (pl.col("sm_throughput_pct").is_not_null()
                      | pl.col("memory_throughput_pct").is_not_null()))
    total = int(k["duration_ns"].sum()) if k.height else 0
    if total <= 0:
        return None
    sm = pl.col("sm_throughput_pct").fill_null(0.0)
    mem = pl.col("memory_throughput_pct").fill_null(0.0)
    k = k.with_columns(compute=sm >= mem, heavy=pl.max_horizontal(sm, mem) >= line)
    compute = 100.0 * int(k.filter("compute")["duration_ns"].sum()) / total
    memory = 100.0 - compute
    heavy = 100.0 * int(k.filter("heavy")["duration_ns"].sum()) / total
    bound = Bound.COMPUTE if compute >= memory else Bound.MEMORY
    margin = abs(compute - memory) / 100.0
    confidence: float | None = round(
        cap * (0.5 + 0.5 * margin) * heavy / 100.0, 2)
    shares: dict[str, float | None] = {
        "compute": compute, "memory": memory, "pcie": None, "dataloader": None,
        "communication": None, "host": None, "idle": None,
    }
    launches, names = k.height, k["kernel_name_normalized"].n_unique()
    latency: tuple[Evidence, ...] = ()
    if heavy < 50.0:  # most of the time neither unit is near its peak: neither bounds it
        bound, confidence = Bound.INCONCLUSIVE, None
        latency = (Evidence(
            "signals", heavy, 50.0,
            f"inconclusive: {100 - heavy:.1f}% of the kernel time is latency-limited (neither SM "
            f"nor memory throughput at {line:.0f}% of peak), so neither compute nor "
            "memory bounds these kernels; ncu's own sections (occupancy, warp stalls) say what "
            "holds them, and a trace of the job says whether they matter to the step"),)
    evidence = latency + (
        Evidence("signals", float(launches), None,
                 f"diagnosed from Nsight Compute alone ({launches} profiled "
                 f"launch{'es' if launches != 1 else ''} of {names} "
                 f"kernel{'s' if names != 1 else ''}, no timeline): the time between kernels (host work, data loading, "
                 "copies) is unknown, so confidence is capped at "
                 f"{cap}; for a verdict on the step, analyze a trace of the "
                 "same job with it: rightsize analyze TRACE NCU.csv"),
        Evidence(bound.value, max(compute, memory), None,
                 f"kernel time by speed of light: compute-bound {compute:.1f}%, memory-bound "
                 f"{memory:.1f}% (the larger of SM and memory throughput, % of peak)"
                 if not latency else
                 f"the busier unit of each kernel, though neither is near its peak: SM for "
                 f"{compute:.1f}% of the kernel time, memory for {memory:.1f}%"),
        Evidence("signals", heavy, line,
                 f"{heavy:.1f}% of the kernel time on a unit at {line:.0f}% of its peak "
                 "or more; the rest is latency-limited (neither unit near its peak)"),
    )
    return Diagnosis(bound=bound, confidence=confidence, device=DeviceKind.NCU, shares_pct=shares,
                     evidence=tuple(e.text for e in evidence), thresholds=thresholds.as_dict(),
                     evidence_items=evidence)
