"""Transformer model shapes and their exact parameter counts.

Inputs: explicit shape numbers (from :mod:`rightsize.analyzers.sizing.hf_config` or the CLI).
Outputs: a frozen :class:`ModelShape` whose :meth:`ModelShape.params` counts every weight the
Hugging Face modules of that shape create, tied weights once, so ``sum(p.numel() for p in
model.parameters())`` is reproduced exactly (Llama-2-7B 6,738,415,616; DeepSeek-V2-Lite
15,748,993,024). Covers decoder-only and encoder-only stacks: grouped-query and multi-head
latent attention (MLA), gated or plain MLPs, biases where flagged, one/two/four norms per layer,
per-head or full-width QK-norm, mixture-of-experts layers with shared experts and dense layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rightsize.vocab import Precision


class MlpKind(StrEnum):
    GATED = "gated"  # SwiGLU/GeGLU: gate, up and down projections (Llama, Mistral, Gemma)
    PLAIN = "plain"  # fc1 -> activation -> fc2 (GPT-2, BERT, Phi, GPT-J)


class NormKind(StrEnum):
    RMSNORM = "rmsnorm"  # one weight vector
    LAYERNORM = "layernorm"  # weight, and a bias unless ``norm_bias`` is False


class QkNorm(StrEnum):
    NONE = "none"
    HEAD = "head"  # one norm of head_dim shared by every head (Qwen3, Gemma3, Phi qk_layernorm)
    FULL = "full"  # over all heads at once, or one norm per head (OLMo-2, StableLM)


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The shape of a decoder (or encoder) transformer; sizes in elements."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    num_kv_heads: int | None = None  # grouped-query attention; None = num_heads
    head_dim: int | None = None  # None = hidden_size // num_heads
    tied_embeddings: bool = False
    mlp: MlpKind = MlpKind.GATED
    norm: NormKind = NormKind.RMSNORM
    norm_bias: bool = True  # LayerNorm only
    layer_norms: int = 2  # norms per layer: 1 parallel blocks, 2 pre-norm, 4 Gemma-2 sandwich
    parallel_block: bool = False  # attention and MLP read the same input (GPT-J, Phi)
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False  # GPT-J, Phi
    qk_norm: QkNorm = QkNorm.NONE
    qk_norm_bias: bool = False
    # Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank > 0 turns it on.
    q_lora_rank: int = 0  # 0 = q_proj straight from hidden
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    learned_positions: int = 0  # rows of a learned position embedding (GPT-2, BERT)
    token_types: int = 0  # BERT segment embeddings
    embedding_norm: bool = False  # BERT normalizes the embeddings instead of the final output
    final_norm: bool = True
    lm_head: bool = True  # False for encoder-only base models (BERT)
    pooler: bool = False  # BERT pooler dense layer
    num_experts: int = 0  # MoE experts per MoE layer (0 = dense MLP)
    experts_per_token: int = 0
    expert_intermediate_size: int | None = None  # None = intermediate_size
    shared_expert_intermediate_size: int = 0  # always-on expert(s) beside the routed ones
    shared_expert_gate: bool = False  # Qwen2-MoE: a 1-unit sigmoid gate on the shared expert
    dense_layers: int = 0  # layers of an MoE model that keep a dense MLP (DeepSeek first_k)
    sliding_window: int = 0  # tokens a sliding-window layer attends to (0 = none)
    sliding_layers: int = 0  # how many layers use the window
    max_positions: int = 0  # max_position_embeddings (0 = unknown)
    # Encoder-decoder: decoder layers that also attend to the encoder (one attention + norm).
    cross_attention_layers: int = 0
    # Parameters outside the layer stack that the reader counted itself (patch embedding,
    # T5 relative position buckets, task heads), with the embedding.
    extra_params: int = 0
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    dtype: Precision | None = None  # torch_dtype of the checkpoint
    name: str = ""
    notes: tuple[str, ...] = ()  # what the config reader assumed or could not read

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_size(self) -> int:
        if self.mla:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the keys under MLA, once decompressed)."""
        return self.num_heads * self.head_size

    @property
    def kv_dim(self) -> int:
        """Width of the keys as attention sees them (decompressed under MLA)."""
        return self.q_dim if self.mla else self.kv_heads * self.head_size

    @property
    def v_dim(self) -> int:
        """Width of the values, which is also the output projection's input."""
        return self.num_heads * self.v_head_dim if self.mla else self.kv_dim

    @property
    def attn_out_dim(self) -> int:
        return self.num_heads * self.v_head_dim if self.mla else self.q_dim

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.num_experts else 0

    def params(self) -> ParamCount:
        return count_params(self)


