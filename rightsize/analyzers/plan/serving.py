"""LLM serving: how many requests fit on one GPU at once, from the memory estimator.

Input: a model shape (Hugging Face config), the serving precision and the context per request
(prompt plus generated tokens). Output: a :class:`KvBudget` (the fixed bytes: weights, activations
and framework overhead, and the KV cache of one request, from
:func:`rightsize.analyzers.sizing.estimator.estimate` with batch 1) and, per GPU,
:func:`max_concurrent` requests. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.analyzers.sizing.estimator import Mode, Setup, estimate
from rightsize.analyzers.sizing.model_shape import ModelShape
from rightsize.vocab import Precision


@dataclass(frozen=True, slots=True)
class KvBudget:
    model: str
    seq: int
    precision: str
    fixed_bytes: int  # everything but the KV cache, for one replica
    kv_bytes_per_request: int  # 0: no KV cache (encoder-only)
    definition: str


def kv_budget(shape: ModelShape, precision: Precision, seq: int) -> KvBudget:
    est = estimate(shape, Setup(mode=Mode.INFERENCE, precision=precision, batch=1, seq=seq))
    kv = est.memory.kv_cache_bytes
    definition = est.kv_cache.definition if est.kv_cache else "no KV cache (encoder-only model)"
    return KvBudget(est.model, seq, str(precision), est.total_bytes - kv, kv, definition)


def max_concurrent(budget: KvBudget, gpu_memory_bytes: int, headroom: float) -> int:
    """Requests whose KV cache fits beside the fixed bytes in ``(1 - headroom)`` of the GPU;
    0 when the model alone does not fit; a large number when there is no KV cache."""
    free = gpu_memory_bytes * (1 - headroom) - budget.fixed_bytes
    if free <= 0:
        return 0
    if budget.kv_bytes_per_request == 0:
        return 1 << 20
    return int(free // budget.kv_bytes_per_request)
