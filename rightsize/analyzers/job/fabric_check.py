"""A job's collectives against the communication model on the job's own fabric: the time each
call's transfer should take, and the calls that ran far below the fabric's rate.

Input: the matched calls (``matching``: per call its type, nccl-tests size, group size and
transfer -- the shortest rank's kernel, the wait for late ranks left out), the job's
:class:`~rightsize.analyzers.sizing.comm_layout.Layout` (its GPU, ranks per node, the
catalog's links and network) and the :class:`~rightsize.analyzers.sizing.comm.CommModel`.
Output: per type and size a :class:`CollectiveCheck` (``job.collective_checks``), and the
expected transfer per call that ``job.collectives[].model_transfer_ms_per_step`` sums.

The expected time is the model's (NCCL's algorithm and protocol for the size, on the job's
layout) with the latency this trace shows instead of the nccl-tests figure: a call's fixed
cost in a real job (launch, synchronization with compute on the same GPU) is measured by the
job's own small calls of the type -- the median transfer of those of at most
:attr:`Thresholds.small_bytes` -- and replaces the model's time at 8 bytes; without small calls
the model's own latency stands. A call is ``slow`` when its transfer is at least
:attr:`Thresholds.slow` x the expected time and it is large enough for bandwidth to decide
(:attr:`Thresholds.bandwidth_bytes`); the likely cause is named by the fabric it crossed.
Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from rightsize.analyzers.document.job import CollectiveCheck
from rightsize.analyzers.job import names
from rightsize.analyzers.sizing.comm import CommModel, load_model
from rightsize.analyzers.sizing.comm_layout import Layout


@dataclass(frozen=True, slots=True)
class Thresholds:
    # a call at most this large is latency-bound: its transfer is the trace's own latency
    # (NCCL's LL protocol carries up to ~64 KiB per rank in a few µs of wire time)
    small_bytes: int = 64 << 10
    # ... and at least this large is bandwidth-bound: a slow one says the fabric is slow
    bandwidth_bytes: int = 1 << 20
    # this many times the expected transfer is "far below the fabric's rate": twice the
    # model's worst leave-one-system-out median error (docs/comm.md), not noise
    slow: float = 2.0


THRESHOLDS = Thresholds()


def latency_us(calls: pl.DataFrame, th: Thresholds = THRESHOLDS) -> dict[str, float]:
    """Per collective type, the median transfer (µs) of its small calls (none: no key)."""
    if calls.height == 0:
        return {}
    small = calls.filter(pl.col("bytes").is_not_null() & (pl.col("bytes") <= th.small_bytes)
                         & (pl.col("transfer_ns") > 0))
    out: dict[str, float] = {}
    for kind, ns in small.group_by("collective").agg(pl.col("transfer_ns")).iter_rows():
        out[str(kind)] = statistics.median(ns) / 1e3
    return out


def expected_us(kind: str, size: float, group: int, layout: Layout, model: CommModel,
                latency: dict[str, float]) -> tuple[float, float, str, str] | None:
    """(expected µs with the trace's latency, the model's µs, algorithm, protocol)."""
    span = layout.span(group)
    t = model.timing(kind, size, span)
    if t is None:
        return None
    if kind not in latency or span.ranks < 2:
        return t.us, t.us, t.algorithm, t.protocol
    floor = model.timing(kind, 8.0, span)
    base = floor.us if floor is not None else 0.0
    return latency[kind] + max(0.0, t.us - base), t.us, t.algorithm, t.protocol


def expected_ms(calls: pl.DataFrame, layout: Layout | None, ranks: int, per_step: float,
                model: CommModel | None, latency: dict[str, float]) -> float | None:
    """The expected transfer of ``calls`` per step (ms); None unless every call records a
    size and a type the model knows."""
    if layout is None or calls.height == 0 or calls["bytes"].null_count():
        return None
    model = model or load_model()
    total = 0.0
    for kind, size, group in calls.select("collective", "bytes", "group_size").iter_rows():
        got = expected_us(kind, size, group or ranks, layout, model, latency)
        if got is None:
            return None
        total += got[0]
    return total / per_step / 1e3


def checks(calls: pl.DataFrame, layout: Layout | None, ranks: int, model: CommModel | None,
           th: Thresholds = THRESHOLDS) -> tuple[CollectiveCheck, ...]:
    """One check per collective type, size and group size of the sized calls."""
    if calls.height == 0:
        return ()
    sized = calls.filter(pl.col("bytes").is_not_null() & (pl.col("transfer_ns") > 0))
    if layout is None or sized.height == 0:
        return ()
    model = model or load_model()
    latency = latency_us(calls, th)
    out = []
    groups = sized.with_columns(pl.col("group_size").fill_null(ranks)).group_by(
        "collective", "bytes", "group_size").agg(pl.col("transfer_ns").median(), pl.len())
    for kind, size, group, ns, n in groups.sort("collective", "bytes").iter_rows():
        got = expected_us(kind, size, group, layout, model, latency)
        if got is None:
            continue
        out.append(_check(kind, int(size), int(group), int(n), ns / 1e3, got, layout, th))
    return tuple(out)


def _check(kind: str, size: int, group: int, calls: int, transfer_us: float,
           got: tuple[float, float, str, str], layout: Layout,
           th: Thresholds) -> CollectiveCheck:
    expected, model_us, algorithm, protocol = got
    factor = names.bus_factor(kind, group)
    busbw = size / (transfer_us * 1e3) * factor if factor and transfer_us else None
    model_bus = size / (expected * 1e3) * factor if factor and expected else None
    slowdown = transfer_us / expected if expected else 0.0
    slow = slowdown >= th.slow and size >= th.bandwidth_bytes
    return CollectiveCheck(
        collective=kind, bytes=size, group_size=group, calls=calls, transfer_us=transfer_us,
        model_us=model_us, expected_us=expected, algorithm=algorithm, protocol=protocol,
        busbw_gbs=busbw, expected_busbw_gbs=model_bus, slowdown=slowdown,
        verdict="slow" if slow else "expected", cause=cause(layout, group) if slow else "")


def cause(layout: Layout, group: int) -> str:
    """What likely runs a collective far below its fabric's rate, by the fabric it crosses."""
    span = layout.span(group)
    if span.nodes > 1:
        return ("below the network's rate: a mis-tuned NIC (GPUDirect RDMA off, "
                "NCCL_IB_HCA or NCCL_SOCKET_IFNAME picking fewer or slower ports, a TCP "
                "fallback) or a ring crossing nodes more often than it must (ranks not "
                "placed node by node)")
    if span.link_class == "pcie":
        return ("below PCIe's rate: peer-to-peer off or routed through the CPU (ACS, an "
                "IOMMU), the traffic staged through host memory")
    return ("below the GPU link's rate: peer-to-peer off (NCCL_P2P_DISABLE, a container "
            "without IPC: traffic through host memory) or compute kernels holding the SMs "
            "the collective needs")


def slow_words(found: Sequence[CollectiveCheck]) -> list[str]:
    """The job's notes naming each slow collective."""
    return [f"{c.collective} of {c.bytes:,} bytes ({c.calls} call{'s' if c.calls > 1 else ''}"
            f", {c.group_size} ranks) ran at {c.slowdown:.1f}x the {c.expected_us:.1f} µs "
            f"the model expects on this fabric ({c.algorithm}/{c.protocol}): {c.cause}"
            for c in found if c.verdict == "slow"]