@dataclass(frozen=True, slots=True)
class ParamCount:
    """Parameters by place; ``active`` is what one token touches (differs for MoE)."""

    embedding: int
    per_layer: int  # the largest layer (an MoE layer when there are any)
    layers: int
    head: int  # final norm + untied lm head + pooler
    total: int
    active: int
    embedding_and_head_matrices: int  # vocab matrices, kept 16-bit when the rest is quantized


def norm_params(s: ModelShape, width: int, bias: bool | None = None) -> int:
    """One norm over ``width`` elements: RMSNorm a weight; LayerNorm weight and bias."""
    if s.norm is NormKind.RMSNORM:
        return width
    return width * (2 if (s.norm_bias if bias is None else bias) else 1)


def attention_params(s: ModelShape) -> int:
    h = s.hidden_size
    if s.mla:
        return mla_params(s)
    n = h * s.q_dim * 2 + h * s.kv_dim * 2
    n += (s.q_dim + 2 * s.kv_dim) if s.qkv_bias else 0
    n += h if s.out_bias else 0
    per_norm = 2 if s.qk_norm_bias else 1
    if s.qk_norm is QkNorm.HEAD:
        n += 2 * s.head_size * per_norm
    elif s.qk_norm is QkNorm.FULL:
        n += (s.q_dim + s.kv_dim) * per_norm
    return n


def mla_params(s: ModelShape) -> int:
    """DeepseekV2Attention: q (direct or through a q_lora_rank bottleneck with its RMSNorm),
    kv_a_proj_with_mqa to kv_lora_rank + rope dims, kv_a_layernorm, kv_b_proj to per-head
    (nope + v), o_proj; ``attention_bias`` biases q_a, kv_a and o."""
    h, heads, b = s.hidden_size, s.num_heads, s.qkv_bias
    qk = s.qk_nope_head_dim + s.qk_rope_head_dim
    if s.q_lora_rank:
        r = s.q_lora_rank
        q = h * r + (r if b else 0) + r + r * heads * qk
    else:
        q = h * heads * qk
    kv_a = s.kv_lora_rank + s.qk_rope_head_dim
    kv = h * kv_a + (kv_a if b else 0) + s.kv_lora_rank
    kv += s.kv_lora_rank * heads * (s.qk_nope_head_dim + s.v_head_dim)
    o = heads * s.v_head_dim * h + (h if s.out_bias else 0)
    return q + kv + o


def mlp_params(s: ModelShape, width: int) -> int:
    h = s.hidden_size
    mats = 3 if s.mlp is MlpKind.GATED else 2
    bias = ((2 * width if s.mlp is MlpKind.GATED else width) + h) if s.mlp_bias else 0
    return mats * h * width + bias


def moe_params(s: ModelShape) -> tuple[int, int]:
    """(total, active per token) parameters of one MoE layer's feed-forward part."""
    h = s.hidden_size
    expert = mlp_params(s, s.expert_intermediate_size or s.intermediate_size)
    shared = mlp_params(s, s.shared_expert_intermediate_size) \
        if s.shared_expert_intermediate_size else 0
    shared += h if s.shared_expert_gate else 0
    router = h * s.num_experts
    return (s.num_experts * expert + shared + router,
            (s.experts_per_token or 1) * expert + shared + router)


def count_params(s: ModelShape) -> ParamCount:
    h = s.hidden_size
    vocab = s.vocab_size * h
    embedding = vocab + (s.learned_positions + s.token_types) * h
    embedding += norm_params(s, h) if s.embedding_norm else 0
    embedding += s.extra_params
    common = attention_params(s) + s.layer_norms * norm_params(s, h)
    dense = mlp_params(s, s.intermediate_size)
    moe_total, moe_active = moe_params(s) if s.num_experts else (dense, dense)
    moe_n = s.moe_layers
    dense_n = s.num_layers - moe_n
    layers = common * s.num_layers + dense * dense_n + moe_total * moe_n
    layers += s.cross_attention_layers * (attention_params(s) + norm_params(s, h))
    head = norm_params(s, h) if s.final_norm else 0
    untied = s.lm_head and not s.tied_embeddings
    head += vocab if untied else 0
    head += s.vocab_size if s.lm_head and s.lm_head_bias else 0
    head += h * h + h if s.pooler else 0
    total = embedding + layers + head
    active = total - (moe_total - moe_active) * moe_n
    per_layer = common + (moe_total if moe_n else dense)
    matrices = vocab * (2 if untied else 1)
    return ParamCount(embedding, per_layer, layers, head, total, active, matrices)
