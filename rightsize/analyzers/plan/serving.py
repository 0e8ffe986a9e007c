"""LLM serving: how many requests fit on one GPU at once, and what a smaller batch does to the
step.

Input: a model shape (Hugging Face config), the serving precision and the context per request
(prompt plus generated tokens). Output: a :class:`KvBudget` (the fixed bytes: weights, activations
and framework overhead, and the KV cache of one request, from
:func:`rightsize.analyzers.sizing.estimator.estimate` with batch 1: what the JSON reports and
what partitions are sized on) and, per GPU, :func:`max_concurrent` requests.

With the shape known (``rightsize plan --hf-config``), :func:`served` answers both questions with
the serving step model (:mod:`rightsize.analyzers.serving.step`, the one ``serving plan``
simulates on): the requests whose KV cache fits beside that model's weights, activations and
overhead in ``(1 - headroom)`` of the GPU, and the decode step at that batch over the step at
the measured batch (every request at half its context: the mean KV length of a decode), which
scales the analysis' projected step. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.analyzers.sizing.estimator import Mode, Setup, estimate
from rightsize.analyzers.sizing.model_shape import ModelShape
from rightsize.catalog import Catalog
from rightsize.vocab import Precision

# plan's precisions -> the serving model's weight precisions (16-bit and wider serve as bf16)
SERVED_AS = {"bf16": "bf16", "fp16": "bf16", "fp32": "bf16", "tf32": "bf16", "fp8": "fp8",
             "int8": "int8", "int4": "int4"}


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


@dataclass(frozen=True, slots=True)
class Served:
    """One GPU's batch limit and step scale from the serving step model."""

    limit: int  # requests whose KV cache fits (0: the model does not)
    step_scale: float  # decode step at min(batch, limit) / decode step at batch
    why: str  # what the limit and the scale rest on


def served(shape: ModelShape, precision: str, gpu_name: str, catalog: Catalog, seq: int,
           batch: int, headroom: float) -> Served | None:
    """The serving model's limit and step scale on ``gpu_name`` (None: it cannot model this
    model or precision, the caller keeps the estimator's bound)."""
    from rightsize.analyzers.serving.step import Deployment, ServingError, memory_bytes, step_model

    dep = Deployment(catalog.gpu(gpu_name).name, 1, 1, SERVED_AS.get(precision, "bf16"))
    try:
        gpu = catalog.gpu(gpu_name)
        fixed, per_token = memory_bytes(shape, dep, gpu)
        free = gpu.memory_bytes * (1 - headroom) - fixed
        limit = int(free // (per_token * seq)) if free > 0 and per_token > 0 else 0
        if free > 0 and per_token <= 0:
            limit = 1 << 20
        if limit == 0 or limit >= batch:
            return Served(limit, 1.0, "serving model memory: weights, activations, overhead")
        model = step_model(shape, dep, catalog=catalog)
    except (ServingError, ValueError):
        return None
    half = max(seq // 2, 1)
    scale = model.decode([half] * limit).ms / model.decode([half] * batch).ms
    return Served(limit, scale, f"KV cache bound: {limit} requests of {seq} tokens fit; step x"
                                f"{scale:.3g}: the serving model's decode step at {limit} "
                                f"against {batch} sequences")
