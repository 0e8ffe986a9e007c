"""The verdict: what bounds the step, how sure, and the evidence, from the exclusive shares.

Inputs: a trace, its steps and primary device, and the optional signals (ridge point of the
GPU, Nsight Compute rows, GPU samples). Output: :class:`Diagnosis` and the classified device
work. Pure.

Rule: the verdict is ``inconclusive`` when the capture cannot support one - recorded activity
covers less than ``min_recorded_pct`` of the step, start-up work (GPU initialisation, JIT
compilation, autotuning, warm-up) fills ``startup_pct`` or more of it, the steps hold fewer than
``min_kernels`` kernels, a GPU job recorded no kernel, or NVML and the trace disagree on how busy
the GPU was; the evidence says which and what to record instead. Otherwise, when compute +
memory work fill at least ``work_bound_pct`` of the step, the larger of the two bounds it;
below, the step is limited by what the device waits for, and the largest stall share names the
bound (``host`` includes time with nothing recorded). Confidence (0..1) is the documented
product in docs/diagnosis.md: distance from the work line x margin of the winner x quality of
the classifying signal x steps seen x recorded coverage x step-to-step stability.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis import capture
from rightsize.analyzers.diagnosis.classify import (
    OpCosts,
    Ridge,
    classify_kernels,
    counter_windows,
    op_cost_table,
)
from rightsize.analyzers.diagnosis.evidence import findings, inconclusive_reasons
from rightsize.analyzers.diagnosis.host_work import host_work
from rightsize.analyzers.diagnosis.shares import cpu_shares, gpu_shares
from rightsize.analyzers.document.diagnosis import (
    Diagnosis,
    NvmlUtilization,
    SignalGroup,
    TraceUtilization,
    Utilization,
)
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.per_step import per_step, split_over_time
from rightsize.analyzers.metrics.steps import Steps
from rightsize.analyzers.thresholds import DIAGNOSIS as THRESHOLDS
from rightsize.analyzers.thresholds import DiagnosisThresholds
from rightsize.traces.schema import Trace
from rightsize.vocab import SHARES, Bound, DeviceKind, Signal

SIGNAL_QUALITY = {Signal.NCU.value: 1.0, Signal.COUNTERS.value: 0.9,
                  Signal.ROOFLINE.value: 0.85, Signal.NAME.value: 0.7,
                  Signal.DEFAULT.value: 0.5}
STALLS = ("pcie", "dataloader", "communication", "host")


def diagnose(
    trace: Trace, steps: Steps, device: int | None, ridge: Ridge | None = None,
    ncu: pl.DataFrame | None = None, samples: pl.DataFrame | None = None,
    thresholds: DiagnosisThresholds = THRESHOLDS, op_costs: OpCosts | None = None,
) -> tuple[Diagnosis | None, pl.DataFrame]:
    """Diagnose one rank; ``device`` None means no kernel on any GPU (a CPU-only run, or a GPU
    job whose kernels were not recorded). ``op_costs``: ``op_cost_table(trace.cpu_ops)``
    when the caller has it already."""
    if steps.count == 0:
        return None, trace.kernels.clear()
    starts, ends = steps.start_ns.tolist(), steps.end_ns.tolist()
    costs, notes = op_costs if op_costs is not None else op_cost_table(trace.cpu_ops)
    on_gpu = device is not None or capture.launches(trace) > 0
    if on_gpu:
        counters = counter_windows(samples, device, starts, ends) \
            if samples is not None and device is not None else None
        kernels = trace.kernels.filter(pl.col("device") == device) if device is not None \
            else trace.kernels.clear()
        work = classify_kernels(kernels, trace.cpu_ops, ridge, ncu, counters, costs)
        parts = gpu_shares(trace, steps, work, device if device is not None else -1)
    else:
        parts, work = cpu_shares(trace, steps, thresholds.cpu_ridge_flops_per_byte,
                                 thresholds.tiny_op_us * 1000, costs)
    step_ns = int(iv.total(iv.union(iv.of(steps.start_ns, steps.end_ns))))
    shares = {k: (100.0 * iv.total(parts[k]) / step_ns if step_ns else 0.0) for k in SHARES}
    signal_pct = _signal_pct(work)
    facts = capture.check(trace, steps, work if on_gpu else None, shares["idle"], step_ns,
                          on_gpu, parts["idle"])
    util = utilization(trace, steps, device, samples)
    bound, confidence, busy = _verdict(shares, signal_pct, thresholds)
    reasons = inconclusive_reasons(facts, util, thresholds) if bound is not None else []
    if reasons:
        bound, confidence = Bound.INCONCLUSIVE, None
    elif confidence is not None:
        confidence = round(confidence * evidence_factor(facts), 2)
    host = host_work(trace, parts["host"], step_ns, steps, parts["dataloader"]) \
        if on_gpu else None
    items = reasons + findings(shares, busy, bound, signal_pct, util, on_gpu, facts, notes,
                               thresholds, host)
    return Diagnosis(
        bound=bound, confidence=confidence, device=DeviceKind.GPU if on_gpu else DeviceKind.CPU,
        shares_pct=shares, evidence=tuple(e.text for e in items), signals=signal_groups(work),
        signal_pct=signal_pct, thresholds=thresholds.as_dict(), utilization=util,
        evidence_items=tuple(items), host_work=host, step_ns=step_ns, per_step=per_step(parts, steps),
        split=split_over_time(parts, steps) if steps.count == 1 else None), work


TOP_SIGNAL_GROUPS = 15


def signal_groups(work: pl.DataFrame | None,
                  top: int = TOP_SIGNAL_GROUPS) -> tuple[SignalGroup, ...]:
    """Classified work summed per kernel group (per name when there are no groups), longest
    first: which class each group got and which signal decided it."""
    if work is None or not work.height:
        return ()
    by = "group" if "group" in work.columns else "name"
    g = (work.group_by(by, "work", "signal").agg(pl.col("dur_ns").sum(), calls=pl.len())
         .sort(["dur_ns", by], descending=[True, False]).head(top))
    return tuple(SignalGroup(row[by], row["work"], row["signal"],
                             None if row["dur_ns"] is None else row["dur_ns"] / 1e6, row["calls"])
                 for row in g.to_dicts())


def evidence_factor(c: capture.Capture) -> float:
    """Steps seen x recorded coverage x step-to-step stability (docs/diagnosis.md)."""
    steps = min(1.0, 0.6 + 0.1 * c.steps)
    stability = max(0.5, 1.0 - c.step_cv)
    return steps * (c.recorded_pct / 100.0) * stability


def _signal_pct(work: pl.DataFrame) -> dict[str, float]:
    """Share of classified work time decided by each signal, best signal first."""
    w = work.filter(pl.col("work").is_in(["compute", "memory"]))
    total = int(w["dur_ns"].sum()) if w.height else 0
    if total <= 0:
        return {}
    by = w.group_by("signal").agg(pl.col("dur_ns").sum())
    pct = {r["signal"]: 100.0 * r["dur_ns"] / total for r in by.to_dicts()}
    return dict(sorted(pct.items(), key=_signal_rank))


def _signal_rank(item: tuple[str, object]) -> tuple[int, str]:
    """Best signal first (``vocab.Signal`` order): a stable key order in every document."""
    order = [s.value for s in Signal]
    return (order.index(item[0]) if item[0] in order else len(order), item[0])


def _verdict(shares: dict[str, float], signal_pct: dict[str, float],
             th: DiagnosisThresholds) -> tuple[Bound | None, float | None, float]:
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
    return Bound(ranked[0]), level * margin * quality, busy


# nvmlDeviceGetUtilizationRates (nvidia-smi utilization.gpu/.memory, DCGM_FI_DEV_GPU_UTIL):
# "percent of time over the past sample period"; "the sample period may be between 1 second
# and 1/6 second depending on the product". An H100 (driver 580.159) changed its value every
# ~200 ms and reported each period about 80 ms after it ended.
UTIL_PERIOD_NS = (166_666_667, 1_000_000_000)


def util_period_ns(samples: pl.DataFrame) -> int:
    """The driver's averaging period of utilization.gpu, from the shortest time between two
    changes of its value, within the documented 1/6 s to 1 s (1/6 s when it never changes
    twice)."""
    lo, hi = UTIL_PERIOD_NS
    if "gpu_util_pct" not in samples.columns:
        return lo
    s = samples.filter(pl.col("gpu_util_pct").is_not_null())
    changed = s.filter(pl.col("gpu_util_pct") != pl.col("gpu_util_pct").shift(1))["t_ns"]
    if changed.len() < 2:
        return lo
    return int(min(max(int(changed.diff().drop_nulls().min()), lo), hi))  # type: ignore[arg-type]


# Steps a profiler records back to back leave gaps of microseconds between them (an H100
# inference window: 341 steps, 341 intervals): shorter gaps than this join one window.
STEP_GAP_NS = 10_000_000


def _merged(windows: tuple[np.ndarray, np.ndarray], gap_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Join consecutive (sorted, disjoint) intervals separated by less than ``gap_ns``."""
    starts, ends = windows
    if len(starts) < 2:
        return windows
    new = np.concatenate([[True], starts[1:] - ends[:-1] >= gap_ns])
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:] - 1, [len(starts) - 1]])
    return starts[first], ends[last]


