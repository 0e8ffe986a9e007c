"""Document classes for what was read and measured: inputs, devices, steps, metrics, top tables.

Each class is one object of the ``rightsize analyze --format json`` document (keys in
docs/json-contract.md), in key order. Values are already rounded as published: times in ms
(``*_ms``) or µs (``*_us``), sizes in bytes, shares in percent; ``None`` is JSON ``null``.
Built by :mod:`rightsize.analyzers.document.build`, encoded by
:mod:`rightsize.analyzers.document.codec`. Pure; no polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from rightsize.node import Node, internal, key, node, num


@node
class Tool(Node):
    name: str
    version: str


@node
class InputWindow(Node):
    """The steps a trace was analyzed over when not all of it: ``reason`` "asked" (--steps)
    or "memory budget" (the whole trace needs about ``need_bytes`` to analyze, more than
    ``budget_bytes``; the window about ``window_need_bytes``: traces/budget.py). ``by``
    "time": the trace has no steps, and first/last_step are slices of its time, each holding
    as many events, of ``steps_in_trace`` (traces/window.py)."""

    first_step: int
    last_step: int
    steps_in_trace: int
    reason: str
    need_bytes: int | None = None
    window_need_bytes: int | None = None
    budget_bytes: int | None = None
    by: str | None = field(default=None, metadata={"omit_none": True})


@node
class InputFile(Node):
    """One file read. ``rank``/``events`` exist for traces, ``kernels`` for kernel rows
    (Nsight Compute CSV), ``samples`` for GPU samples (metric logs): each key only when the
    file's reader gave it (a trace's ``rank`` is null when the trace does not know it)."""

    path: str
    format: str
    bytes: int
    rank: int | None = None
    events: int | None = None
    kernels: int | None = None
    samples: int | None = None
    run_status: str | None = None  # "interrupted": its run directory was left mid-run
    window: InputWindow | None = None  # read over a window of its steps (traces/window.py)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _present(self, name: str) -> bool:
        if name in ("run_status", "window"):
            return getattr(self, name) is not None
        if name == "rank":  # a trace's: it comes with its events
            return self.events is not None
        if name in ("events", "kernels", "samples"):
            return getattr(self, name) is not None
        return True


@node
class DeviceMetrics(Node):
    """The TensorBoard plugin's GPU metrics of one device over the step window
    (``metrics/tb_plugin.py``)."""

    gpu_util_pct: float | None = num(4)
    sm_efficiency_pct: float | None = num(4)
    achieved_occupancy_pct: float | None = num(4)
    kernel_ms: float | None = num(6)  # summed kernel durations on the device (not a union)
    device: int = internal(default=-1)  # the device index (the document has it on Device)
    kernel_ns: int = internal(default=0)  # kernel_ms exactly: picks the primary device


@node
class Device(Node):
    index: int
    rank: int | None
    name: str | None
    sm_count: int | None
    memory_bytes: int | None
    compute_capability: str | None
    primary: bool
    metrics: DeviceMetrics


@node
class StepSplit(Node):
    """One step cut into the diagnosis' exclusive shares (``shares_ms`` sum to ``dur_ms``;
    ``metrics/per_step.py``)."""

    step: int  # N of ProfilerStep#N, else the step's position
    start_ms: float = num(6)  # from the first step's start
    dur_ms: float = num(6)  # exclusive window (the step's duration when none overlap)
    shares_ms: Mapping[str, float] = num(6)
    # beyond MAX_STEPS_LISTED steps a row sums this many consecutive steps from ``step`` on
    # (metrics/per_step.py: summarised); absent for a row of one step
    steps: int | None = field(default=None, metadata={"omit_none": True})


@node
class SplitOverTime(Node):
    """A single step's exclusive shares in equal buckets across it (a timeline strip)."""

    bucket_ms: float = num(6)
    shares_ms: Mapping[str, tuple[float, ...]] = num(6)


@node
class StepStats(Node):
    count: int
    mean_ms: float | None = num(6)
    min_ms: float | None = num(6)
    max_ms: float | None = num(6)
    source: str  # profiler_step | cpu_span | gpu_span | trace_span | none
    device_aware: bool
    dropped: int
    names: tuple[str, ...]
    per_step: tuple[StepSplit, ...] = ()  # empty without a diagnosis
    split_over_time: SplitOverTime | None = None  # only for a capture of a single step
    # the GPU part of the mean step: the union of the primary device's kernel, copy and memset
    # time in each step, averaged (None: no GPU, or a document of an older rightsize)
    gpu_ms: float | None = num(6, default=None)


NO_STEPS = StepStats(0, None, None, None, "none", False, 0, ())


@node
class BreakdownMs(Node):
    """TensorBoard plugin step-time breakdown, mean per step; the parts sum to ``step``."""

    kernel: float = num(6)
    memcpy: float = num(6)
    memset: float = num(6)
    communication: float = num(6)
    runtime: float = num(6)
    dataloader: float = num(6)
    cpu_exec: float = num(6)
    other: float = num(6)
    step: float = num(6)
    per_step_ns: Mapping[str, tuple[int, ...]] = internal(default=None)  # role -> ns per step


