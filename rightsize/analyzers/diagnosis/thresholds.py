"""The diagnosis' named thresholds, each with its reason (and its source when borrowed).

Used by the verdict (``verdict.py``), its evidence (``evidence.py``) and the diagnoses without a
trace (``counters.py``, ``ncu_only.py``); published as the document's ``diagnosis.thresholds``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DiagnosisThresholds:
    """Named thresholds, each with the reason (and the source when borrowed)."""

    # The work bounds the step when it takes at least 1.5x the time spent waiting (>= 60% of the
    # step); below that, removing the largest wait shortens the step more than faster kernels.
    work_bound_pct: float = 60.0
    dataloader_pct: float = 5.0  # TensorBoard plugin: data loading > 5% of the step
    communication_pct: float = 10.0  # TensorBoard plugin: communication > 10% of the step
    gpu_util_pct: float = 50.0  # TensorBoard plugin: GPU utilization < 50% is low
    disagreement_pct: float = 15.0  # NVML vs trace utilization gap worth a line of evidence
    tiny_op_us: float = 10.0  # CPU-only: ops this short are mostly dispatch overhead
    # CPU-only: assumed ridge point, ~1-2 TFLOP/s fp32 over ~100-200 GB/s of a server CPU
    cpu_ridge_flops_per_byte: float = 10.0
    # Below half the step recorded, the unrecorded part could hold any bottleneck.
    min_recorded_pct: float = 50.0
    # Start-up work (init, JIT, autotuning, warm-up) a steady-state step never repeats: from a
    # quarter of the step it outweighs any share but the largest, so the verdict describes it.
    startup_pct: float = 25.0
    # A training or inference step launches hundreds of kernels; below 20 the shares hinge on a
    # handful of launches (a test harness, a micro-benchmark).
    min_kernels: int = 20
    # NVML vs trace busy: NVML counts a whole sample period busy, so it reads above the trace;
    # more than 30 points apart the two do not describe the same activity.
    signals_disagree_pct: float = 30.0
    min_nvml_samples: int = 5  # fewer NVML samples in the steps cannot contradict the trace

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


THRESHOLDS = DiagnosisThresholds()
