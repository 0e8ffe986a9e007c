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


@dataclass(frozen=True, slots=True)
class PerToken:
    """Bytes per token one layer keeps, split as tensor parallelism splits them (Korthikanti
    et al. 2022, sec. 4.2.2): ``sharded`` lives on one GPU of ``t`` (split by heads or by the
    MLP width), ``replicated`` on every GPU of the group (norms, the inputs of the column-parallel
    projections, dropout masks) unless sequence parallelism splits it along the sequence."""

    replicated: float
    sharded: float

    def __add__(self, other: PerToken) -> PerToken:
        return PerToken(self.replicated + other.replicated, self.sharded + other.sharded)

    def per_gpu(self, tp: int, sp: bool) -> float:
        return self.replicated / (tp if sp else 1) + self.sharded / tp


def feed_forward_bytes(shape: ModelShape, e: float, moe: bool) -> PerToken:
    """Per token: the MLP input and intermediates; for an MoE layer also the router logits and
    their fp32 softmax, and for each of the top-k experts the gathered input, its
    intermediates and its output (kept for the routing-weight multiply)."""
    h = shape.hidden_size
    if not moe:
        return PerToken(e * h, _mlp_bytes(shape, shape.intermediate_size, e))
    k = max(shape.experts_per_token, 1)
    width = shape.expert_intermediate_size or shape.intermediate_size
    # the router is not split; each expert's input and (all-reduced) output are whole
    rep = e * h + (e + SAVED_TENSORS.router_softmax_bytes) * shape.num_experts + k * 2 * e * h
    shard = k * _mlp_bytes(shape, width, e)
    if shape.shared_expert_intermediate_size:
        shard += _mlp_bytes(shape, shape.shared_expert_intermediate_size, e)
        rep += e * (h + 1) if shape.shared_expert_gate else 0  # output and sigmoid gate kept
    return PerToken(rep, shard)


def _mla_pads_values(shape: ModelShape, flash: bool) -> bool:
    """FlashAttention needs one head size: HF's DeepseekV2 pads V to the query/key head size
    (qk_nope + qk_rope) and slices the output, so V and the kernel output are that wide."""
    return flash and shape.mla and shape.v_head_dim != shape.head_size


def attention_bytes(shape: ModelShape, e: float, flash: bool = True) -> PerToken:
    """Per token: q/k/v input (whole on every GPU), Q, K, V and the output-projection input
    (split by heads); under MLA also the latent path (kv_a_layernorm and, with q_lora_rank,
    q_a_layernorm and their outputs), which tensor parallelism does not split."""
    v = shape.q_dim if _mla_pads_values(shape, flash) else shape.v_dim
    rep = e * shape.hidden_size
    if shape.mla:
        rep += _norm_bytes(shape, shape.kv_lora_rank, e) + e * shape.kv_lora_rank
        if shape.q_lora_rank:
            rep += _norm_bytes(shape, shape.q_lora_rank, e) + e * shape.q_lora_rank
    return PerToken(rep, e * (shape.q_dim + shape.kv_dim + v + shape.attn_out_dim))


def layer_activation_bytes(shape: ModelShape, setup: Setup, e: float,
                           moe: bool | None = None, tp: int = 1, sp: bool = False) -> float:
    """Bytes one layer keeps for backward on one GPU, counted as PyTorch eager autograd saves
    them, under tensor parallelism ``tp`` (with sequence parallelism ``sp``).

    Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
    eq. 1 and Table 2) count ``sbh(34 + 5as/h)`` per layer for 16-bit Megatron with fused norms
    and a 4h GELU MLP: ``sbh(10 + 24/t + 5as/(ht))`` under tensor parallelism ``t`` (the 24 and
    the scores split, the 10 of norms, projection inputs and dropout masks replicated) and
    ``sbh(34/t + 5as/(ht))`` with sequence parallelism (all of it split). We keep that structure
    (per-token terms plus the ``a*s^2`` attention-score term that FlashAttention and selective
    recomputation remove) and count the tensors the Hugging Face eager modules keep; see
    :data:`SAVED_TENSORS`. ``moe`` picks the layer kind (default: MoE when the model has
    experts).
    """
    moe = bool(shape.num_experts) if moe is None else moe
    h = shape.hidden_size
    per = PerToken(shape.layer_norms * _norm_bytes(shape, h, e), 0.0)
    per += attention_bytes(shape, e, setup.flash_attention)
    per += feed_forward_bytes(shape, e, moe)
    # Dropout masks: CUDA's fused dropout keeps a bool mask; CPU keeps a float noise tensor.
    mask = 1 if setup.device == "cuda" else e
    if shape.hidden_dropout:
        per += PerToken(2 * h * mask, 0.0)
    scores = 0.0
    if setup.flash_attention:  # SDPA keeps its output and fp32 log-sum-exp
        out = shape.q_dim if _mla_pads_values(shape, True) else shape.attn_out_dim
        per += PerToken(0.0, e * out + 4 * shape.num_heads)
    elif setup.recompute is Recompute.NONE:
        per += PerToken(0.0, e * 2 * (shape.q_dim - shape.kv_dim))  # repeat_kv copies for GQA
        per_score = SAVED_TENSORS.softmax_bytes + (e if e < 4 else 0)
        per_score += (mask + e) if shape.attention_dropout else 0  # mask and dropped output
        # Eager sliding-window attention masks the s x s scores; it does not shrink them.
        scores = per_score * shape.num_heads * setup.seq * setup.seq * setup.batch
    return per.per_gpu(tp, sp) * setup.seq * setup.batch + scores / tp


