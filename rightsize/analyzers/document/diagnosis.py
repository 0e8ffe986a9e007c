"""Document nodes of the verdict: diagnosis, its evidence, signals and utilization, and the
tuning recommendations; one class per concept, made by ``analyzers/diagnosis`` (``verdict``,
``counters``, ``ncu_only``, ``advise``) and read back from JSON by the codec.

Keys and meanings: docs/json-contract.md and docs/diagnosis.md. A new key is one field line here
(give it a default so older documents still read). Pure; no polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from rightsize.analyzers.document.metrics import SplitOverTime, StepSplit
from rightsize.catalog.catalog import DeviceMatch
from rightsize.node import Node, internal, key, node, num
from rightsize.vocab import Bound, DeviceKind

__all__ = [
    "DeviceMatch",
    "Diagnosis",
    "Evidence",
    "NvmlUtilization",
    "Recommendation",
    "SignalGroup",
    "TraceUtilization",
    "Utilization",
]

# The NVML/GPM counters sampled during a run, in the order the verdict reports them.
NVML_METRICS = ("gpu_util", "mem_util", "gpm_sm_util", "gpm_sm_occupancy", "gpm_tensor_util",
                "gpm_dram_bw_util")


@node
class SignalGroup(Node):
    """Classified work summed per kernel group (or per kernel / op name)."""

    group: str | None
    class_: str | None = key("class")  # compute / memory / communication
    signal: str | None = None  # ncu / counters / roofline / name / default
    time_ms: float | None = num(6, default=None)
    calls: int = 0


@node
class TraceUtilization(Node):
    """Kernel busy time on the primary device, over the step windows (trace-derived)."""

    gpu_busy_pct_mean: float
    gpu_busy_pct_peak_step: float


@node
class NvmlUtilization(Node):
    """NVML / GPM / DCGM samples whose averaged time lies inside the step windows: mean and
    peak of each counter that was sampled (a counter never sampled has no key). ``samples``
    counts utilization.gpu rows, ``gpm_samples`` GPM rows; ``utilization_period_ms`` is the
    driver's averaging period assumed for utilization.gpu (1/6 s to 1 s)."""

    samples: int
    gpm_samples: int | None = None
    utilization_period_ms: float | None = None
    gpu_util_pct_mean: float | None = None
    gpu_util_pct_peak: float | None = None
    mem_util_pct_mean: float | None = None
    mem_util_pct_peak: float | None = None
    gpm_sm_util_pct_mean: float | None = None
    gpm_sm_util_pct_peak: float | None = None
    gpm_sm_occupancy_pct_mean: float | None = None
    gpm_sm_occupancy_pct_peak: float | None = None
    gpm_tensor_util_pct_mean: float | None = None
    gpm_tensor_util_pct_peak: float | None = None
    gpm_dram_bw_util_pct_mean: float | None = None
    gpm_dram_bw_util_pct_peak: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _present(self, name: str) -> bool:
        """A counter that was not sampled has no key (nor do the GPM keys without GPM)."""
        return name in ("samples", "extra") or getattr(self, name) is not None

    def counter(self, metric: str, stat: str) -> float | None:
        """``counter("gpu_util", "mean")``: one of :data:`NVML_METRICS`, ``mean`` or ``peak``."""
        return getattr(self, f"{metric}_pct_{stat}", None)


@node
class Utilization(Node):
    trace: TraceUtilization | None
    nvml: NvmlUtilization | None


@node
class Evidence(Node):
    """One piece of evidence: the share (or capture fact) it is about, the measured value, the
    threshold it was compared with, and the sentence shown to users."""

    share: str  # a Share value, or the capture fact: coverage, startup, kernels, steps, ...
    value: float | None = num(3)  # in the unit the text states
    threshold: float | None = num(3)
    text: str = ""


@node
class HostPart(Node):
    """One kind of CPU work the job does while the GPU idles."""

    name: str  # the library, or "PyTorch ops on CPU tensors"
    pct: float = num(2)  # % of the step
    top: tuple[str, ...] = ()  # its longest Python functions or ops there, longest first


