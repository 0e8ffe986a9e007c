"""The shared vocabularies, defined once: what bounds a step, the exclusive shares of a step,
which signal classified a kernel, what bounds a piece of work, and numeric precision.

Every layer that names one of these imports it from here; the JSON document carries their
string values.
"""

from __future__ import annotations

from enum import StrEnum


class WorkClass(StrEnum):
    """What bounds a piece of device work."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"


class Bound(StrEnum):
    """The verdict: what limits the step."""

    COMPUTE = "compute"
    MEMORY = "memory"
    PCIE = "pcie"
    DATALOADER = "dataloader"
    HOST = "host"
    COMMUNICATION = "communication"
    INCONCLUSIVE = "inconclusive"  # the capture cannot support a verdict (the evidence says why)


class DeviceKind(StrEnum):
    """What a diagnosis was made from (the document's ``diagnosis.device``)."""

    GPU = "gpu"  # a trace's GPU kernels
    CPU = "cpu"  # a CPU-only trace's ops
    COUNTERS = "counters"  # GPU metric samples alone (NVML, DCGM, nvidia-smi)
    NCU = "ncu"  # Nsight Compute rows alone


class Share(StrEnum):
    """The diagnosis' exclusive per-step shares (they sum to the step time), in display order."""

    COMPUTE = "compute"
    MEMORY = "memory"
    PCIE = "pcie"
    DATALOADER = "dataloader"
    COMMUNICATION = "communication"
    HOST = "host"
    IDLE = "idle"


# The shares as plain strings, in display order (the keys of ``shares_pct`` in the document).
SHARES: tuple[str, ...] = tuple(s.value for s in Share)


class Signal(StrEnum):
    """Which evidence decided a kernel's class, best first."""

    NCU = "ncu"  # Nsight Compute speed-of-light per kernel
    COUNTERS = "counters"  # GPM / DCGM hardware counters over the step windows
    ROOFLINE = "roofline"  # op FLOPs/bytes from recorded shapes vs the GPU's ridge point
    NAME = "name"  # kernel-name taxonomy
    DEFAULT = "default"  # no rule matched: counted as memory-bound (most such kernels are)


class Precision(StrEnum):
    """Numeric precision of the dominant compute (and of weights, for the estimator)."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