def activation_bytes(shape: ModelShape, setup: Setup, e: float, tp: int = 1, sp: bool = False,
                     chunk: int = 0) -> int:
    """Activations on one GPU: kept for backward (training) or live at once (inference, where
    ``chunk`` prompt tokens go through a forward pass at a time; 0: the whole prompt)."""
    if setup.mode is Mode.INFERENCE:
        return inference_activation_bytes(shape, setup, e, tp, sp, chunk)
    tokens = setup.seq * setup.batch
    h, v = shape.hidden_size, shape.vocab_size
    moe_n = shape.moe_layers
    layers = (layer_activation_bytes(shape, setup, e, False, tp, sp) * (shape.num_layers - moe_n)
              + (layer_activation_bytes(shape, setup, e, True, tp, sp) * moe_n if moe_n else 0))
    if setup.recompute is Recompute.FULL:  # inputs + one layer rematerialized
        # Each layer's input, which sequence parallelism keeps split along the sequence.
        inputs = e * h * tokens * shape.num_layers / (tp if sp else 1)
        layers = inputs + layer_activation_bytes(shape, setup, e, None, tp, sp)
    # The final norm and the head's input are replicated; Megatron's vocabulary-parallel loss
    # splits the logits and their fp32 copies t ways (Korthikanti et al. sec. 4.3: 4sbv/t).
    head = tokens * PerToken(_norm_bytes(shape, h, e) + e * h,
                             v * SAVED_TENSORS.loss_bytes_per_logit(e)).per_gpu(tp, sp)
    return int(layers + head)


def prefill_tokens(shape: ModelShape, setup: Setup, chunk: int) -> int:
    """Prompt tokens one forward pass holds: at most ``chunk`` (shared by the whole batch, as
    vLLM's ``max_num_batched_tokens``), all of them without chunking or for an encoder-only
    model (bidirectional attention: vLLM does not chunk it)."""
    tokens = setup.seq * setup.batch
    return min(chunk, tokens) if chunk and shape.lm_head else tokens


def inference_activation_bytes(shape: ModelShape, setup: Setup, e: float, tp: int = 1,
                               sp: bool = False, chunk: int = 0) -> int:
    """One layer's working set for the tokens of one forward pass (a prefill chunk), on one
    GPU of a tensor-parallel group of ``tp``, plus fp32 logits of each sequence's last position.

    The layer input and norm output (2h) are whole on every GPU (split along the sequence with
    ``sp``); Q, the MLP intermediates and the eager scores split by heads/width ``tp`` ways, K and
    V by at most the KV heads (replicated beyond, as the KV cache). Without FlashAttention a
    chunk's queries score against every key before them: ``heads x chunk x seq``."""
    live = prefill_tokens(shape, setup, chunk)
    h = shape.hidden_size
    kv_ways = tp if shape.mla else max(1, min(tp, shape.kv_heads))
    width = PerToken(2 * h, shape.q_dim + 3 * _live_mlp_width(shape)).per_gpu(tp, sp)
    width += (shape.kv_dim + shape.v_dim) / kv_ways
    scores = 0 if setup.flash_attention else shape.num_heads / tp * live * setup.seq
    layer = ASSUMPTIONS.inference_layers_live * e * (width * live + scores)
    return int(layer + 4 * shape.vocab_size * setup.batch)


def _live_mlp_width(shape: ModelShape) -> int:
    if not shape.num_experts:
        return shape.intermediate_size
    width = shape.expert_intermediate_size or shape.intermediate_size
    return width * max(shape.experts_per_token, 1) + shape.shared_expert_intermediate_size
