"""Host-to-device copies worth pinning, and the inputs of the pinned-copy what-if.

Input: one rank's trace, steps and diagnosis. Output: the large copies from one kind of host
memory, and the measures ``advise._pinned_what_if`` reads. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
import polars as pl

from rightsize.analyzers.document.diagnosis import Diagnosis
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.per_step import exclusive_windows
from rightsize.analyzers.metrics.steps import Steps
from rightsize.analyzers.thresholds import SIZING
from rightsize.traces.schema import Trace

# A host-to-device copy this large from pageable memory is worth pinning: the staging copy
# costs time; below, the reads of a scalar or a few KiB (loss.item()) are latency, not bandwidth.
PAGEABLE_COPY_BYTES = 1 << 20


def large_h2d(trace: Trace, host_memory: str) -> pl.DataFrame:
    """Host-to-device copies of :data:`PAGEABLE_COPY_BYTES` or more from ``host_memory``
    (``"pageable"`` or ``"pinned"``)."""
    return trace.transfers.filter(
        (pl.col("kind") == "memcpy") & (pl.col("direction") == "HtoD")
        & (pl.col("src_memory") == host_memory) & (pl.col("bytes") >= PAGEABLE_COPY_BYTES))


def pinned_model(trace: Trace, steps: Steps, pageable: pl.DataFrame, diag: Diagnosis,
                 link_gbs: float | None) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The pinned-copy what-if's inputs (``advise._pinned_what_if``), % of the step: the
    pageable copies' cost (their DMA and the runtime calls that block the host while it
    stages them), the same bytes at the pinned rate (this trace's pinned host-to-device
    copies of 1 MiB or more where it has some, else the link at the achievable fraction), and
    the rest of the host and idle time; and the same three in ms per step (``diagnosis/
    steady.py`` leaves one-off steps out of the what-if with them)."""
    if pageable.height == 0 or diag.step_ns <= 0:
        return {}, {}
    window = iv.union(iv.of(steps.start_ns, steps.end_ns))
    calls = trace.runtime.filter(pl.col("correlation").is_in(pageable["correlation"].implode()))
    dma = iv.intersect(window, iv.union(iv.from_durations(pageable["ts_ns"].to_numpy(),
                                                          pageable["dur_ns"].to_numpy())))
    cost = iv.intersect(window, iv.union_all(dma, iv.union(iv.from_durations(
        calls["ts_ns"].to_numpy(), calls["dur_ns"].to_numpy()))))
    inside = pageable.filter((pl.col("ts_ns") >= int(steps.start_ns[0]))
                             & (pl.col("ts_ns") < int(steps.end_ns[-1])))
    pinned = large_h2d(trace, "pinned")
    rate = (float(pinned["bytes"].sum()) / float(pinned["dur_ns"].sum()) if pinned.height
            and pinned["dur_ns"].sum() else
            link_gbs * SIZING.link_achievable_fraction if link_gbs else None)  # GB/s = bytes/ns
    if rate is None or rate <= 0:
        return {}, {}
    s = cast(Mapping[str, float], diag.shares_pct)
    cost_pct = 100.0 * iv.total(cost) / diag.step_ns
    staging = cost_pct - 100.0 * iv.total(dma) / diag.step_ns
    lo, hi = exclusive_windows(steps)
    cost_ms, dma_ms = iv.per_window(cost, lo, hi) / 1e6, iv.per_window(dma, lo, hi) / 1e6
    which = np.searchsorted(lo, inside["ts_ns"].to_numpy(), side="right") - 1
    step_bytes = np.bincount(which[which >= 0], inside["bytes"].to_numpy()[which >= 0],
                             minlength=len(lo))
    host_idle = np.array([st.shares_ms.get("host", 0.0) + st.shares_ms.get("idle", 0.0)
                          for st in diag.per_step]) if len(diag.per_step) == len(lo) \
        else np.zeros(len(lo))
    return ({"pageable_cost_pct": cost_pct,
             "pinned_copy_pct": 100.0 * float(inside["bytes"].sum()) / rate / diag.step_ns,
             "host_rest_pct": max(s["host"] + s["idle"] - staging, 0.0)},
            {"pageable_cost_pct": cost_ms, "pinned_copy_pct": step_bytes / rate / 1e6,
             "host_rest_pct": np.maximum(host_idle - (cost_ms - dma_ms), 0.0)})
