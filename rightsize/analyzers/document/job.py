"""Document nodes of a job across ranks: the document's ``job`` object (only when several
traces are the ranks of one job).

Made by ``rightsize/analyzers/job`` (``job.py`` and the modules it calls), read back from JSON
by the codec. Times in ms (per step: summed over a step, averaged over steps and over ranks
unless the name says otherwise), bandwidths in GB/s (1e9 bytes per second) as nccl-tests
reports them, shares in percent. Keys and meanings: docs/json-contract.md. Pure; no polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from rightsize.node import Node, node, num


@node
class JobRank(Node):
    """One rank of the job: where it ran, its steps, and what its collectives cost it."""

    rank: int | None
    path: str
    node: str | None  # hostname where recorded, else "node N" when inferred, else None
    pid: str | None  # the host process that recorded the steps
    device: int | None  # the GPU's index on its node
    steps: int
    step_ms_mean: float | None = num(6)
    step_ms: tuple[float, ...] = num(6)  # each step, in order
    shares_ms: Mapping[str, float | None] = num(6)  # diagnosis shares, mean per step
    wait_ms_per_step: float | None = num(6)  # in collectives, waiting for the last rank
    transfer_ms_per_step: float | None = num(6)  # the rest of its collective kernels' time
    exposed_ms_per_step: float | None = num(6)  # collective time no compute overlapped
    last_calls: int = 0  # collectives it arrived last at (ties excluded)


@node
class CollectiveType(Node):
    """All matched calls of one collective type (``job.collectives``)."""

    collective: str  # allreduce, allgather, reducescatter, alltoall, broadcast, reduce, ...
    calls: int  # matched calls (one per call, not per rank)
    group_size: int | None  # ranks per call (the largest group seen)
    bytes_per_call: float | None = num(1)  # mean nccl-tests size of the calls that record one
    time_ms_per_step: float = num(6)  # kernel time, mean over ranks
    wait_ms_per_step: float = num(6)  # of which waiting for the last rank
    transfer_ms_per_step: float = num(6)  # shortest kernel per call, summed
    exposed_ms_per_step: float = num(6)  # not overlapped by compute, mean over ranks
    overlap_pct: float | None = num(2)  # of the kernel time, overlapped by compute
    algbw_gbs: float | None = num(3)  # total size / total transfer time of sized calls
    busbw_gbs: float | None = num(3)  # algbw x nccl-tests' factor for the type and group size
    link_peak_gbs: float | None = num(1)  # per direction, of the fabric the calls crossed
    busbw_pct_of_peak: float | None = num(2)
    # the transfer the communication model (sizing/comm.py) gives these calls on the job's own
    # GPU and layout, beside the measured ``transfer_ms_per_step`` (no key unless every call
    # records its size)
    model_transfer_ms_per_step: float | None = num(6, default=None, omit_none=True)


@node
class CollectiveCheck(Node):
    """One collective type, size and group of the job against the communication model on the
    job's own fabric (``job.collective_checks``; analyzers/job/fabric_check.py)."""

    collective: str
    bytes: int  # nccl-tests size of each call
    group_size: int
    calls: int
    transfer_us: float = num(3)  # median measured transfer (shortest rank's kernel) per call
    model_us: float = num(3)  # the model on the job's layout, nccl-tests' latency
    expected_us: float = num(3)  # the same with the latency the job's small calls show
    algorithm: str  # what NCCL runs it with: ring, tree, nvls, nvls_tree, p2p
    protocol: str  # LL, LL128, Simple
    busbw_gbs: float | None = num(3)  # measured, nccl-tests' definition
    expected_busbw_gbs: float | None = num(3)
    slowdown: float = num(3)  # transfer / expected
    verdict: str  # expected | slow (at least 2x, 1 MiB and more)
    cause: str  # for a slow one: what likely holds it below the fabric's rate


@node
class CollectiveCall(Node):
    """One matched call: each rank's arrival, the wait on the last rank and the transfer."""

    key: str  # "pg 0 #17" (process group, sequence number) or "stream 84 #3" (order)
    collective: str
    step: int | None  # index of the step holding it on most ranks
    ranks: tuple[int, ...]
    arrival_ms: tuple[float, ...] = num(6)  # each rank's arrival after the first one
    last_rank: int | None  # None: the last two arrived together (within the tie tolerance)
    late_ms: float = num(6)  # last arrival - second-last arrival
    skew_ms: float = num(6)  # last arrival - first arrival
    transfer_ms: float = num(6)  # the shortest rank's kernel
    wait_ms_mean: float = num(6)  # mean over ranks of last arrival - own arrival
    bytes: int | None
    algbw_gbs: float | None = num(3)
    busbw_gbs: float | None = num(3)


@node
class Straggler(Node):
    """A rank that arrives last at the collectives more often than chance (``job.stragglers``,
    ordered by impact: the time the others waited for it alone, per step)."""

    rank: int
    last_calls: int  # calls it was last at, by more than the tie tolerance
    calls: int  # calls it took part in
    last_pct: float = num(2)
    late_ms_per_step: float = num(6)  # sum of (its arrival - the second-last), per step
    late_ms_mean: float = num(6)  # per call it was last at
    last_pct_by_type: Mapping[str, float] = num(2)  # collective type -> % of those calls
    cause: str  # compute | copy | dataloader | host | unknown: what it did instead
    cause_ms_per_step: float | None = num(6)  # its lead-in beyond the median rank's, per step
    excess_ms_per_step: Mapping[str, float] = num(6)  # each lead-in part beyond the median
    # its step starts after the median rank's (mean over steps; null: one rank's steps only)
    step_start_late_ms: float | None = num(6, default=None)
    text: str = ""


@node
class JobCost(Node):
    """What the whole job costs where it ran: all its ranks' GPUs together."""

    gpu: str
    gpus: int  # one per rank (world size)
    usd_per_gpu_hour: float = num(4)
    usd_per_hour: float = num(4)  # gpus x the price
    usd_per_step: float | None = num(8)
    usd_per_1k_steps: float | None = num(4)
    price_provider: str | None = None
    price_date_seen: str | None = None


@node
class Job(Node):
    """The ranks of one distributed job analyzed together."""

    world_size: int | None
    rank_count: int  # traces read (ranks present)
    backend: str | None
    nodes: int | None  # None: not recorded and not inferable
    gpus_per_node: int | None
    nodes_basis: str  # how nodes were found: hostnames, inferred (and from what), unknown
    device: str | None  # the GPU every rank ran on (catalog name where matched)
    fabric: str  # what joins the ranks, in words
    step_ms_mean: float | None = num(6)  # mean over ranks of their mean step
    step_ms_spread: float | None = num(6)  # slowest rank's mean step - fastest's
    matched_by: tuple[str, ...] = ()  # how calls were matched across ranks
    calls_total: int = 0
    # collective kernel time, mean over ranks; of it, waiting for the last rank; not overlapped
    communication_ms_per_step: float | None = num(6, default=None)
    wait_ms_per_step: float | None = num(6, default=None)
    exposed_ms_per_step: float | None = num(6, default=None)
    overlap_pct: float | None = num(2, default=None)
    ranks: tuple[JobRank, ...] = ()
    stragglers: tuple[Straggler, ...] = ()
    collectives: tuple[CollectiveType, ...] = ()
    calls: tuple[CollectiveCall, ...] = ()  # the first CALLS_SHOWN, in time order
    # each type, size and group against the model on the job's fabric (fabric_check.py)
    collective_checks: tuple[CollectiveCheck, ...] = ()
    cost: JobCost | None = None
    notes: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
