"""The operators of one served forward pass, per GPU of a tensor-parallel group.

Inputs: a :class:`~rightsize.analyzers.sizing.model_shape.ModelShape` (what ``rightsize
estimate`` reads from a Hugging Face config), the tensor-parallel degree and the weight
precision. Output: a frozen :class:`Ops`: the GEMMs of a layer with their per-rank ``n x k``
(Megatron/vLLM sharding: QKV, gate and up column-parallel, O and down row-parallel, MoE experts
sharded by TP as vLLM's fused MoE does by default), the attention geometry per rank (query heads
split, KV heads split or replicated when TP exceeds them), the all-reduces per layer, the
embedding and the LM head, and :func:`layer_costs`: FLOPs and bytes of each operator of one
layer at a token count (what the tests work out by hand).

Conventions: a GEMM of ``m`` tokens, ``n`` outputs and ``k`` inputs does ``2mnk`` FLOPs and moves
its weight (``n x k`` at the weight precision) plus its input and output activations (``m x k``
and ``m x n``, 16-bit). Attention of a chunk of ``s`` new tokens over ``c`` cached ones, causal,
covers ``s x c + s(s+1)/2`` query-key pairs (a sliding window caps each query's keys), each
``4 x head_dim`` FLOPs per query head (QK^T and PV); a decode step reads every cached K and V.
Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.analyzers.sizing.model_shape import MlpKind, ModelShape

# Bytes per weight element; activations and (unless fp8) the KV cache are 16-bit.
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
ACT_BYTES = 2.0
PRECISIONS = ("bf16", "fp8", "int8", "int4")


@dataclass(frozen=True, slots=True)
class Gemm:
    """One weight matrix of a layer as one GPU multiplies it (``n`` outputs, ``k`` inputs)."""

    name: str
    n: int
    k: int
    # MoE: the layer holds ``experts`` copies and each token goes through ``top_k`` of them
    experts: int = 0
    top_k: int = 0
    quantized: bool = True  # the router and the LM head stay 16-bit


@dataclass(frozen=True, slots=True)
class Attention:
    """The attention one GPU computes: its query and KV heads (KV replicated beyond their
    count), the head size, and the sliding window of the windowed layers."""

    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    window: int = 0  # 0: full attention
    windowed_layers: int = 0


@dataclass(frozen=True, slots=True)
class Ops:
    """Every operator of a forward pass of ``config`` on one GPU of ``tp``."""

    tp: int
    layers: int
    dense_layers: int  # layers with a dense MLP
    moe_layers: int
    attention_gemms: tuple[Gemm, ...]
    dense_mlp: tuple[Gemm, ...]
    moe_mlp: tuple[Gemm, ...]  # router, routed experts, shared expert
    attention: Attention
    allreduces_per_layer: int  # 2 (after attention and MLP), 1 for a parallel block
    hidden: int
    vocab: int  # the LM head's outputs on this GPU (vocabulary split by TP)
    weight_bytes: float  # per GPU: every layer, the embedding and the LM head
    kv_bytes_per_token: float  # per GPU, every layer (a window caps sliding layers)
    kv_element_bytes: float
    weight_precision: str

    @property
    def kv_cache_dtype(self) -> str:
        return "fp8" if self.kv_element_bytes < ACT_BYTES else "bf16"

    @property
    def gemms(self) -> tuple[Gemm, ...]:
        return self.attention_gemms + self.dense_mlp + self.moe_mlp


def _mlp(prefix: str, s: ModelShape, width: int, tp: int, experts: int = 0,
         top_k: int = 0) -> list[Gemm]:
    w = max(1, width // tp)
    if s.mlp is MlpKind.GATED:
        return [Gemm(f"{prefix}gate_up", 2 * w, s.hidden_size, experts, top_k),
                Gemm(f"{prefix}down", s.hidden_size, w, experts, top_k)]
    return [Gemm(f"{prefix}up", w, s.hidden_size, experts, top_k),
            Gemm(f"{prefix}down", s.hidden_size, w, experts, top_k)]


def _attention_gemms(s: ModelShape, tp: int, kv_heads: int) -> list[Gemm]:
    h, hd = s.hidden_size, s.head_size
    if s.mla:  # DeepSeek MLA: q (maybe through q_lora), kv_a to the latent, kv_b, o
        heads = s.num_heads // tp
        out = [Gemm("q_a", s.q_lora_rank, h), Gemm("q_b", heads * hd, s.q_lora_rank)] \
            if s.q_lora_rank else [Gemm("q", heads * hd, h)]
        return [*out, Gemm("kv_a", s.kv_lora_rank + s.qk_rope_head_dim, h),
                Gemm("kv_b", heads * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank),
                Gemm("o", h, heads * s.v_head_dim)]
    q = s.num_heads // tp * hd
    return [Gemm("qkv", q + 2 * kv_heads * hd, h), Gemm("o", h, q)]


def build_ops(s: ModelShape, tp: int = 1, precision: str = "bf16", kv_cache: str = "") -> Ops:
    """The operators of ``s`` on one GPU of ``tp`` with weights at ``precision`` and the KV
    cache at ``kv_cache`` (``fp8`` or ``bf16``; empty: fp8 with fp8 weights, else 16-bit).

    Assumes ``tp`` splits the heads (check with :func:`~.step.fits` first)."""
    kv_heads = 1 if s.mla else max(1, s.kv_heads // tp)
    att = _attention_gemms(s, tp, kv_heads)
    dense = _mlp("", s, s.intermediate_size, tp)
    moe: list[Gemm] = []
    if s.num_experts:
        width = s.expert_intermediate_size or s.intermediate_size
        moe = [Gemm("router", s.num_experts, s.hidden_size, quantized=False),
               *_mlp("expert_", s, width, tp, s.num_experts, s.experts_per_token or 1)]
        if s.shared_expert_intermediate_size:
            moe += _mlp("shared_", s, s.shared_expert_intermediate_size, tp)
    wb = WEIGHT_BYTES[precision]
    layer_w = sum(g.n * g.k * wb for g in att)
    dense_w = sum(g.n * g.k * wb for g in dense)
    moe_w = sum(g.n * g.k * (g.experts or 1) * (wb if g.quantized else ACT_BYTES) for g in moe)
    moe_n = s.moe_layers
    vocab = -(-s.vocab_size // tp)
    tables = (1 if s.tied_embeddings or not s.lm_head else 2) * vocab * s.hidden_size * ACT_BYTES
    weights = (layer_w * s.num_layers + dense_w * (s.num_layers - moe_n) + moe_w * moe_n
               + tables)
    kv_b = 1.0 if (kv_cache or ("fp8" if precision == "fp8" else "bf16")) == "fp8" else ACT_BYTES
    hd = s.head_size
    per_layer = (s.kv_lora_rank + s.qk_rope_head_dim) if s.mla else 2 * kv_heads * hd
    window = s.sliding_window if s.sliding_layers else 0
    attn = Attention(s.num_heads // tp, s.num_heads // tp if s.mla else kv_heads, hd,
                     s.v_head_dim if s.mla else hd, window, s.sliding_layers if window else 0)
    return Ops(tp, s.num_layers, s.num_layers - moe_n, moe_n, tuple(att), tuple(dense),
               tuple(moe), attn, 1 if s.parallel_block else 2, s.hidden_size, vocab,
               weights, per_layer * s.num_layers * kv_b, kv_b, precision)


def experts_touched(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts ``tokens`` tokens route to, each to ``top_k`` of ``experts``
    uniformly: ``E (1 - (1 - k/E)^T)`` (all of them once the batch is large)."""
    if not experts:
        return 1.0
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def gemm_flops(g: Gemm, tokens: float) -> float:
    """FLOPs of ``g`` over ``tokens`` tokens (MoE: each token through ``top_k`` experts)."""
    return 2.0 * tokens * (g.top_k or 1) * g.n * g.k


