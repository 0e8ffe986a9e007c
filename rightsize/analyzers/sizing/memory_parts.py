"""The shape-dependent parts of a memory estimate: KV cache, activations, LoRA adapters.

Inputs: a :class:`~.model_shape.ModelShape`, the run's :class:`~.estimator.Setup` fields
(mode, batch, seq, recompute, flash attention, device) and the bytes per activation element.
Outputs: byte counts, and a frozen :class:`KvCache` that says how the cache was sized.

KV cache: ``2 x kv_heads x head_dim`` elements per token per layer (grouped-query aware); under
multi-head latent attention the ``kv_lora_rank + qk_rope_head_dim`` latent that vLLM and SGLang
keep (the decompressed per-head K and V are reported beside it); sliding-window layers hold at
most the window. Activations: the tensors PyTorch eager autograd keeps, in the structure of
Korthikanti et al. 2022 (eq. 1-2), per layer kind (dense, MoE, latent attention); docs/sizing.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rightsize.analyzers.sizing.model_shape import MlpKind, ModelShape, NormKind
from rightsize.analyzers.sizing.run_setup import ASSUMPTIONS, Mode, Recompute, Setup


@dataclass(frozen=True, slots=True)
class SavedTensors:
    """What PyTorch eager autograd keeps that fused Megatron kernels do not (bytes/element)."""

    # LlamaRMSNorm upcasts to fp32 and keeps that copy (for pow) and the normalized output (for
    # the weight multiply); native LayerNorm keeps only its input (+ per-token mean/rstd).
    rmsnorm_fp32_copy_bytes: float = 4
    # HF eager attention runs softmax in fp32 and keeps its output (plus a 16-bit cast copy).
    softmax_bytes: float = 4
    # MoE routers (Mixtral, Qwen2-MoE, DeepSeek) softmax their logits in fp32.
    router_softmax_bytes: float = 4

    @staticmethod
    def loss_bytes_per_logit(e: float) -> float:
        """Logits (e), their fp32 copy for the loss (4, none if already fp32), the fp32
        log-softmax kept for backward (4) and the fp32 gradient when backward starts (4)."""
        return e + (4 if e < 4 else 0) + 4 + 4


SAVED_TENSORS = SavedTensors()


@dataclass(frozen=True, slots=True)
class KvCache:
    """How the KV cache was sized (elements per token summed over layers)."""

    bytes: int
    elements_per_token: int  # at full context, every layer
    decompressed_bytes: int | None  # MLA: per-head K and V as eager attention rebuilds them
    window_tokens: int  # 0 = no sliding-window layers
    sliding_layers: int
    definition: str

    def to_json(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "elements_per_token": self.elements_per_token,
                "decompressed_bytes": self.decompressed_bytes,
                "window_tokens": self.window_tokens, "sliding_layers": self.sliding_layers,
                "definition": self.definition}


def kv_elements_per_token_layer(shape: ModelShape, decompressed: bool = False) -> int:
    if shape.mla and not decompressed:
        return shape.kv_lora_rank + shape.qk_rope_head_dim
    if shape.mla:
        return shape.num_heads * (shape.head_size + shape.v_head_dim)
    return 2 * shape.kv_heads * shape.head_size


def _cached_token_layers(shape: ModelShape, seq: int) -> int:
    """Sum over layers of the tokens each keeps: sliding layers at most the window."""
    sliding = shape.sliding_layers if shape.sliding_window else 0
    return (shape.num_layers - sliding) * seq + sliding * min(seq, shape.sliding_window)


def kv_cache_bytes(shape: ModelShape, seq: int, batch: int, bytes_per_element: float) -> int:
    """``2 x layers x kv_heads x head_dim x seq x batch x bytes`` (K and V; GQA-aware), the
    MLA latent instead of K and V, sliding-window layers capped at the window."""
    return int(kv_elements_per_token_layer(shape) * _cached_token_layers(shape, seq) * batch
               * bytes_per_element)


def kv_cache(shape: ModelShape, seq: int, batch: int, e: float) -> KvCache:
    token_layers = _cached_token_layers(shape, seq)
    per = kv_elements_per_token_layer(shape)
    decompressed = None
    if shape.mla:
        decompressed = int(kv_elements_per_token_layer(shape, True) * token_layers * batch * e)
        words = (f"MLA latent: (kv_lora_rank {shape.kv_lora_rank} + qk_rope_head_dim"
                 f" {shape.qk_rope_head_dim}) x layers x seq x batch x bytes (as vLLM/SGLang"
                 " keep it)")
    else:
        words = "2 x kv_heads x head_dim x layers x seq x batch x bytes"
    if shape.sliding_window and shape.sliding_layers:
        words += (f"; {shape.sliding_layers} of {shape.num_layers} layers keep at most the"
                  f" {shape.sliding_window}-token window")
    return KvCache(int(per * token_layers * batch * e), per * shape.num_layers, decompressed,
                   shape.sliding_window if shape.sliding_layers else 0, shape.sliding_layers,
                   words)


def lora_params(shape: ModelShape, rank: int) -> int:
    """Adapter parameters: rank x (in + out) for q, k, v and o in every layer (under MLA the
    adapters sit on q, kv_a, kv_b and o, PEFT's usual targets there)."""
    h = shape.hidden_size
    if shape.mla:
        q_in = shape.q_lora_rank or h
        kv_a = shape.kv_lora_rank + shape.qk_rope_head_dim
        kv_b = shape.num_heads * (shape.qk_nope_head_dim + shape.v_head_dim)
        per = (q_in + shape.q_dim) + (h + kv_a) + (shape.kv_lora_rank + kv_b) \
            + (shape.attn_out_dim + h)
        return rank * per * shape.num_layers
    q, kv = shape.q_dim, shape.kv_dim
    return rank * ((h + q) * 2 + (h + kv) * 2) * shape.num_layers


def _norm_bytes(shape: ModelShape, width: int, e: float) -> float:
    if shape.norm is NormKind.RMSNORM:
        return (SAVED_TENSORS.rmsnorm_fp32_copy_bytes + e) * width
    return e * width


def _mlp_bytes(shape: ModelShape, width: int, e: float) -> float:
    return e * (4 * width if shape.mlp is MlpKind.GATED else 2 * width)


def feed_forward_bytes(shape: ModelShape, e: float, moe: bool) -> float:
    """Per token: the MLP input and intermediates; for an MoE layer also the router logits and
    their fp32 softmax, and for each of the top-k experts the gathered input, its
    intermediates and its output (kept for the routing-weight multiply)."""
    h = shape.hidden_size
    if not moe:
        return e * h + _mlp_bytes(shape, shape.intermediate_size, e)
    k = max(shape.experts_per_token, 1)
    width = shape.expert_intermediate_size or shape.intermediate_size
    out = e * h + (e + SAVED_TENSORS.router_softmax_bytes) * shape.num_experts
    out += k * (2 * e * h + _mlp_bytes(shape, width, e))
    if shape.shared_expert_intermediate_size:
        out += _mlp_bytes(shape, shape.shared_expert_intermediate_size, e)
        out += e * (h + 1) if shape.shared_expert_gate else 0  # output and sigmoid gate kept
    return out


def _mla_pads_values(shape: ModelShape, flash: bool) -> bool:
    """FlashAttention needs one head size: HF's DeepseekV2 pads V to the query/key head size
    (qk_nope + qk_rope) and slices the output, so V and the kernel output are that wide."""
    return flash and shape.mla and shape.v_head_dim != shape.head_size


def attention_bytes(shape: ModelShape, e: float, flash: bool = True) -> float:
    """Per token: q/k/v input, Q, K, V, output-projection input; under MLA also the latent
    path (kv_a_layernorm and, with q_lora_rank, q_a_layernorm and their outputs)."""
    v = shape.q_dim if _mla_pads_values(shape, flash) else shape.v_dim
    per = e * (shape.hidden_size + shape.q_dim + shape.kv_dim + v + shape.attn_out_dim)
    if shape.mla:
        per += _norm_bytes(shape, shape.kv_lora_rank, e) + e * shape.kv_lora_rank
        if shape.q_lora_rank:
            per += _norm_bytes(shape, shape.q_lora_rank, e) + e * shape.q_lora_rank
    return per


def layer_activation_bytes(shape: ModelShape, setup: Setup, e: float,
                           moe: bool | None = None) -> float:
    """Bytes one layer keeps for backward, counted as PyTorch eager autograd saves them.

    Korthikanti et al. 2022 (eq. 1) count ``s*b*h*(34 + 5*a*s/h)`` for 16-bit Megatron with
    fused norms and a 4h GELU MLP. We keep their structure (per-token terms plus the
    ``a*s^2`` attention-score term that FlashAttention and selective recomputation remove) and
    count the tensors that the Hugging Face eager modules keep; see :data:`SAVED_TENSORS`.
    ``moe`` picks the layer kind (default: MoE when the model has experts).
    """
    moe = bool(shape.num_experts) if moe is None else moe
    h = shape.hidden_size
    per_token = shape.layer_norms * _norm_bytes(shape, h, e)
    per_token += attention_bytes(shape, e, setup.flash_attention)
    per_token += feed_forward_bytes(shape, e, moe)
    # Dropout masks: CUDA's fused dropout keeps a bool mask; CPU keeps a float noise tensor.
    mask = 1 if setup.device == "cuda" else e
    if shape.hidden_dropout:
        per_token += 2 * h * mask
    scores = 0.0
    if setup.flash_attention:  # SDPA keeps its output and fp32 log-sum-exp
        out = shape.q_dim if _mla_pads_values(shape, True) else shape.attn_out_dim
        per_token += e * out + 4 * shape.num_heads
    elif setup.recompute is Recompute.NONE:
        per_token += e * 2 * (shape.q_dim - shape.kv_dim)  # repeat_kv copies for GQA
        per_score = SAVED_TENSORS.softmax_bytes + (e if e < 4 else 0)
        per_score += (mask + e) if shape.attention_dropout else 0  # mask and dropped output
        # Eager sliding-window attention masks the s x s scores; it does not shrink them.
        scores = per_score * shape.num_heads * setup.seq * setup.seq * setup.batch
    return per_token * setup.seq * setup.batch + scores


def activation_bytes(shape: ModelShape, setup: Setup, e: float) -> int:
    """Activations kept for backward (training) or live at once (inference)."""
    tokens = setup.seq * setup.batch
    h, v = shape.hidden_size, shape.vocab_size
    if setup.mode is Mode.INFERENCE:
        width = 2 * h + shape.q_dim + shape.kv_dim + shape.v_dim + 3 * _live_mlp_width(shape)
        scores = 0 if setup.flash_attention else shape.num_heads * setup.seq * setup.seq
        live = ASSUMPTIONS.inference_layers_live * e * (width * tokens + scores * setup.batch)
        return int(live + 4 * v * setup.batch)  # fp32 logits of the last position
    moe_n = shape.moe_layers
    layers = (layer_activation_bytes(shape, setup, e, moe=False) * (shape.num_layers - moe_n)
              + (layer_activation_bytes(shape, setup, e, moe=True) * moe_n if moe_n else 0))
    if setup.recompute is Recompute.FULL:  # inputs + one layer rematerialized
        layers = e * h * tokens * shape.num_layers + layer_activation_bytes(shape, setup, e)
    head = tokens * (_norm_bytes(shape, h, e) + e * h + v * SAVED_TENSORS.loss_bytes_per_logit(e))
    return int(layers + head)


def _live_mlp_width(shape: ModelShape) -> int:
    if not shape.num_experts:
        return shape.intermediate_size
    width = shape.expert_intermediate_size or shape.intermediate_size
    return width * max(shape.experts_per_token, 1) + shape.shared_expert_intermediate_size
