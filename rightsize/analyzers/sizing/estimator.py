"""Memory estimator: how many bytes a training or inference job needs per GPU.

Inputs: a :class:`~rightsize.analyzers.sizing.hf_config.ModelShape` (from a Hugging Face config or
explicit shapes) and a :class:`Setup` (mode, precision, batch, sequence, optimizer, activation
recomputation, FlashAttention, ZeRO/FSDP sharding). Outputs: a frozen :class:`MemoryEstimate`
with weights, gradients, optimizer states, activations, KV cache and overhead, and its total.

Pure arithmetic, no I/O. The bytes-per-parameter and overhead figures are named data in
:data:`OPTIMIZER_STATE_BYTES` and :data:`ASSUMPTIONS`, each with its reason and source; the
activation formula is Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", eq. 1-2) generalized to grouped-query attention and gated MLPs, see
docs/sizing.md. Placing the estimate on catalog GPUs lives in ``estimator_fit``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any

from rightsize.analyzers.sizing.hf_config import MlpKind, ModelShape, NormKind
from rightsize.errors import RightsizeError
from rightsize.vocab import Precision


class EstimateError(RightsizeError):
    """The requested setup is contradictory (e.g. training int4 weights without LoRA)."""


class Mode(StrEnum):
    TRAIN = "train"  # pre-training: every parameter trained
    FINETUNE = "finetune"  # full fine-tuning: the same memory as train
    LORA = "lora"  # frozen base (any precision, int4 = QLoRA) + trainable low-rank adapters
    INFERENCE = "inference"


class Optimizer(StrEnum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD = "sgd"  # with momentum
    ADAM8BIT = "adam8bit"  # bitsandbytes 8-bit Adam


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"  # recompute the attention core only (Korthikanti et al. 2022 sec. 4)
    FULL = "full"  # keep only each layer's input; recompute the layer in backward


BYTES_PER_ELEMENT: dict[Precision, float] = {
    Precision.FP32: 4, Precision.TF32: 4, Precision.BF16: 2, Precision.FP16: 2,
    Precision.FP8: 1, Precision.INT8: 1, Precision.INT4: 0.5,
}

# Optimizer state bytes per trainable parameter: (fp32 training, mixed precision). Mixed
# precision adds the fp32 master copy (4 bytes), hence Adam 4+4+4 = 12: with 2-byte weights and
# grads that is the 16 bytes/parameter of Rajbhandari et al. 2020 (ZeRO, sec. 3.1).
OPTIMIZER_STATE_BYTES: dict[Optimizer, tuple[float, float]] = {
    Optimizer.ADAM: (8, 12),  # exp_avg + exp_avg_sq in fp32 (+ master)
    Optimizer.ADAMW: (8, 12),  # same states as Adam
    Optimizer.SGD: (4, 8),  # momentum buffer (+ master)
    Optimizer.ADAM8BIT: (2, 6),  # Dettmers et al. 2022: two 8-bit states (+ master)
}


@dataclass(frozen=True, slots=True)
class Assumptions:
    """Fixed figures the estimate relies on; each says why."""

    # torch 2.x CUDA context with lazy module loading plus cuBLAS/cuDNN workspaces is typically
    # 0.5-1 GiB as nvidia-smi shows before the first tensor; we take the upper end.
    cuda_context_bytes: int = 1 << 30
    # The caching allocator rounds blocks (512 B / 2 MiB segments) and fragments; 5% on top of
    # the tensors is a common rule (PyTorch "Understanding CUDA memory usage" notes reserved >
    # allocated).
    allocator_fragmentation_fraction: float = 0.05
    # HF PEFT defaults: LoRA rank 16 on the four attention projections (q, k, v, o).
    lora_rank: int = 16
    # Inference holds one layer's working set at a time; logits only for the last position.
    inference_layers_live: int = 1


ASSUMPTIONS = Assumptions()


@dataclass(frozen=True, slots=True)
class SavedTensors:
    """What PyTorch eager autograd keeps that fused Megatron kernels do not (bytes/element)."""

    # LlamaRMSNorm upcasts to fp32 and keeps that copy (for pow) and the normalized output (for
    # the weight multiply); native LayerNorm keeps only its input (+ per-token mean/rstd).
    rmsnorm_fp32_copy_bytes: float = 4
    # HF eager attention runs softmax in fp32 and keeps its output (plus a 16-bit cast copy).
    softmax_bytes: float = 4

    @staticmethod
    def loss_bytes_per_logit(e: float) -> float:
        """Logits (e), their fp32 copy for the loss (4, none if already fp32), the fp32
        log-softmax kept for backward (4) and the fp32 gradient when backward starts (4)."""
        return e + (4 if e < 4 else 0) + 4 + 4


SAVED_TENSORS = SavedTensors()


@dataclass(frozen=True, slots=True)
class Setup:
    """How the model runs. ``batch`` is the micro-batch per GPU; ``seq`` is the sequence length
    (for inference: prompt plus generated tokens, which sizes the KV cache)."""

    mode: Mode = Mode.TRAIN
    precision: Precision = Precision.BF16
    batch: int = 1
    seq: int = 2048
    optimizer: Optimizer = Optimizer.ADAMW
    recompute: Recompute = Recompute.NONE
    flash_attention: bool = True  # SDPA picks Flash/memory-efficient kernels on recent GPUs
    zero_stage: int = 0  # 0 = plain data parallel; 3 = FSDP full shard
    gpus: int = 1  # data-parallel (ZeRO) or, for inference, tensor-parallel degree
    lora_rank: int = ASSUMPTIONS.lora_rank
    device: str = "cuda"  # "cpu": no CUDA context, no allocator fragmentation
    # Gradients live through the forward pass: gradient accumulation over micro-batches, DDP
    # gradient buckets, or zero_grad(set_to_none=False). Otherwise backward frees activations
    # as it creates gradients and the peak holds only the larger of the two.
    accumulate_gradients: bool = False


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

    @property
    def total_bytes(self) -> int:
        return self.memory.total_bytes

    def to_json(self) -> dict[str, Any]:
        m = self.memory
        return {
            "model": self.model,
            "params": self.params,
            "trainable_params": self.trainable_params,
            "setup": {f.name: (str(v) if isinstance(v := getattr(self.setup, f.name), StrEnum)
                               else v) for f in fields(Setup)},
            "memory_bytes": {
                "weights": m.weights_bytes, "gradients": m.gradients_bytes,
                "optimizer": m.optimizer_bytes, "activations": m.activations_bytes,
                "kv_cache": m.kv_cache_bytes, "overhead": m.overhead_bytes,
                "total": m.total_bytes,
            },
            "assumptions": list(self.assumptions),
        }


def kv_cache_bytes(shape: ModelShape, seq: int, batch: int, bytes_per_element: float) -> int:
    """``2 x layers x kv_heads x head_dim x seq x batch x bytes`` (K and V; GQA-aware)."""
    return int(2 * shape.num_layers * shape.kv_heads * shape.head_size * seq * batch
               * bytes_per_element)


def lora_params(shape: ModelShape, rank: int) -> int:
    """Adapter parameters: rank x (in + out) for q, k, v and o in every layer."""
    h, q, kv = shape.hidden_size, shape.q_dim, shape.kv_dim
    return rank * ((h + q) * 2 + (h + kv) * 2) * shape.num_layers


def layer_activation_bytes(shape: ModelShape, setup: Setup, e: float) -> float:
    """Bytes one layer keeps for backward, counted as PyTorch eager autograd saves them.

    Korthikanti et al. 2022 (eq. 1) count ``s*b*h*(34 + 5*a*s/h)`` for 16-bit Megatron with
    fused norms and a 4h GELU MLP. We keep their structure (per-token terms plus the
    ``a*s^2`` attention-score term that FlashAttention and selective recomputation remove) and
    count the tensors that the Hugging Face eager modules keep; see :data:`SAVED_TENSORS`.
    """
    h, q, kv = shape.hidden_size, shape.q_dim, shape.kv_dim
    i = shape.expert_intermediate_size or shape.intermediate_size
    if shape.num_experts:  # each token's activations live in the experts it is routed to
        i = i * max(shape.experts_per_token, 1)
    rms = shape.norm is NormKind.RMSNORM
    per_token = 2 * ((SAVED_TENSORS.rmsnorm_fp32_copy_bytes + e) * h if rms else e * h)
    per_token += e * (h + q + 2 * kv + q)  # q/k/v input, Q, K, V, o-proj input
    per_token += e * (h + (4 * i if shape.mlp is MlpKind.GATED else 2 * i))
    # Dropout masks: CUDA's fused dropout keeps a bool mask; CPU keeps a float noise tensor.
    mask = 1 if setup.device == "cuda" else e
    if shape.hidden_dropout:
        per_token += 2 * h * mask
    scores = 0.0
    if setup.flash_attention:
        per_token += e * q + 4 * shape.num_heads  # SDPA keeps its output and fp32 log-sum-exp
    elif setup.recompute is Recompute.NONE:
        per_token += e * 2 * (q - kv)  # repeat_kv copies of K and V for grouped-query attention
        per_score = SAVED_TENSORS.softmax_bytes + (e if e < 4 else 0)
        per_score += (mask + e) if shape.attention_dropout else 0  # mask and dropped output
        scores = per_score * shape.num_heads * setup.seq * setup.seq * setup.batch
    return per_token * setup.seq * setup.batch + scores


def activation_bytes(shape: ModelShape, setup: Setup, e: float) -> int:
    """Activations kept for backward (training) or live at once (inference)."""
    tokens = setup.seq * setup.batch
    h, v = shape.hidden_size, shape.vocab_size
    if setup.mode is Mode.INFERENCE:
        i = (shape.expert_intermediate_size or shape.intermediate_size) * max(
            shape.experts_per_token, 1)
        width = 2 * h + shape.q_dim + 2 * shape.kv_dim + 3 * i
        scores = 0 if setup.flash_attention else shape.num_heads * setup.seq * setup.seq
        live = ASSUMPTIONS.inference_layers_live * e * (width * tokens + scores * setup.batch)
        return int(live + 4 * v * setup.batch)  # fp32 logits of the last position
    layer = layer_activation_bytes(shape, setup, e)
    if setup.recompute is Recompute.FULL:
        layers = e * h * tokens * shape.num_layers + layer  # inputs + one layer rematerialized
    else:
        layers = layer * shape.num_layers
    norm = (SAVED_TENSORS.rmsnorm_fp32_copy_bytes + e) * h if shape.norm is NormKind.RMSNORM \
        else e * h
    head = tokens * (norm + e * h + v * SAVED_TENSORS.loss_bytes_per_logit(e))
    return int(layers + head)


def estimate(shape: ModelShape | None, setup: Setup, params: int | None = None) -> MemoryEstimate:
    """Bytes per GPU for ``shape`` run as ``setup``.

    ``params`` overrides the counted parameters; with ``shape=None`` only ``params`` is known
    and activations and KV cache are left at 0 (said in the assumptions).
    """
    if shape is None and not params:
        raise EstimateError("give a model config, layer shapes, or --params")
    if setup.batch < 1 or setup.seq < 1 or setup.gpus < 1:
        raise EstimateError("batch, seq and gpus must be at least 1")
    if setup.zero_stage not in (0, 1, 2, 3):
        raise EstimateError(f"ZeRO stage must be 0-3, not {setup.zero_stage}")
    train = setup.mode in (Mode.TRAIN, Mode.FINETUNE)
    quantized = setup.precision in (Precision.INT8, Precision.INT4)
    if train and quantized:
        raise EstimateError(f"{setup.precision} weights cannot be trained directly; use"
                            " --mode lora (QLoRA) or a float precision")
    counts = shape.params() if shape is not None else None
    total_params = params or (counts.total if counts else 0)
    vocab_params = counts.embedding_and_head_matrices if counts else 0
    layer_params = counts.per_layer if counts else 0
    w_bytes = BYTES_PER_ELEMENT[setup.precision]
    # Activations and KV cache: 16-bit unless the run is fp32 (fp8/int weights compute in 16-bit).
    e = 4.0 if setup.precision in (Precision.FP32, Precision.TF32) else 2.0
    notes: list[str] = []
    if quantized:  # bitsandbytes/GPTQ keep the embedding and lm head in 16-bit
        weights = (total_params - vocab_params) * w_bytes + vocab_params * 2
        notes.append("quantized weights: embedding and lm head kept in 16-bit")
    else:
        weights = total_params * w_bytes
    grads = optimizer = 0.0
    trainable = 0
    mixed = e == 2.0
    if train:
        trainable = total_params
        grads = trainable * e
        optimizer = trainable * OPTIMIZER_STATE_BYTES[setup.optimizer][1 if mixed else 0]
        notes.append(f"{setup.optimizer} {'mixed precision' if mixed else 'fp32'}: "
                     f"{w_bytes + e + OPTIMIZER_STATE_BYTES[setup.optimizer][int(mixed)]:g}"
                     " bytes per parameter")
    elif setup.mode is Mode.LORA:
        if shape is None:
            raise EstimateError("LoRA needs the layer shapes (a model config or --layers ...)")
        trainable = lora_params(shape, setup.lora_rank)
        weights += trainable * 4  # PEFT keeps adapters in fp32
        grads = trainable * 4
        optimizer = trainable * OPTIMIZER_STATE_BYTES[setup.optimizer][0]
        notes.append(f"LoRA rank {setup.lora_rank} on q, k, v, o in fp32 (HF PEFT defaults)")
    n = setup.gpus
    if shape is None:
        notes.append("no layer shapes: activations and KV cache not estimated")
    if setup.mode is Mode.INFERENCE:
        kv: float = kv_cache_bytes(shape, setup.seq, setup.batch, e) if shape else 0
        if n > 1:
            weights, kv = weights / n, kv / n
            notes.append(f"tensor parallel over {n} GPUs: weights and KV cache split {n} ways")
        acts = activation_bytes(shape, setup, e) if shape else 0
    else:
        kv = 0
        acts = activation_bytes(shape, setup, e) if shape else 0
        if n > 1 and setup.zero_stage >= 1:
            optimizer /= n
        if n > 1 and setup.zero_stage >= 2:
            grads /= n
        if n > 1 and setup.zero_stage >= 3:
            # FSDP all-gathers one layer (and prefetches the next) in full.
            weights = weights / n + 2 * layer_params * w_bytes
        if n > 1:
            notes.append(f"ZeRO stage {setup.zero_stage} over {n} GPUs; batch is per GPU")
        notes.append(f"activations: Korthikanti et al. 2022, recompute={setup.recompute},"
                     f" flash_attention={setup.flash_attention}")
    overlap = grads > 0 and not setup.accumulate_gradients
    tensors = weights + grads + optimizer + acts + kv - (min(grads, acts) if overlap else 0)
    if overlap:
        notes.append("peak holds max(activations, gradients): no gradient accumulation, "
                     "zero_grad(set_to_none=True)")
    if setup.device == "cuda":
        overhead = (ASSUMPTIONS.cuda_context_bytes
                    + ASSUMPTIONS.allocator_fragmentation_fraction * tensors)
        notes.append("overhead: 1 GiB CUDA context and workspaces + 5% allocator fragmentation")
    else:
        overhead = 0
    breakdown = MemoryBreakdown(int(weights), int(grads), int(optimizer), int(acts), int(kv),
                                int(overhead), overlap)
    name = shape.name if shape else f"{total_params:,} parameters"
    return MemoryEstimate(name, total_params, trainable, setup, breakdown, tuple(notes))


def with_gpus(setup: Setup, gpus: int) -> Setup:
    """``setup`` spread over ``gpus``: FSDP/ZeRO-3 for training, tensor parallel for inference."""
    if setup.mode is Mode.INFERENCE or gpus == 1:
        return replace(setup, gpus=gpus)
    return replace(setup, gpus=gpus, zero_stage=max(setup.zero_stage, 3))