def _within(windows: tuple[np.ndarray, np.ndarray], start: pl.Expr, end: pl.Expr) -> pl.Expr:
    """Does [start, end] lie inside one of the (merged) step windows?"""
    inside = pl.lit(False)
    for a, b in zip(windows[0].tolist(), windows[1].tolist(), strict=True):
        inside = inside | ((start >= a) & (end <= b))
    return inside


def utilization(trace: Trace, steps: Steps, device: int | None,
                samples: pl.DataFrame | None) -> Utilization:
    """Peak and mean utilization over the step windows: trace-derived and NVML/GPM side by side.

    A counter sample counts only when the time it averages lies inside a window: GPM values
    (and DCGM profiling fields) from their pair's first sample, ``gpm_from_ns`` (else the row
    before) to ``t_ns``; utilization.gpu from two driver periods before ``t_ns`` (a period,
    and up to a period until it is reported) to ``t_ns``. ``samples`` counts the
    utilization.gpu rows, ``gpm_samples`` the GPM rows."""
    if device is None:
        return Utilization(None, None)
    k = trace.kernels.filter(pl.col("device") == device)
    busy = iv.union(iv.from_durations(k["ts_ns"].to_numpy(), k["dur_ns"].to_numpy()))
    per = iv.per_window(busy, steps.start_ns, steps.end_ns) / np.maximum(steps.dur_ns, 1) * 100
    window_ns = max(int(steps.end_ns[-1] - steps.start_ns[0]), 1)
    trace_u = TraceUtilization(
        gpu_busy_pct_mean=float(iv.total(iv.clip(busy, int(steps.start_ns[0]),
                                                 int(steps.end_ns[-1]))) / window_ns * 100),
        gpu_busy_pct_peak_step=float(per.max()))
    if samples is None or samples.height == 0:
        return Utilization(trace_u, None)
    w = samples.filter(pl.col("gpu_index") == device).sort("t_ns")
    windows = _merged(iv.union(iv.of(steps.start_ns, steps.end_ns)), STEP_GAP_NS)
    period = util_period_ns(w)
    # utilization.gpu at t averages one driver period that ended up to a period before t
    util = w.filter(_within(windows, pl.col("t_ns") - 2 * period, pl.col("t_ns")))
    # GPM / DCGM profiling fields average the time since the pair's first sample
    first = pl.col("gpm_from_ns") if "gpm_from_ns" in w.columns else pl.lit(None, pl.Int64)
    since = pl.coalesce(first, pl.col("t_ns").shift(1))
    gpm_cols = [c for c in w.columns if c.startswith("gpm_") and c != "gpm_from_ns"]
    has_gpm = pl.any_horizontal([pl.col(c).is_not_null() for c in gpm_cols]) if gpm_cols \
        else pl.lit(False)
    gpm = w.filter(_within(windows, since, pl.col("t_ns")) & has_gpm)
    if util.height == 0 and gpm.height == 0:
        return Utilization(trace_u, NvmlUtilization(samples=0))
    nv: dict[str, Any] = {"samples": util.height, "gpm_samples": gpm.height,
                          "utilization_period_ms": round(period / 1e6, 1)}
    for col in ("gpu_util_pct", "mem_util_pct", "gpm_sm_util_pct", "gpm_sm_occupancy_pct",
                "gpm_tensor_util_pct", "gpm_dram_bw_util_pct"):
        rows = gpm if col.startswith("gpm_") else util
        if col in rows.columns and rows[col].null_count() < rows.height:
            nv[col.replace("_pct", "_pct_mean")] = float(rows[col].mean())  # type: ignore[arg-type]
            nv[col.replace("_pct", "_pct_peak")] = float(rows[col].max())  # type: ignore[arg-type]
    return Utilization(trace_u, NvmlUtilization(**nv))
