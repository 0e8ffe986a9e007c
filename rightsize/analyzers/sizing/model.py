"""The sizing data model: what is sized (:class:`Workload`), under which :class:`Constraints`,
and the result (:class:`Candidate` per GPU, :class:`Sizing`: the document's ``sizing`` nodes),
with the advisor's named judgement calls (``rightsize.analyzers.thresholds``). The logic is in
``projection``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rightsize.analyzers.document.sizing import Candidate, Objective, Sizing, Verdict
from rightsize.errors import RightsizeError
from rightsize.vocab import Bound, Precision, Share

if TYPE_CHECKING:
    from rightsize.analyzers.sizing.kernels_projection import KernelWork

__all__ = ["Candidate", "CommWork", "Constraints", "Objective", "Sizing", "SizingError",
           "Verdict", "Workload"]


class SizingError(RightsizeError):
    """The workload or constraints cannot be sized as given."""


# Precisions a GPU must run natively to be recommended (int4 weight-only runs in 16-bit anyway).
NATIVE_PRECISIONS = (Precision.TF32, Precision.BF16, Precision.FP16, Precision.FP8,
                     Precision.INT8)
FIXED_SHARES = (Share.DATALOADER, Share.HOST, Share.IDLE, Share.COMMUNICATION)


@dataclass(frozen=True, slots=True)
class CommWork:
    """One kind of collective call of the measured rank (type, size, group), per step: what
    the communication model projects onto another GPU and fabric (``sizing/comm.py``)."""

    collective: str  # analyzers/job/names.TYPES
    bytes: int | None  # nccl-tests size of one call; None: not recorded (held as measured)
    group_size: int | None  # ranks per call; None: the whole job
    calls: float  # per step
    kernel_ms: float  # its kernels' time per step: waiting for late ranks + the transfer
    exposed_ms: float  # of it, not overlapped by compute
    wait_ms: float | None = None  # of kernel_ms, waiting for late ranks; None: not known


# The current device of a GPU trace whose device has no name (no deviceProperties: a sampled or
# filtered trace): a GPU all the same, never "a CPU-only run", but not matchable to the catalog.
UNNAMED_GPU = "(GPU not named in the trace)"


@dataclass(frozen=True, slots=True)
class Workload:
    """What one step of the job costs where it ran. ``shares_ms`` keys are :class:`Share`
    values and sum to ``step_ms``; a CPU-only run gives ``current_device_name=None`` and
    ``flops_per_step``/``bytes_per_step`` for the work its ops do."""

    step_ms: float
    shares_ms: Mapping[str, float]
    precision: str  # Precision value of the dominant compute
    peak_memory_bytes: int | None
    current_device_name: str | None
    current_sm_count: int | None = None
    current_memory_bytes: int | None = None
    samples_per_step: int | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    training: bool = True  # words for multi-GPU proposals (FSDP vs tensor parallel)
    gpus: int = 1  # devices the measured run used (cost counts all of them)
    bound: Bound | None = None  # the diagnosis verdict, when there is one
    kernels: tuple[KernelWork, ...] = ()  # per-step kernel work, for the per-kernel projection
    ranks: int = 1  # ranks of the measured job (world size); >1 with communication: see fabric
    # GB/s the host<->device copies achieved (bytes / busy time of HtoD and DtoH memcpy): well
    # below the link, they were bound by the host (pageable staging), not by the link
    host_copy_gbs: float | None = None
    # of the host share, the job's own CPU work (decoding, preprocessing: diagnosis/host_work)
    host_cpu_work_ms: float = 0.0
    # the GPU's wait the diagnosis names (annotated ranges, a library call) and its words
    # (diagnosis/host_work.named_stall): the reason says it instead of a generic cause
    named_stall_ms: float = 0.0
    named_stall: str = ""
    # the rank's collective calls per step (empty: none recorded, communication held)
    collectives: tuple[CommWork, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraints:
    target_step_ms: float | None = None
    target_throughput: float | None = None  # samples per second; needs samples_per_step
    max_usd_per_hour: float | None = None  # for all GPUs of a candidate together
    headroom_fraction: float = 0.10  # free memory kept above the peak
    provider: str | None = None  # price only from this provider
    include_consumer: bool = False  # consumer (gaming) GPUs may be recommended
    objective: Objective = Objective.TIME  # what to optimize (sizing/objective.py)
    slower_ok_pct: float = 10.0  # objective time: a candidate may be this much slower than now
    # a distributed job projected at another layout (--gpus N --gpus-per-node M): N ranks in
    # all, M per node; None: the measured rank count, nodes as full as the GPU's node allows
    layout_gpus: int | None = None
    layout_gpus_per_node: int | None = None
    # a communication model fitted on the user's own nccl-tests logs (sizing/comm.CommModel,
    # --comm-model); None: the shipped one
    comm_model: Any = None
