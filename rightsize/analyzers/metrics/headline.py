"""The document's ``metrics`` of one rank (section ``metrics``) and the two values it shares
with the tuning rules and sizing: HTA's breakdowns (``hta``) and the peak memory per device
(``memory_peaks``).

Input: a section's view of one rank (:class:`~rightsize.analyzers.sections.SectionInput`).
Output: :class:`~rightsize.analyzers.document.metrics.Metrics` at full precision (its fields
round when written), the primary device's figures at the top. Definitions: the modules that
compute each part (``tb_plugin``, ``hta``, ``kernels``). Pure.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import polars as pl

from rightsize.analyzers.document.metrics import Hta, Memcpy, MemoryPeak, Metrics
from rightsize.analyzers.metrics import hta, kernels, tb_plugin

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput


def temporal(rank: SectionInput) -> Hta | None:
    """Section ``hta``: HTA's temporal breakdown with its idle time per stream, from one set of
    kept rows freed on return (a row per kernel, copy and runtime call: not to be held through
    the rest of the analysis). ``None`` without GPU activity."""
    rows = hta.kept_rows(rank.trace)
    t = hta.temporal_breakdown(rank.trace, rows=rows)
    idle = tuple(hta.idle_breakdown(rank.trace, rows=rows))
    return None if t is None else dataclasses.replace(t, idle_by_stream=idle)


def memory(rank: SectionInput) -> tuple[MemoryPeak, ...]:
    """Section ``memory_peaks``: the caching allocator's peak per device (-1: the host)."""
    return tuple(kernels.memory_peaks(rank.trace.memory))


def peak(rank: SectionInput) -> MemoryPeak | None:
    """Peak of the primary device, else of the host for CPU-only traces (needs
    ``memory_peaks`` and ``device_use``)."""
    by_dev = {m.device: m for m in rank["memory_peaks"]}
    return by_dev.get(rank.device if rank.device is not None else -1)


def section(rank: SectionInput) -> Metrics:
    """Section ``metrics`` (needs ``step_ranges``, ``device_use``, ``hta``, ``memory_peaks``)."""
    trace, steps, primary = rank.trace, rank.steps, rank.device
    dev = rank["device_use"].device(primary)
    prim = trace.kernels.filter(pl.col("device") == primary) if primary is not None \
        else trace.kernels.clear()
    tc = kernels.tensor_cores(prim)
    top = peak(rank)
    window = (int(steps.start_ns[0]), int(steps.end_ns[-1])) if steps.count else None
    return Metrics(
        device=primary,
        gpu_util_pct=dev.gpu_util_pct if dev else None,
        sm_efficiency_pct=dev.sm_efficiency_pct if dev else None,
        achieved_occupancy_pct=dev.achieved_occupancy_pct if dev else None,
        tensor_core_kernel_pct=tc.plugin_pct,
        tensor_core_kernel_pct_extended=tc.extended_pct,
        breakdown_ms=tb_plugin.breakdown(trace, steps, rank.context.breakdown_options)
        if steps.count else None,
        hta=rank["hta"],
        peak_memory_bytes=top.peak_allocated_bytes if top else None,
        peak_reserved_bytes=top.peak_reserved_bytes if top else None,
        memory=rank["memory_peaks"],
        memcpy=tuple(Memcpy(c["direction"], c["host_memory"], c["count"], c["bytes"],
                            c["busy_ns"] / 1e6 if c["busy_ns"] is not None else None, c["gbps"])
                     for c in kernels.copies(trace.transfers).to_dicts()),
        communication=kernels.communication(prim, *window)
        if window and prim.height else None,
        launch=hta.launch_stats(trace),
    )