@node
class HostCall(Node):
    """A library call that owns CPU time while the GPU waits (``diagnosis/host_calls.py``)."""

    call: str  # where the library was entered: "scipy.ndimage.zoom"
    library: str  # its package as people name it ("SciPy"), else its host_work.LIBRARIES label
    caller: str  # the frame above it: "transformers.models.owlv2.image_processing_owlv2.resize"
    pct: float = num(2)  # % of the step: the time it owns while the GPU waits
    per_step: float = num(2)  # times it is entered with one call stack, in the median step
    repeat_pct: float = num(2)  # % of the step in all but one of those (0: no repeat)


@node
class HostWork(Node):
    """The ``host`` share split (``diagnosis/host_work.py``): the job's own CPU work, which
    moves to DataLoader workers or the GPU, and framework/launch overhead, which torch.compile
    and CUDA graphs shrink; both % of the step, summing to the host share."""

    cpu_work_pct: float = num(2)
    framework_pct: float = num(2)
    parts: tuple[HostPart, ...] = ()
    python_frames: bool = False  # Python functions recorded (with_stack): libraries named
    # host time inside annotated ranges (record_function, NVTX) with nothing finer recorded,
    # and the ranges with the most of it; no keys when there is none
    ranges_pct: float = num(2, default=0.0)
    ranges: tuple[str, ...] = ()
    # the library calls with the most time while the GPU waits (host and data-loader shares),
    # and the model's top module when it runs more than once a step; no keys when none
    calls: tuple[HostCall, ...] = ()
    model: str = ""
    model_runs_per_step: float = num(2, default=0.0)

    def _present(self, name: str) -> bool:
        if name in ("ranges_pct", "ranges"):
            return bool(self.ranges_pct)
        if name in ("model", "model_runs_per_step"):
            return bool(self.model)
        return name != "calls" or bool(self.calls)


@node
class Diagnosis(Node):
    """What bounds the step; ``shares_pct`` sum to 100 (``None``: not measured)."""

    bound: Bound | None
    confidence: float | None
    device: DeviceKind  # what was diagnosed: the GPU's kernels, CPU ops, counters, ncu rows
    shares_pct: Mapping[str, float | None] = num(2)
    evidence: tuple[str, ...] = ()  # the items' sentences, in order
    signals: tuple[SignalGroup, ...] = ()
    # best signal first (vocab.Signal order)
    signal_pct: Mapping[str, float | None] = num(2, default={})
    thresholds: Mapping[str, Any] = field(default_factory=dict)
    utilization: Utilization = field(default_factory=lambda: Utilization(None, None))
    device_match: DeviceMatch | None = None
    evidence_items: tuple[Evidence, ...] = ()
    host_work: HostWork | None = field(default=None, metadata={"omit_none": True})
    extra: Mapping[str, Any] = field(default_factory=dict)
    # what the document's steps are made from: not published here
    step_ns: int = internal(default=0)  # summed step time the shares are of
    per_step: tuple[StepSplit, ...] = internal(default=())  # the shares cut at step boundaries
    split: SplitOverTime | None = internal(default=None)  # one step's shares over time


@node
class WhatIf(Node):
    """The step predicted if a recommendation is applied: a point, the range from the best to
    the worst case of its assumption, and the assumption in words."""

    step_ms: float = num(6)
    step_ms_low: float = num(6)
    step_ms_high: float = num(6)
    assumes: str = ""
    # steps left out as one-offs (diagnosis/steady.py); no key when none was
    outlier_steps: tuple[int, ...] = ()

    def _present(self, name: str) -> bool:
        return name != "outlier_steps" or bool(self.outlier_steps)


@node
class Recommendation(Node):
    id: str
    title: str
    detail: str
    evidence: str | tuple[str, ...]  # what was measured against which threshold, and its source
    what_if: WhatIf | None = None  # None: the rule removes no measured share of the step
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def evidence_lines(self) -> tuple[str, ...]:
        """The evidence as lines (a rule file writes one sentence or several)."""
        return (self.evidence,) if isinstance(self.evidence, str) else self.evidence