@node
class StreamIdle(Node):
    """HTA's idle-time breakdown of one stream (``metrics/hta.py``; whole µs as ms)."""

    stream: int
    host_wait_ms: float = num(6)
    kernel_wait_ms: float = num(6)
    other_ms: float = num(6)

    @property
    def idle_ms(self) -> float:
        return self.host_wait_ms + self.kernel_wait_ms + self.other_ms


@node
class Hta(Node):
    """HTA's temporal breakdown of one rank (shares of the GPU span) and its idle time per
    stream (``metrics/hta.py``). The whole-µs parts HTA computes stay on the object."""

    idle_pct: float | None = num(4)
    compute_pct: float | None = num(4)
    non_compute_pct: float | None = num(4)
    span_ms: float = num(6)
    idle_by_stream: tuple[StreamIdle, ...] = ()
    span_us: int = internal(default=0)
    idle_us: int = internal(default=0)
    compute_us: int = internal(default=0)
    non_compute_us: int = internal(default=0)

    def pct(self, part_us: int) -> float | None:
        return 100.0 * part_us / self.span_us if self.span_us > 0 else None


@node
class MemoryPeak(Node):
    """Peak of the caching allocator on one device (``metrics/kernels.py``)."""

    device: int  # -1: host
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    relative: bool  # True: from deltas only (2021 traces), relative to the trace start


@node
class Memcpy(Node):
    direction: str | None  # HtoD, DtoH, ...; None: the trace did not say (a bare "Memcpy")
    host_memory: str | None
    count: int
    bytes: int | None
    time_ms: float | None = num(6)
    gbps: float | None = num(4)  # bytes / busy ns


@node
class Communication(Node):
    """Communication kernels inside the step window (``metrics/kernels.py``)."""

    time_ms: float | None = num(6)  # union of communication kernels
    overlapped_ms: float | None = num(6)  # part of it that ran while compute kernels ran
    overlap_pct: float | None = num(4)


@node
class Launch(Node):
    """Kernel launch statistics, HTA ``get_cuda_kernel_launch_stats`` (``metrics/hta.py``)."""

    launches: int
    median_launch_delay_us: float | None
    p95_launch_delay_us: float | None = num(2)
    median_cpu_us: float | None = None
    median_gpu_us: float | None = None
    short_kernels: int = 0  # launch call <= 50 µs and kernel shorter than its launch call
    runtime_outliers: int = 0  # launch call > 50 µs
    launch_delay_outliers: int = 0  # launch delay > 100 µs


@node
class Metrics(Node):
    """Metrics of one device (the primary one at the top level)."""

    device: int | None
    gpu_util_pct: float | None = num(4)
    sm_efficiency_pct: float | None = num(4)
    achieved_occupancy_pct: float | None = num(4)
    tensor_core_kernel_pct: float | None = num(4)
    tensor_core_kernel_pct_extended: float | None = num(4)
    breakdown_ms: BreakdownMs | None
    hta: Hta | None
    peak_memory_bytes: int | None
    peak_reserved_bytes: int | None
    memory: tuple[MemoryPeak, ...]
    memcpy: tuple[Memcpy, ...]
    communication: Communication | None
    launch: Launch | None
    extra: Mapping[str, Any] = field(default_factory=dict)


NO_METRICS = Metrics(None, None, None, None, None, None, None, None, None, None, (), (), None,
                     None)


@node
class TopKernel(Node):
    name: str | None  # None: the capture lost it (an nsys export with an empty StringIds)
    calls: int
    total_ms: float | None = num(6)
    mean_us: float | None = num(3)
    max_us: float | None = num(3)
    pct: float | None = num(4)  # of kernel time
    class_: str | None = key("class")  # compute / memory / communication
    signal: str | None  # what decided the class: ncu / counters / roofline / name / default


@node
class TopOp(Node):
    name: str | None  # None: the capture lost it (as for TopKernel)
    calls: int
    host_ms: float | None = num(6)
    gpu_ms: float | None = num(6)
    kernels: int


@node
class SelfOp(Node):
    """Host ops of one call path by their own time (``rightsize/analyzers/metrics/self_ops.py``)."""

    name: str
    path: tuple[str, ...]  # enclosing ops, outermost first, ending at the op
    module: str | None  # innermost nn.Module of its longest call, when modules were recorded
    calls: int
    self_ms: float = num(6)  # duration minus its direct child ops
    host_ms: float = num(6)  # durations, children included
    gpu_ms: float = num(6)  # kernels it launched itself
    kernels: int = 0


@node
class Rank(Node):
    rank: int | None
    path: str | None
    world_size: int | None
    steps: StepStats
    metrics: Metrics
