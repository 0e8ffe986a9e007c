"""Document nodes for GPU sizing, the precision mix and the timelines: one class per concept,
made by the analyzers (``sizing/projection.py``, ``metrics/precision.py``, ``metrics/timeline.py``,
``metrics/host_timeline.py``) and read back from JSON by the codec.

Keys and meanings: docs/json-contract.md and docs/sizing.md. Keys a newer rightsize adds are
kept in ``extra`` until they get their own field. Pure; no polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any

from rightsize.node import OMIT_NONE, Node, node, num


class Objective(StrEnum):
    """What sizing optimizes (``--objective``; sizing/objective.py)."""

    TIME = "time"  # the cheapest GPU no slower than now beyond --slower-ok
    COST = "cost"  # the cheapest per step, slower allowed


class Verdict(StrEnum):
    OVER_PROVISIONED = "over-provisioned"
    RIGHT_SIZED = "right-sized"
    UNDER_PROVISIONED = "under-provisioned"


@node
class Candidate(Node):
    """One GPU (or N of them) for the measured workload: the ``sizing.candidates`` items."""

    gpu: str
    gpus: int
    fits_memory: bool | None  # None: peak memory unknown
    projected_step_ms: float | None = num(4)
    usd_per_hour: float | None = num(4)  # all ``gpus`` together, times ``ranks`` in a job
    usd_per_1k_steps: float | None = num(4)
    energy_j_per_step: float | None = num(4)  # TDP x time: an upper bound
    price_provider: str | None = None
    price_instance: str | None = None
    price_date_seen: str | None = None
    meets_constraints: bool = True
    precision_used: str = "fp32"  # a Precision value
    parallelism: str = ""
    interconnect: str = ""
    # the range: the GPU part's validation error, and the host's move between machines
    projected_step_ms_low: float | None = num(4, default=None)
    projected_step_ms_high: float | None = num(4, default=None)
    consumer: bool = False  # a consumer GPU (recommended only with --include-consumer)
    like_for_like: bool = True  # False: communication could not be carried over (see warnings)
    recommendable: bool = True  # False: consumer, missing precision or not like-for-like
    warnings: tuple[str, ...] = ()
    # meets the sizing objective: no slower than now beyond --slower-ok (objective time)
    meets_objective: bool = True
    # one trace of an N-rank job: the costs and energy count all N x ``gpus`` GPUs (no key
    # for a single-rank job)
    ranks: int | None = field(default=None, metadata={OMIT_NONE: True})
    # a job's candidate: the exposed communication per step its projected step holds (the
    # measured share where the candidate keeps the measured GPU and layout, else the
    # communication model's, sizing/comm.py) and the layout and fabric it is projected on
    # (no keys for a single-rank run)
    communication_ms: float | None = num(4, default=None, omit_none=True)
    fabric: str | None = field(default=None, metadata={OMIT_NONE: True})
    # the GPU part of the projected step (kernels, copies and communication: what
    # ``steps.gpu_ms`` measures on the current GPU) and its range, the validation error
    # between the two GPUs (sizing/ranges.py); None without a projection
    projected_gpu_ms: float | None = num(4, default=None)
    projected_gpu_ms_low: float | None = num(4, default=None)
    projected_gpu_ms_high: float | None = num(4, default=None)
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys of a newer rightsize


@node
class Sizing(Node):
    """The ``sizing`` object of the document: every candidate and the recommendation."""

    current: str | None  # catalog name of the measured device; None: CPU-only or unknown
    recommended: str | None
    recommended_gpus: int
    verdict: Verdict | None  # None when there is no current GPU to judge
    savings_pct: float | None = num(1)  # cost per 1k steps, current vs recommended
    candidates: tuple[Candidate, ...] = ()
    reason: str = ""
    current_note: str = ""  # how the device was matched, or why not
    objective: Objective | None = None  # None: a document older than the key
    slower_ok_pct: float | None = None  # objective time: how much slower than now is allowed
    frontier: tuple[str, ...] = ()  # GPUs no other beats on both cost and step, cheapest first
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys of a newer rightsize

    def candidate(self, gpu: str | None, gpus: int = 1) -> Candidate | None:
        return next((c for c in self.candidates if c.gpu == gpu and c.gpus == gpus), None)


@node
class GroupPrecision(Node):
    group: str | None  # None: a kernel group without a name (an nsys export's empty strings)
    precision: str | None  # None: neither the name nor a recorded dtype says
    time_ms: float = num(4)


@node
class PrecisionMix(Node):
    """Time-weighted precision of the primary device's kernels: the document's ``precision``."""

    workload: str | None  # dominant precision of compute-bound time; None: nothing says
    time_pct: Mapping[str, float] = num(2)  # precision -> % of the kernel time with one known
    unknown_pct: float = num(2)  # % of kernel time with no precision evidence
    groups: tuple[GroupPrecision, ...] = ()  # by time, longest first
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys of a newer rightsize


@node
class Timeline(Node):
    """The document's ``timeline``: buckets from the first step's start."""

    bucket_ms: float
    t_ms: tuple[float, ...] = num(4)  # bucket starts from the first step's start
    trace_busy_pct: tuple[float, ...] = num(2)
    nvml_gpu_util_pct: tuple[float | None, ...] | None = num(2, default=None, omit_none=True)


@node
class HostTimeline(Node):
    """Host samples of a run directory over time: the document's ``host_timeline``."""

    t_s: tuple[float, ...]  # from the first sample
    cpu_util_pct: tuple[float | None, ...]  # whole machine, 0-100
    job_cpu_util_pct: tuple[float | None, ...]  # the job's process tree, 100 = one core
    job_rss_bytes: tuple[int | None, ...]
    dataloader_workers: tuple[int | None, ...]
    cpu_count: int | None
    window_s: tuple[float, ...] | None  # [start, end] of the profiled steps
