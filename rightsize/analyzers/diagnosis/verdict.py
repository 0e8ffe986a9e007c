"""The verdict: what bounds the step, how sure, and the evidence, from the exclusive shares.

Inputs: a trace, its steps and primary device, and the optional signals (ridge point of the
GPU, Nsight Compute rows, GPU samples). Output: :class:`Diagnosis` and the classified device
work. Pure.

Rule: when compute + memory work fill at least ``work_bound_pct`` of the step, the larger of the
two bounds it; otherwise the step is limited by what the device waits for, and the largest
stall share names the bound (``host`` includes time with nothing recorded). Confidence (0..1) is
the product of: how far the busy share is from that line (0.5 at the line, 1 at 20 points away),
the margin of the winner over the runner-up (0.5 for a tie, 1 for a clear win), and, for a
compute/memory verdict, the quality of the signals that classified the kernel time (ncu 1.0,
counters 0.9, roofline 0.85, names 0.7, unmatched names 0.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis.classify import Ridge, classify_kernels, counter_windows
from rightsize.analyzers.diagnosis.shares import cpu_shares, gpu_shares
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps
from rightsize.traces.schema import Trace
from rightsize.vocab import SHARES, Bound, Signal


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Named thresholds, each with the reason (and the source when borrowed)."""

    # The work bounds the step when it takes at least 1.5x the time spent waiting (>= 60% of the
    # step); below that, removing the largest wait shortens the step more than faster kernels.
    work_bound_pct: float = 60.0
    dataloader_pct: float = 5.0  # TensorBoard plugin: data loading > 5% of the step
    communication_pct: float = 10.0  # TensorBoard plugin: communication > 10% of the step
    gpu_util_pct: float = 50.0  # TensorBoard plugin: GPU utilization < 50% is low
    disagreement_pct: float = 15.0  # NVML vs trace utilization gap worth a line of evidence
    tiny_op_us: float = 10.0  # CPU-only: ops this short are mostly dispatch overhead
    # CPU-only: assumed ridge point, ~1-2 TFLOP/s fp32 over ~100-200 GB/s of a server CPU
    cpu_ridge_flops_per_byte: float = 10.0

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


THRESHOLDS = Thresholds()
SIGNAL_QUALITY = {Signal.NCU.value: 1.0, Signal.COUNTERS.value: 0.9,
                  Signal.ROOFLINE.value: 0.85, Signal.NAME.value: 0.7,
                  Signal.DEFAULT.value: 0.5}
STALLS = ("pcie", "dataloader", "communication", "host")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    bound: Bound | None
    confidence: float | None
    shares_pct: Mapping[str, float | None]  # None: not measured (counters-only diagnosis)
    step_ns: int  # summed step time the shares are of
    device: str  # "gpu" | "cpu"
    signal_pct: dict[str, float]  # share of classified work time decided by each signal
    evidence: tuple[str, ...]
    utilization: dict[str, Any]
    thresholds: Thresholds = field(default=THRESHOLDS)


def diagnose(
    trace: Trace, steps: Steps, device: int | None, ridge: Ridge | None = None,
    ncu: pl.DataFrame | None = None, samples: pl.DataFrame | None = None,
    thresholds: Thresholds = THRESHOLDS,
) -> tuple[Diagnosis | None, pl.DataFrame]:
    """Diagnose one rank; ``device`` None means a CPU-only trace."""
    if steps.count == 0:
        return None, trace.kernels.clear()
    starts, ends = steps.start_ns.tolist(), steps.end_ns.tolist()
    if device is not None:
        counters = counter_windows(samples, device, starts, ends) if samples is not None else None
        work = classify_kernels(trace.kernels.filter(pl.col("device") == device), trace.cpu_ops,
                                ridge, ncu, counters)
        parts = gpu_shares(trace, steps, work, device)
    else:
        parts, work = cpu_shares(trace, steps, thresholds.cpu_ridge_flops_per_byte,
                                 thresholds.tiny_op_us * 1000)
    step_ns = int(iv.total(iv.union(iv.of(steps.start_ns, steps.end_ns))))
    shares = {k: (100.0 * iv.total(parts[k]) / step_ns if step_ns else 0.0) for k in SHARES}
    signal_pct = _signal_pct(work)
    bound, confidence, busy = _verdict(shares, signal_pct, thresholds)
    util = utilization(trace, steps, device, samples)
    evidence = _evidence(shares, busy, bound, signal_pct, util, device, thresholds)
    return Diagnosis(bound, confidence, shares, step_ns, "gpu" if device is not None else "cpu",
                     signal_pct, tuple(evidence), util, thresholds), work


