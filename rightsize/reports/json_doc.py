"""The ``rightsize analyze --format json`` document: the stable machine contract.

Input: an :class:`~rightsize.analyzers.analysis.Analysis`. Output: plain dicts/lists of JSON
types. Keys are documented in docs/json-contract.md; ``SCHEMA_VERSION`` changes whenever a key
is renamed or removed (adding keys does not change it). Times are milliseconds (``*_ms``),
sizes bytes, shares percent. A value that cannot be computed is ``null``, never 0.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from rightsize import __version__
from rightsize.analyzers.analysis import Analysis, RankAnalysis
from rightsize.analyzers.metrics.precision import precision_json

SCHEMA_VERSION = 1
NS_PER_MS = 1e6

DEFINITIONS = {
    "gpu_util_pct": "PyTorch Profiler TensorBoard plugin 0.4.3: union of kernel time on the "
    "device / step window (first step start to last step end)",
    "sm_efficiency_pct": "TensorBoard plugin Est. SM Efficiency: sum over time of "
    "min(1, summed blocks-per-SM of running kernels) / step window",
    "achieved_occupancy_pct": "TensorBoard plugin Est. Achieved Occupancy: kernel-duration-"
    "weighted mean of Kineto's 'est. achieved occupancy %' inside the step window",
    "steps": "TensorBoard plugin device-aware step bounds (ProfilerStep#N extended to the GPU "
    "work each step launched, trailing steps without or with truncated GPU work dropped); "
    "runtime calls recognised by current and 2021 category names",
    "breakdown_ms": "TensorBoard plugin step-time breakdown, mean per step: Kernel > Memcpy > "
    "Memset > Communication > Runtime > DataLoader > CPU Exec > Other, each charged only where "
    "no higher role ran; communication = nccl*/rccl* kernels and collective host ops",
    "tensor_core_kernel_pct": "share of the primary device's kernel time in kernels on the "
    "TensorBoard plugin's tensor-core name allowlist",
    "tensor_core_kernel_pct_extended": "as tensor_core_kernel_pct, with rightsize's list of "
    "Hopper/Blackwell/AMD matrix kernels (nvjet, sm90_xmma, cutlass3x, flash, Cijk_...) added",
    "hta": "HolisticTraceAnalysis 0.5.0 temporal breakdown: whole-µs times (start rounded up, end "
    "down), last ProfilerStep dropped by launch time, shares of the GPU span (first start to "
    "last end of kernels, memcpy, memset)",
    "idle_by_stream": "HTA idle-time breakdown: host wait (launch call started after the previous "
    "activity ended), kernel wait (gap < 30 µs), other",
    "peak_memory_bytes": "max 'Total Allocated' of the caching allocator's [memory] events on "
    "the primary device (the host for CPU-only traces)",
}


_NO_STEPS: dict[str, Any] = {"count": 0, "mean_ms": None, "min_ms": None, "max_ms": None,
                             "source": "none", "device_aware": False, "dropped": 0, "names": []}
_NO_METRICS: dict[str, Any] = {
    "device": None, "gpu_util_pct": None, "sm_efficiency_pct": None,
    "achieved_occupancy_pct": None, "tensor_core_kernel_pct": None,
    "tensor_core_kernel_pct_extended": None, "breakdown_ms": None, "hta": None,
    "peak_memory_bytes": None, "peak_reserved_bytes": None, "memory": [], "memcpy": [],
    "communication": None, "launch": None,
}


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / NS_PER_MS, 6)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _records(df: pl.DataFrame) -> list[dict[str, Any]]:
    return df.to_dicts()


def document(analysis: Analysis, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    primary = analysis.primary
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "rightsize", "version": __version__},
        "inputs": inputs,
        "devices": [d for r in analysis.ranks for d in _devices(r)],
        "steps": _steps(primary) if primary else _NO_STEPS,
        "metrics": _metrics(primary) if primary else _NO_METRICS,
        "diagnosis": _diagnosis(primary) if primary else _counters(analysis),
        "recommendations": [r.to_json() for r in primary.recommendations] if primary else [],
        "sizing": primary.sizing.to_json() if primary and primary.sizing else None,
        "precision": precision_json(primary.work, primary.device_match) if primary else None,
        "timeline": primary.timeline.to_json() if primary and primary.timeline else None,
        "top_kernels": _top_kernels(primary) if primary else [],
        "top_ops": _top_ops(primary) if primary else [],
        "ranks": [_rank(r) for r in analysis.ranks],
        "definitions": DEFINITIONS,
        "notes": sorted({n for r in analysis.ranks for n in r.notes}),
    }


def _devices(r: RankAnalysis) -> list[dict[str, Any]]:
    props = {row["device"]: row for row in r.trace.devices.to_dicts()}
    out = []
    for d in r.devices:
        p = props.get(d.device, {})
        out.append({
            "index": d.device,
            "rank": r.rank,
            "name": p.get("name"),
            "sm_count": p.get("sm_count"),
            "memory_bytes": p.get("memory_bytes"),
            "compute_capability": (f"{p['compute_major']}.{p['compute_minor']}"
                                   if p.get("compute_major") is not None else None),
            "primary": d.device == r.primary_device,
            "metrics": {
                "gpu_util_pct": _r(d.gpu_util_pct),
                "sm_efficiency_pct": _r(d.sm_efficiency_pct),
                "achieved_occupancy_pct": _r(d.achieved_occupancy_pct),
                "kernel_ms": _ms(d.kernel_ns),
            },
        })
    return out


def _steps(r: RankAnalysis) -> dict[str, Any]:
    s = r.steps
    durs = s.dur_ns
    return {
        "count": s.count,
        "mean_ms": _ms(float(durs.mean())) if s.count else None,
        "min_ms": _ms(int(durs.min())) if s.count else None,
        "max_ms": _ms(int(durs.max())) if s.count else None,
        "source": s.source,
        "device_aware": s.device_aware,
        "dropped": s.dropped,
        "names": list(s.names),
    }


def _metrics(r: RankAnalysis) -> dict[str, Any]:
    dev = r.device(r.primary_device)
    b = r.breakdown
    t = r.temporal
    peak = r.peak_memory
    comm = r.communication
    return {
        "device": r.primary_device,
        "gpu_util_pct": _r(dev.gpu_util_pct) if dev else None,
        "sm_efficiency_pct": _r(dev.sm_efficiency_pct) if dev else None,
        "achieved_occupancy_pct": _r(dev.achieved_occupancy_pct) if dev else None,
        "tensor_core_kernel_pct": _r(r.tensor_cores.plugin_pct),
        "tensor_core_kernel_pct_extended": _r(r.tensor_cores.extended_pct),
        "breakdown_ms": None if b is None else {
            "kernel": _ms(b.kernel_ns), "memcpy": _ms(b.memcpy_ns), "memset": _ms(b.memset_ns),
            "communication": _ms(b.communication_ns), "runtime": _ms(b.runtime_ns),
            "dataloader": _ms(b.dataloader_ns), "cpu_exec": _ms(b.cpu_exec_ns),
            "other": _ms(b.other_ns), "step": _ms(b.step_ns),
        },
        "hta": None if t is None else {
            "idle_pct": _r(t.pct(t.idle_us)),
            "compute_pct": _r(t.pct(t.compute_us)),
            "non_compute_pct": _r(t.pct(t.non_compute_us)),
            "span_ms": _ms(t.span_us * 1000),
            "idle_by_stream": [
                {"stream": s.stream, "host_wait_ms": _ms(s.host_wait_us * 1000),
                 "kernel_wait_ms": _ms(s.kernel_wait_us * 1000),
                 "other_ms": _ms(s.other_us * 1000)} for s in r.idle
            ],
        },
        "peak_memory_bytes": peak.peak_allocated_bytes if peak else None,
        "peak_reserved_bytes": peak.peak_reserved_bytes if peak else None,
        "memory": [
            {"device": m.device, "peak_allocated_bytes": m.peak_allocated_bytes,
             "peak_reserved_bytes": m.peak_reserved_bytes, "relative": m.relative}
            for m in r.memory
        ],
        "memcpy": [
            {"direction": c["direction"], "host_memory": c["host_memory"], "count": c["count"],
             "bytes": c["bytes"], "time_ms": _ms(c["busy_ns"]), "gbps": _r(c["gbps"])}
            for c in _records(r.copies)
        ],
        "communication": None if comm is None else {
            "time_ms": _ms(comm.comm_ns), "overlapped_ms": _ms(comm.overlapped_ns),
            "overlap_pct": _r(comm.overlap_pct),
        },
        "launch": _launch(r),
    }


def _launch(r: RankAnalysis) -> dict[str, Any]:
    s = r.launch
    return {
        "launches": s.launches, "median_launch_delay_us": s.median_launch_delay_us,
        "p95_launch_delay_us": _r(s.p95_launch_delay_us, 2), "median_cpu_us": s.median_cpu_us,
        "median_gpu_us": s.median_gpu_us, "short_kernels": s.short_kernels,
        "runtime_outliers": s.runtime_outliers, "launch_delay_outliers": s.launch_delay_outliers,
    }


def _top_kernels(r: RankAnalysis) -> list[dict[str, Any]]:
    cls: dict[str, tuple[str, str]] = {}
    if r.work is not None and r.diagnosis is not None and r.diagnosis.device == "gpu":
        for row in r.work.select("name", "work", "signal").unique("name").iter_rows():
            cls[row[0]] = (row[1], row[2])
    return [
        {"name": k["name"], "calls": k["calls"], "total_ms": _ms(k["total_ns"]),
         "mean_us": _r(k["mean_ns"] / 1000, 3), "max_us": _r(k["max_ns"] / 1000, 3),
         "pct": _r(k["pct"]), "class": cls.get(k["name"], (None, None))[0],
         "signal": cls.get(k["name"], (None, None))[1]}
        for k in _records(r.top_kernels)
    ]


def _counters(analysis: Analysis) -> dict[str, Any] | None:
    d = analysis.counters
    if d is None:
        return None
    return {
        "bound": d.bound.value if d.bound else None, "confidence": d.confidence,
        "device": d.device, "shares_pct": {k: _r(v, 2) for k, v in d.shares_pct.items()},
        "evidence": list(d.evidence), "signals": [], "signal_pct": {},
        "thresholds": d.thresholds.as_dict(), "utilization": d.utilization,
        "device_match": None,
    }


def _diagnosis(r: RankAnalysis) -> dict[str, Any] | None:
    d = r.diagnosis
    if d is None:
        return None
    groups: list[dict[str, Any]] = []
    if r.work is not None and r.work.height:
        key = "group" if "group" in r.work.columns else "name"
        g = (r.work.group_by(key, "work", "signal").agg(pl.col("dur_ns").sum(), calls=pl.len())
             .sort(["dur_ns", key], descending=[True, False]).head(15))
        groups = [{"group": row[key], "class": row["work"], "signal": row["signal"],
                   "time_ms": _ms(row["dur_ns"]), "calls": row["calls"]} for row in g.to_dicts()]
    return {
        "bound": d.bound.value if d.bound else None,
        "confidence": d.confidence,
        "device": d.device,
        "shares_pct": {k: _r(v, 2) for k, v in d.shares_pct.items()},
        "evidence": list(d.evidence),
        "signals": groups,
        "signal_pct": {k: _r(v, 2) for k, v in d.signal_pct.items()},
        "thresholds": d.thresholds.as_dict(),
        "utilization": d.utilization,
        "device_match": None if r.device_match is None else {
            "reported": r.device_match.reported_name,
            "catalog": r.device_match.gpu.name if r.device_match.gpu else None,
            "note": r.device_match.note},
    }


def _top_ops(r: RankAnalysis) -> list[dict[str, Any]]:
    return [
        {"name": o["name"], "calls": o["calls"], "host_ms": _ms(o["host_ns"]),
         "gpu_ms": _ms(o["gpu_ns"]), "kernels": o["kernels"]}
        for o in _records(r.top_ops)
    ]


def _rank(r: RankAnalysis) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "path": r.trace.meta.path,
        "world_size": r.trace.meta.world_size,
        "steps": _steps(r),
        "metrics": _metrics(r),
    }
