"""The interpretable factors a served step's time is scaled by, and the spread it carries.

A step's modelled time is split by operator class (:class:`~.forward.Parts`); calibration on a
user's measurements multiplies each class by a factor (measured over modelled: a compute factor
of 1.25 means their stack reaches 1/1.25 = 80% of the tables' GEMM and attention throughput),
adds a fixed
per-step overhead (the scheduler, the sampler, Python between kernels), and states a low-high
spread from the residuals of its points. :class:`Calibration` holds one :class:`Factors` per
GPU it saw (and ``any`` for the others: the pooled stack efficiency moves with the software,
not the chip) and the spreads. Uncalibrated, :data:`UNCALIBRATED` applies: factors 1, the
default overhead and the spread the validation measured (docs/serving.md). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rightsize.analyzers.serving.forward import Parts

# Default fixed time per step (ms) beyond the kernels: vLLM's scheduler, input preparation and
# sampler between CUDA-graph replays; calibration replaces it.
DEFAULT_OVERHEAD_MS = {"prefill": 1.0, "decode": 0.5}
# The serving engine's CPU work per scheduled sequence and step (ms), beyond the fixed overhead
# above: the scheduler's per-sequence bookkeeping, input preparation (positions, block tables,
# sampling metadata), the sampler's Python and the output processing, which grow with the batch
# while the GPU waits. vLLM V0 (the engine of vLLM <= 0.6, single-step scheduling): "when BS is
# 200, all this together [sampling, prepare input, process_model_output, scheduler] can be
# 20 ms" (vLLM issue #6801, the performance roadmap, Aug 2024, measured on v0.5.x), so
# (20 - 0.5 fixed) / 200 = 0.0975 ms a sequence; the multi-step RFC (vLLM issue #6854, Jul 2024)
# saw 5-13 ms GPU bubbles between decode steps of Llama-3-8B on one H100 under ShareGPT load,
# the same order at 50-130 sequences. Not in the figure: v0.6's asynchronous output processor
# (vLLM PR #7049) overlaps the output processing with the next step (less), a tensor-parallel
# driver broadcasts each step's inputs to its workers (more). vLLM V1 (the default engine from
# 0.8, whose scheduler ``simulate.py`` follows) overlaps this work with the GPU and no
# per-sequence figure is published for it: 0, as before. Never fitted on the validation runs.
ENGINE_SEQ_OVERHEAD_MS = {"vllm": 0.0, "vllm-v0": (20.0 - DEFAULT_OVERHEAD_MS["decode"]) / 200}
ANY_GPU = "any"


@dataclass(frozen=True, slots=True)
class Factors:
    """Measured / modelled time per operator class, and the fixed overhead per step (ms).

    ``compute`` scales compute-bound time (GEMMs at large token counts, prefill attention):
    1 / the achieved fraction of the tables' tensor throughput; ``memory`` memory-bound time
    (weights streamed by small GEMMs, decode attention's KV reads, elementwise kernels): 1 /
    the achieved fraction of their bandwidth; ``comm`` the tensor-parallel all-reduces."""

    compute: float = 1.0
    memory: float = 1.0
    comm: float = 1.0
    prefill_overhead_ms: float = DEFAULT_OVERHEAD_MS["prefill"]
    decode_overhead_ms: float = DEFAULT_OVERHEAD_MS["decode"]

    def step_ms(self, parts: Parts, prefill: np.ndarray) -> np.ndarray:
        """The step (ms): each class scaled, plus the overhead of a prefill (any prefill
        tokens) or a decode step."""
        kernels = (self.compute * parts.compute + self.memory * parts.memory
                   + self.comm * parts.comm) / 1e3
        return kernels + np.where(prefill, self.prefill_overhead_ms, self.decode_overhead_ms)

    def to_json(self) -> dict[str, float]:
        return {"compute": round(self.compute, 4), "memory": round(self.memory, 4),
                "comm": round(self.comm, 4),
                "prefill_overhead_ms": round(self.prefill_overhead_ms, 4),
                "decode_overhead_ms": round(self.decode_overhead_ms, 4)}


@dataclass(frozen=True, slots=True)
class Spread:
    """A prediction's range as fractions of it: ``low = ms x (1 + low)``, ``high = ms x (1 +
    high)`` (``low`` <= 0 <= ``high``), and where it comes from."""

    low: float
    high: float
    source: str


# The range an uncalibrated prediction carries: p10 / p90 of measured / predicted - 1 of whole
# steps in the leave-one-GPU-out validation of the per-kernel projection against the held-out
# GPU's tables (benchmarks/serving_accuracy.py, docs/serving.md).
DEFAULT_SPREAD = {
    "prefill": Spread(-0.10, 0.52, "default: leave-one-GPU-out validation, p10-p90"),
    "decode": Spread(-0.14, 0.31, "default: leave-one-GPU-out validation, p10-p90"),
}


@dataclass(frozen=True, slots=True)
class Calibration:
    """Fitted factors per GPU (``any``: for GPUs it did not see), their spreads, and what
    they were fitted on (``described``, e.g. ``measured.csv: 3 points on H100 SXM``)."""

    factors: Mapping[str, Factors] = field(default_factory=lambda: {ANY_GPU: Factors()})
    spread: Mapping[str, Spread] = field(default_factory=lambda: dict(DEFAULT_SPREAD))
    described: str = ""
    notes: tuple[str, ...] = ()
    # a communication model fitted on the user's own nccl-tests logs (sizing/comm.CommModel,
    # --comm-model): it times the tensor-parallel all-reduces instead of tables and catalog
    comm_model: Any = None

    def for_gpu(self, gpu: str) -> tuple[Factors, bool]:
        """The factors for ``gpu`` and whether they were fitted on it."""
        own = self.factors.get(gpu)
        if own is not None:
            return own, True
        return self.factors.get(ANY_GPU, Factors()), False


UNCALIBRATED = Calibration()