def _signal_pct(work: pl.DataFrame) -> dict[str, float]:
    w = work.filter(pl.col("work").is_in(["compute", "memory"]))
    total = int(w["dur_ns"].sum()) if w.height else 0
    if total <= 0:
        return {}
    by = w.group_by("signal").agg(pl.col("dur_ns").sum())
    return {r["signal"]: 100.0 * r["dur_ns"] / total for r in by.to_dicts()}


def _verdict(shares: dict[str, float], signal_pct: dict[str, float],
             th: Thresholds) -> tuple[Bound | None, float | None, float]:
    busy = shares["compute"] + shares["memory"]
    if busy + sum(shares[s] for s in STALLS) + shares["idle"] <= 0:
        return None, None, busy
    level = min(1.0, 0.5 + abs(busy - th.work_bound_pct) / 40.0)
    if busy >= th.work_bound_pct:
        ranked = sorted(("compute", "memory"), key=lambda k: shares[k], reverse=True)
        values = [shares[k] for k in ranked]
        quality = sum(SIGNAL_QUALITY[s] * p for s, p in signal_pct.items()) / 100.0 \
            if signal_pct else 0.5
    else:
        stall = {s: shares[s] for s in STALLS}
        stall["host"] += shares["idle"]
        ranked = sorted(stall, key=lambda k: stall[k], reverse=True)
        values = [stall[k] for k in ranked]
        quality = 1.0
    top, second = values[0], values[1]
    margin = 0.5 + 0.5 * ((top - second) / top if top > 0 else 0.0)
    return Bound(ranked[0]), round(level * margin * quality, 2), busy


def utilization(trace: Trace, steps: Steps, device: int | None,
                samples: pl.DataFrame | None) -> dict[str, Any]:
    """Peak and mean utilization over the step windows: trace-derived and NVML/GPM side by side."""
    out: dict[str, Any] = {"trace": None, "nvml": None}
    if device is None:
        return out
    k = trace.kernels.filter(pl.col("device") == device)
    s0 = k["ts_ns"].to_numpy().astype(np.int64)
    busy = iv.union(iv.of(s0, s0 + k["dur_ns"].to_numpy().astype(np.int64)))
    per = iv.per_window(busy, steps.start_ns, steps.end_ns) / np.maximum(steps.dur_ns, 1) * 100
    out["trace"] = {"gpu_busy_pct_mean": float(iv.total(iv.clip(busy, int(steps.start_ns[0]),
                                                                 int(steps.end_ns[-1])))
                                                / max(int(steps.end_ns[-1] - steps.start_ns[0]), 1)
                                                * 100),
                    "gpu_busy_pct_peak_step": float(per.max())}
    if samples is None or samples.height == 0:
        return out
    w = samples.filter(pl.col("gpu_index") == device)
    inside = pl.lit(False)
    for a, b in zip(steps.start_ns.tolist(), steps.end_ns.tolist(), strict=True):
        inside = inside | ((pl.col("t_ns") >= a) & (pl.col("t_ns") < b))
    w = w.filter(inside)
    if w.height == 0:
        out["nvml"] = {"samples": 0}
        return out
    nv: dict[str, Any] = {"samples": w.height}
    for col in ("gpu_util_pct", "mem_util_pct", "gpm_sm_util_pct", "gpm_sm_occupancy_pct",
                "gpm_tensor_util_pct", "gpm_dram_bw_util_pct"):
        if col in w.columns and w[col].null_count() < w.height:
            nv[col.replace("_pct", "_pct_mean")] = float(w[col].mean())  # type: ignore[arg-type]
            nv[col.replace("_pct", "_pct_peak")] = float(w[col].max())  # type: ignore[arg-type]
    out["nvml"] = nv
    return out