def gemm_bytes(g: Gemm, tokens: float, weight_bytes: float) -> float:
    """Weights read (MoE: the experts the tokens touch) plus activations in and out."""
    wb = weight_bytes if g.quantized else ACT_BYTES
    rows = tokens * (g.top_k or 1)
    return (g.n * g.k * wb * experts_touched(g.experts, g.top_k, tokens)
            + rows * (g.n + g.k) * ACT_BYTES)


def causal_pairs(new: float, cached: float, window: int = 0) -> float:
    """Query-key pairs of ``new`` tokens over ``cached`` ones and themselves, causal (each
    query sees at most ``window`` keys when windowed)."""
    pairs = new * cached + new * (new + 1) / 2
    if window and new + cached > window:
        pairs = min(pairs, new * window)
    return pairs


def attention_flops(a: Attention, pairs: float) -> float:
    """QK^T and PV over ``pairs`` query-key pairs, for this GPU's query heads."""
    return 2.0 * pairs * a.heads * (a.head_dim + a.v_head_dim)


def kv_read_bytes(a: Attention, kv_tokens: float, kv_element_bytes: float) -> float:
    """K and V of ``kv_tokens`` cached tokens, this GPU's KV heads, one layer."""
    return kv_tokens * a.kv_heads * (a.head_dim + a.v_head_dim) * kv_element_bytes


@dataclass(frozen=True, slots=True)
class OpCost:
    """FLOPs and bytes of one operator of one layer on one GPU."""

    name: str
    flops: float
    bytes: float


def layer_costs(ops: Ops, tokens: int, *, prefill_seqs: int = 0, prompt: int = 0,
                decode_seqs: int = 0, kv_len: int = 0, moe: bool = False) -> list[OpCost]:
    """Every operator of one layer (a MoE layer when ``moe``) at ``tokens`` tokens: ``prefill_seqs``
    prompts of ``prompt`` tokens and/or ``decode_seqs`` sequences at KV length ``kv_len``."""
    wb = WEIGHT_BYTES[ops.weight_precision]
    out = [OpCost(g.name, gemm_flops(g, tokens), gemm_bytes(g, tokens, wb))
           for g in ops.attention_gemms + (ops.moe_mlp if moe else ops.dense_mlp)]
    a = ops.attention
    if prefill_seqs:
        pairs = prefill_seqs * causal_pairs(prompt, 0)
        io = prefill_seqs * prompt * (a.heads * (a.head_dim + a.v_head_dim)) * ACT_BYTES
        out.append(OpCost("context_attention", attention_flops(a, pairs),
                          io + kv_read_bytes(a, prefill_seqs * prompt, ops.kv_element_bytes)))
    if decode_seqs:
        out.append(OpCost("generation_attention",
                          attention_flops(a, decode_seqs * kv_len),
                          kv_read_bytes(a, decode_seqs * kv_len, ops.kv_element_bytes)))
    if ops.tp > 1:
        out.append(OpCost("all_reduce", 0.0,
                          ops.allreduces_per_layer * tokens * ops.hidden * ACT_BYTES))
    return out
