"""Memory estimator: how many bytes a training or inference job needs per GPU.

Inputs: a :class:`~rightsize.analyzers.sizing.model_shape.ModelShape` (from a Hugging Face
config or explicit shapes) and a :class:`~.run_setup.Setup` (mode, precision, batch, sequence,
optimizer, activation recomputation, FlashAttention, ZeRO/FSDP sharding). Outputs: a frozen
:class:`MemoryEstimate` with weights, gradients, optimizer states, activations, KV cache and
overhead, their total, the assumptions it made and warnings about the setup.

Pure arithmetic, no I/O. The bytes-per-parameter and overhead figures are named data in
:mod:`.run_setup`; the KV cache and activation formulas are in :mod:`.memory_parts`
(Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq.
1-2, generalized to grouped-query and latent attention, gated MLPs and MoE), see
docs/sizing.md. Placing the estimate on catalog GPUs lives in :mod:`.placement`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any

from rightsize.analyzers.sizing.hf_fields import MAX_COUNT
from rightsize.analyzers.sizing.memory_parts import (
    SAVED_TENSORS,
    KvCache,
    SavedTensors,
    activation_bytes,
    kv_cache,
    kv_cache_bytes,
    layer_activation_bytes,
    lora_params,
    prefill_tokens,
)
from rightsize.analyzers.sizing.model_shape import ModelShape
from rightsize.analyzers.sizing.parallelism import (
    prefill_chunk,
    tensor_parallel,
    validate_parallel,
)
from rightsize.analyzers.sizing.run_setup import (
    ASSUMPTIONS,
    BYTES_PER_ELEMENT,
    OPTIMIZER_STATE_BYTES,
    PREFILL_CHUNK,
    Assumptions,
    EstimateError,
    Mode,
    Optimizer,
    Recompute,
    Setup,
)
from rightsize.vocab import Precision

__all__ = ["ASSUMPTIONS", "BYTES_PER_ELEMENT", "OPTIMIZER_STATE_BYTES", "PREFILL_CHUNK",
           "SAVED_TENSORS", "Assumptions", "EstimateError", "KvCache", "MemoryBreakdown",
           "MemoryEstimate", "Mode", "Optimizer", "Recompute", "SavedTensors", "Setup",
           "activation_bytes", "estimate", "kv_cache_bytes", "layer_activation_bytes",
           "lora_params", "prefill_chunk", "tensor_parallel", "with_gpus"]


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes per GPU by kind."""

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    gradients_overlap_activations: bool = False

    @property
    def total_bytes(self) -> int:
        """The peak: every part at once, except that without gradient accumulation backward
        frees activations while it creates gradients, so only the larger of the two counts."""
        total = (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                 + self.activations_bytes + self.kv_cache_bytes + self.overhead_bytes)
        if self.gradients_overlap_activations:
            total -= min(self.gradients_bytes, self.activations_bytes)
        return total


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """The estimate for one setup, per GPU."""

    model: str
    params: int
    trainable_params: int
    setup: Setup
    memory: MemoryBreakdown
    assumptions: tuple[str, ...]
    active_params: int = 0  # what one token touches (MoE: routed experts only)
    kv_cache: KvCache | None = None  # inference with known shapes
    warnings: tuple[str, ...] = ()
    tensor_parallel: int = 1  # the degree it ran at (setup.tensor_parallel resolved)
    prefill_chunk_tokens: int | None = None  # inference: prompt tokens per forward pass

    @property
    def total_bytes(self) -> int:
        return self.memory.total_bytes

    def to_json(self) -> dict[str, Any]:
        m = self.memory
        return {
            "model": self.model,
            "params": self.params,
            "trainable_params": self.trainable_params,
            "active_params": self.active_params,
            "setup": {f.name: (str(v) if isinstance(v := getattr(self.setup, f.name), StrEnum)
                               else v) for f in fields(Setup)},
            "memory_bytes": {
                "weights": m.weights_bytes, "gradients": m.gradients_bytes,
                "optimizer": m.optimizer_bytes, "activations": m.activations_bytes,
                "kv_cache": m.kv_cache_bytes, "overhead": m.overhead_bytes,
                "total": m.total_bytes,
            },
            "tensor_parallel": self.tensor_parallel,
            "prefill_chunk_tokens": self.prefill_chunk_tokens,
            "kv_cache": self.kv_cache.to_json() if self.kv_cache else None,
            "assumptions": list(self.assumptions),
            "warnings": list(self.warnings),
        }