def _evidence(shares: dict[str, float], busy: float, bound: Bound | None,
              signal_pct: dict[str, float], util: dict[str, Any], device: int | None,
              th: Thresholds) -> list[str]:
    what = "GPU" if device is not None else "CPU"
    ev = []
    line = "≥" if busy >= th.work_bound_pct else "<"
    ev.append(f"{what} busy with work {busy:.1f}% of the step ({line} {th.work_bound_pct:.0f}%: "
              + ("the work itself bounds the step)" if line == "≥"
                 else "the step is limited by what the device waits for)")
              + f"; compute-bound {shares['compute']:.1f}%, memory-bound {shares['memory']:.1f}%")
    if shares["dataloader"] > 0:
        flag = " (above" if shares["dataloader"] > th.dataloader_pct else " (below"
        ev.append(f"data-loader wait exposed {shares['dataloader']:.1f}% of the step{flag} the "
                  f"TensorBoard plugin's {th.dataloader_pct:.0f}% threshold)")
    if shares["host"] + shares["idle"] > 0 and device is not None:
        ev.append(f"GPU idle while the host runs Python, ops and launches: "
                  f"{shares['host']:.1f}% of the step; idle with nothing recorded "
                  f"{shares['idle']:.1f}%")
    elif shares["host"] + shares["idle"] > 0:
        ev.append(f"framework overhead (Python, op dispatch, ops under {th.tiny_op_us:.0f} us): "
                  f"{shares['host']:.1f}% of the step; nothing recorded {shares['idle']:.1f}%")
    if shares["pcie"] > 0:
        ev.append(f"host<->device copies not hidden under kernels: {shares['pcie']:.1f}% of the step")
    if shares["communication"] > 0:
        flag = "above" if shares["communication"] > th.communication_pct else "below"
        ev.append(f"exposed communication {shares['communication']:.1f}% of the step ({flag} the "
                  f"TensorBoard plugin's {th.communication_pct:.0f}% threshold)")
    if signal_pct:
        parts = ", ".join(f"{s} {p:.0f}%" for s, p in sorted(signal_pct.items(),
                                                            key=lambda x: -x[1]))
        ev.append(f"compute/memory split of the work decided by: {parts}")
    trace_u, nvml = util.get("trace"), util.get("nvml")
    if trace_u and nvml and "gpu_util_pct_mean" in nvml:
        gap = nvml["gpu_util_pct_mean"] - trace_u["gpu_busy_pct_mean"]
        note = (f"NVML utilization.gpu {nvml['gpu_util_pct_mean']:.1f}% (peak "
                f"{nvml['gpu_util_pct_peak']:.0f}%) vs {trace_u['gpu_busy_pct_mean']:.1f}% of "
                f"the step with a kernel running in the trace")
        if abs(gap) > th.disagreement_pct:
            note += (" - they disagree: NVML counts a sample period busy when any kernel ran in "
                     "it, and samples at its own rate")
        ev.append(note)
    # Order: the verdict's own share first.
    key = {Bound.DATALOADER: "data-loader", Bound.HOST: "overhead" if device is None
           else "idle while", Bound.PCIE: "copies",
           Bound.COMMUNICATION: "communication"}.get(bound) if bound else None
    if key:
        ev.sort(key=lambda e: 0 if key in e else 1)
    return ev
