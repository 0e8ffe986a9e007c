"""The definition each published metric follows, as the document's ``definitions`` says it.

Two sets: ``rightsize`` (the reference definitions with their known defects fixed, the default)
and ``tb-plugin`` (the PyTorch Profiler TensorBoard plugin 0.4.3 exactly, defects included, for
users comparing with what TensorBoard showed them). docs/metrics.md says what differs and why.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from rightsize.errors import RightsizeError

RIGHTSIZE: Final = "rightsize"
TB_PLUGIN: Final = "tb-plugin"
CHOICES = (RIGHTSIZE, TB_PLUGIN)

_COMMON = {
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
    "Hopper/Blackwell/AMD matrix kernels (nvjet, sm90_xmma, cutlass3x, flash, Cijk_...) added "
    "and FP32 CUDA-core GEMMs (names with _ffma_ or _simt_) taken out",
    "hta": "HolisticTraceAnalysis 0.5.0 temporal breakdown: whole-µs times (start rounded up, end "
    "down), last ProfilerStep dropped by launch time, shares of the GPU span (first start to "
    "last end of kernels, memcpy, memset)",
    "idle_by_stream": "HTA idle-time breakdown: host wait (launch call started after the previous "
    "activity ended), kernel wait (gap < 30 µs), other",
    "peak_memory_bytes": "max 'Total Allocated' of the caching allocator's [memory] events on "
    "the primary device (the host for CPU-only traces)",
}

_TB_PLUGIN = {
    **_COMMON,
    "steps": "TensorBoard plugin 0.4.3 step bounds with its defects reproduced: runtime calls "
    "recognised only by the 2021 category name 'Runtime' (on newer traces the device-aware "
    "adjustment and the dropping of trailing steps are skipped), and the GPU-side copy of each "
    "ProfilerStep#N annotation counted as a step of its own",
    "breakdown_ms": "TensorBoard plugin 0.4.3 step-time breakdown with its defects reproduced: "
    "Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other; runtime "
    "= category 'Runtime' only; communication = the five exactly-named nccl:/gloo: collective "
    "ops and the kernels they launched",
}

SETS = {RIGHTSIZE: MappingProxyType(_COMMON), TB_PLUGIN: MappingProxyType(_TB_PLUGIN)}


def definitions_for(name: str) -> dict[str, str]:
    """The ``definitions`` object of a document analyzed with the named set."""
    try:
        return dict(SETS[name])
    except KeyError:
        raise RightsizeError(
            f"unknown definitions {name!r} (choose from {', '.join(CHOICES)})") from None