@dataclass(slots=True)
class _Parts:
    """Bytes accumulated while the estimate is built (per GPU, before overhead)."""

    weights: float = 0.0
    grads: float = 0.0
    optimizer: float = 0.0
    acts: float = 0.0
    kv: float = 0.0
    trainable: int = 0


def validate(shape: ModelShape | None, setup: Setup, params: int | None) -> None:
    """One-line errors for a setup the arithmetic cannot honour."""
    if shape is None and not params:
        raise EstimateError("give a model config, layer shapes, or --params")
    if params is not None and (isinstance(params, bool) or not isinstance(params, int)
                               or not 0 < params <= MAX_COUNT):
        raise EstimateError(f"the parameter count must be a whole number from 1 to"
                            f" {MAX_COUNT:,}, not {params!r}")
    for label, value in (("batch", setup.batch), ("seq", setup.seq), ("gpus", setup.gpus),
                         ("lora rank", setup.lora_rank)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
            raise EstimateError(f"{label} must be a whole number of at least 1, not {value!r}")
    if setup.zero_stage not in (0, 1, 2, 3):
        raise EstimateError(f"ZeRO stage must be 0-3, not {setup.zero_stage}")
    if setup.mode in (Mode.TRAIN, Mode.FINETUNE) and _quantized(setup):
        raise EstimateError(f"{setup.precision} weights cannot be trained directly; use"
                            " --mode lora (QLoRA) or a float precision")
    if setup.mode is Mode.LORA and shape is None:
        raise EstimateError("LoRA needs the layer shapes (a model config or --layers ...)")
    validate_parallel(shape, setup)


def _quantized(setup: Setup) -> bool:
    return setup.precision in (Precision.INT8, Precision.INT4)


def _activation_element_bytes(setup: Setup) -> float:
    """Activations and KV cache are 16-bit unless the run is fp32 (fp8/int weights compute in
    16-bit)."""
    return 4.0 if setup.precision in (Precision.FP32, Precision.TF32) else 2.0


def _weights(total: int, vocab_params: int, setup: Setup, notes: list[str]) -> float:
    w = BYTES_PER_ELEMENT[setup.precision]
    if _quantized(setup):  # bitsandbytes/GPTQ keep the embedding and lm head in 16-bit
        notes.append("quantized weights: embedding and lm head kept in 16-bit")
        return (total - vocab_params) * w + vocab_params * 2
    return total * w


def _training_state(parts: _Parts, shape: ModelShape | None, total: int, setup: Setup,
                    notes: list[str]) -> None:
    """Gradients and optimizer state: every parameter (train/finetune) or LoRA adapters."""
    e = _activation_element_bytes(setup)
    mixed = e == 2.0
    if setup.mode in (Mode.TRAIN, Mode.FINETUNE):
        parts.trainable = total
        parts.grads = total * e
        state = OPTIMIZER_STATE_BYTES[setup.optimizer][int(mixed)]
        parts.optimizer = total * state
        notes.append(f"{setup.optimizer} {'mixed precision' if mixed else 'fp32'}: "
                     f"{BYTES_PER_ELEMENT[setup.precision] + e + state:g} bytes per parameter")
    elif setup.mode is Mode.LORA and shape is not None:
        parts.trainable = lora_params(shape, setup.lora_rank)
        parts.weights += parts.trainable * 4  # PEFT keeps adapters in fp32
        parts.grads = parts.trainable * 4
        parts.optimizer = parts.trainable * OPTIMIZER_STATE_BYTES[setup.optimizer][0]
        notes.append(f"LoRA rank {setup.lora_rank} on the attention projections in fp32"
                     " (HF PEFT defaults)")


def _shard_training(parts: _Parts, layer_params: int, setup: Setup, tp: int,
                    notes: list[str]) -> None:
    if tp > 1:  # Megatron splits every linear layer and the vocabulary t ways
        parts.weights /= tp
        parts.grads /= tp
        parts.optimizer /= tp
        notes.append(f"tensor parallel {tp}: weights, gradients and optimizer state split {tp}"
                     " ways (the norm weights, whole on every GPU, are under 0.1% of the"
                     " parameters and counted split)")
    n = setup.gpus // tp
    if n == 1:
        return
    if setup.zero_stage >= 1:
        parts.optimizer /= n
    if setup.zero_stage >= 2:
        parts.grads /= n
    if setup.zero_stage >= 3:  # FSDP all-gathers one layer (and prefetches the next) in full
        parts.weights = parts.weights / n \
            + 2 * layer_params / tp * BYTES_PER_ELEMENT[setup.precision]
    notes.append(f"ZeRO stage {setup.zero_stage} over {n} data-parallel GPUs; batch is per GPU")


def _training_activations(parts: _Parts, shape: ModelShape | None, setup: Setup, tp: int,
                          notes: list[str]) -> None:
    if shape is None:
        return
    e = _activation_element_bytes(setup)
    sp = setup.sequence_parallel
    parts.acts = activation_bytes(shape, setup, e, tp, sp)
    split = ""
    if tp > 1 and sp:
        split = (f"; tensor parallel {tp} with sequence parallelism: every per-token term and"
                 f" the scores split {tp} ways (sbh(34/t + 5as/(ht)), their Table 2)")
    elif tp > 1:
        split = (f"; tensor parallel {tp}: Q, K, V, the attention and MLP intermediates, the"
                 f" scores and the logits split {tp} ways, the norms, projection inputs and"
                 " dropout masks whole on every GPU (sbh(10 + 24/t + 5as/(ht)), their Table 2)")
    notes.append(f"activations: Korthikanti et al. 2022, recompute={setup.recompute},"
                 f" flash_attention={setup.flash_attention}{split}")


def _inference(parts: _Parts, shape: ModelShape | None, setup: Setup, tp: int,
               notes: list[str]) -> KvCache | None:
    e = _activation_element_bytes(setup)
    generates = shape is not None and shape.lm_head
    cache = kv_cache(shape, setup.seq, setup.batch, e) if shape is not None and generates \
        else None
    if shape is not None and not generates:
        notes.append("encoder-only model: no KV cache (one forward pass, nothing generated)")
    parts.kv = cache.bytes if cache else 0
    if cache is not None:
        notes.append(f"KV cache: {cache.definition}")
        if cache.decompressed_bytes is not None:
            notes.append(f"MLA KV cache decompressed to per-head K and V (eager attention):"
                         f" {cache.decompressed_bytes / 2**30:,.2f} GiB")
    if setup.gpus > 1:
        pp = setup.gpus // tp
        parts.weights /= setup.gpus
        ways = kv_split_ways(shape, tp) * pp
        parts.kv /= ways
        layout = f"tensor parallel {tp}" + (f" x pipeline parallel {pp}" if pp > 1 else "")
        notes.append(f"{layout} over {setup.gpus} GPUs: weights split {setup.gpus} ways, KV"
                     f" cache {ways} ways"
                     + ("" if ways == setup.gpus else " (its heads are replicated beyond that,"
                        " as vLLM does; an MLA latent is one head)")
                     + (" (layers split evenly over the pipeline stages)" if pp > 1 else ""))
    if shape is not None:
        chunk = prefill_chunk(setup)
        parts.acts = activation_bytes(shape, setup, e, tp, setup.sequence_parallel, chunk)
        notes.append(_prefill_words(shape, setup, chunk))
    return cache


def _prefill_words(shape: ModelShape, setup: Setup, chunk: int) -> str:
    live = prefill_tokens(shape, setup, chunk)
    if not shape.lm_head:
        return (f"activations: one layer's working set for all {live:,} tokens (an encoder"
                " takes the whole sequence in one pass)")
    if not chunk:
        return (f"activations: one layer's working set for the whole prompt, {live:,} tokens"
                " in one pass (--prefill-chunk 0, as Hugging Face generate prefills)")
    why = "--prefill-chunk" if setup.prefill_chunk is not None else \
        f"{PREFILL_CHUNK.words}; each GPU's placement uses its own"
    return (f"activations: one layer's working set for {live:,} tokens at once, the prompt"
            f" prefilled in chunks of {chunk:,} tokens shared by the batch ({why}); the KV cache"
            f" holds all {setup.seq:,} tokens of each sequence")


def kv_split_ways(shape: ModelShape | None, tp: int) -> int:
    """Tensor parallelism splits the KV cache by heads: at most ``kv_heads`` ways (MQA's one
    head and the MLA latent are replicated on every rank)."""
    if shape is None:
        return tp
    heads = 1 if shape.mla else shape.kv_heads
    return max(1, min(tp, heads))


def _warnings(shape: ModelShape | None, setup: Setup) -> tuple[str, ...]:
    if shape is None or not shape.max_positions or setup.seq <= shape.max_positions:
        return ()
    why = ("its learned position table has no row for them: the model cannot run at this"
           " length" if shape.learned_positions else
           "positions beyond it were not trained: quality degrades unless RoPE scaling covers"
           " them")
    return ((f"--seq {setup.seq} exceeds the model's max_position_embeddings"
            f" {shape.max_positions}; {why}"),)


def _overhead(tensors: float, setup: Setup, notes: list[str]) -> float:
    if setup.device != "cuda":
        return 0.0
    notes.append("overhead: 1 GiB CUDA context and workspaces + 5% allocator fragmentation")
    return ASSUMPTIONS.cuda_context_bytes + ASSUMPTIONS.allocator_fragmentation_fraction * tensors


def estimate(shape: ModelShape | None, setup: Setup, params: int | None = None) -> MemoryEstimate:
    """Bytes per GPU for ``shape`` run as ``setup``.

    ``params`` overrides the counted parameters; with ``shape=None`` only ``params`` is known
    and activations and KV cache are left at 0 (said in the assumptions).
    """
    validate(shape, setup, params)
    counts = shape.params() if shape is not None else None
    total = params or (counts.total if counts else 0)
    notes: list[str] = list(shape.notes) if shape is not None else []
    parts = _Parts(weights=_weights(total, counts.embedding_and_head_matrices if counts else 0,
                                    setup, notes))
    _training_state(parts, shape, total, setup, notes)
    if shape is None:
        notes.append("no layer shapes: activations and KV cache not estimated")
    cache = None
    tp = tensor_parallel(shape, setup)
    if setup.mode is Mode.INFERENCE:
        cache = _inference(parts, shape, setup, tp, notes)
    else:
        _training_activations(parts, shape, setup, tp, notes)
        _shard_training(parts, counts.per_layer if counts else 0, setup, tp, notes)
    overlap = parts.grads > 0 and not setup.accumulate_gradients
    if overlap:
        notes.append("peak holds max(activations, gradients): no gradient accumulation, "
                     "zero_grad(set_to_none=True)")
    tensors = parts.weights + parts.grads + parts.optimizer + parts.acts + parts.kv \
        - (min(parts.grads, parts.acts) if overlap else 0)
    overhead = _overhead(tensors, setup, notes)
    values = (parts.weights, parts.grads, parts.optimizer, parts.acts, parts.kv, overhead)
    if not all(math.isfinite(v) for v in values):
        raise EstimateError("the estimate is not a finite number; check the sizes given")
    w, g, o, a, kv, over = (int(v) for v in values)
    breakdown = MemoryBreakdown(w, g, o, a, kv, over, overlap)
    name = shape.name if shape is not None else f"{total:,} parameters"
    active = counts.active if counts is not None and not params else total
    chunk = prefill_chunk(setup) if setup.mode is Mode.INFERENCE and shape is not None \
        and shape.lm_head else None  # an encoder takes its whole sequence in one pass
    return MemoryEstimate(name, total, parts.trainable, setup, breakdown, tuple(notes),
                          active, cache, _warnings(shape, setup), tp, chunk)


def with_gpus(setup: Setup, gpus: int, tp: int | None = None) -> Setup:
    """``setup`` spread over ``gpus``: FSDP/ZeRO-3 for training (beside its tensor-parallel
    groups), tensor (x pipeline) parallel ``tp`` for inference (None: derived)."""
    if setup.mode is Mode.INFERENCE or gpus == (tp or setup.tensor_parallel or 1):
        return replace(setup, gpus=gpus, tensor_parallel=tp or setup.tensor_parallel)
    return replace(setup, gpus=gpus, zero_stage=max(setup.zero_stage, 3))
