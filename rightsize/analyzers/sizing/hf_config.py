"""Transformer model shapes, exact parameter counts, and Hugging Face ``config.json`` parsing.

Inputs: a parsed ``config.json`` (a mapping; reading the file is the caller's job) or explicit
numbers. Outputs: a frozen :class:`ModelShape` whose :meth:`ModelShape.params` counts every weight
the Hugging Face implementation creates, so published counts are reproduced exactly
(Llama-2-7B 6,738,415,616; Llama-3-8B 8,030,261,248; Mistral-7B 7,241,732,096; GPT-2 124,439,808).

Per-architecture conventions (which keys hold what, biases, MLP and norm kinds, tied embeddings
defaults) are data in :data:`ARCHITECTURES`, one line of reason each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rightsize.errors import RightsizeError
from rightsize.vocab import Precision


class ModelConfigError(RightsizeError):
    """A model config lacks what the estimator needs or uses an unsupported architecture."""


class MlpKind(StrEnum):
    GATED = "gated"  # SwiGLU/GeGLU: gate, up and down projections (Llama, Mistral, Qwen)
    PLAIN = "plain"  # fc1 -> activation -> fc2 (GPT-2, BERT)


class NormKind(StrEnum):
    RMSNORM = "rmsnorm"  # one weight vector
    LAYERNORM = "layernorm"  # weight and bias


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
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3: RMSNorm over each head's q and k
    learned_positions: int = 0  # rows of a learned position embedding (GPT-2, BERT)
    token_types: int = 0  # BERT segment embeddings
    embedding_norm: bool = False  # BERT normalizes the embeddings instead of the final output
    final_norm: bool = True
    lm_head: bool = True  # False for encoder-only base models (BERT)
    pooler: bool = False  # BERT pooler dense layer
    num_experts: int = 0  # MoE experts per layer (0 = dense MLP)
    experts_per_token: int = 0
    expert_intermediate_size: int | None = None  # None = intermediate_size
    shared_expert_intermediate_size: int = 0  # Qwen2-MoE shared expert (with a 1-unit gate)
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    dtype: Precision | None = None  # torch_dtype of the checkpoint
    name: str = ""

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_size

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_size

    def params(self) -> ParamCount:
        return count_params(self)


@dataclass(frozen=True, slots=True)
class ParamCount:
    """Parameters by place; ``active`` is what one token touches (differs for MoE)."""

    embedding: int
    per_layer: int
    layers: int
    head: int  # final norm + untied lm head + pooler
    total: int
    active: int
    embedding_and_head_matrices: int  # vocab matrices, kept 16-bit when the rest is quantized


def count_params(s: ModelShape) -> ParamCount:
    h, i = s.hidden_size, s.intermediate_size
    norm = h if s.norm is NormKind.RMSNORM else 2 * h
    vocab = s.vocab_size * h
    embedding = vocab + (s.learned_positions + s.token_types) * h
    embedding += norm if s.embedding_norm else 0
    attn = h * s.q_dim * 2 + h * s.kv_dim * 2
    attn += (s.q_dim + 2 * s.kv_dim) if s.qkv_bias else 0
    attn += h if s.out_bias else 0
    attn += 2 * s.head_size if s.qk_norm else 0

    def mlp(width: int) -> int:
        mats = 3 if s.mlp is MlpKind.GATED else 2
        bias = ((2 * width if s.mlp is MlpKind.GATED else width) + h) if s.mlp_bias else 0
        return mats * h * width + bias

    if s.num_experts:
        expert = mlp(s.expert_intermediate_size or i)
        shared = (mlp(s.shared_expert_intermediate_size) + h
                  if s.shared_expert_intermediate_size else 0)
        router = h * s.num_experts
        mlp_total = s.num_experts * expert + shared + router
        mlp_active = (s.experts_per_token or 1) * expert + shared + router
    else:
        mlp_total = mlp_active = mlp(i)
    per_layer = attn + mlp_total + 2 * norm
    head = (norm if s.final_norm else 0) + (0 if s.tied_embeddings or not s.lm_head else vocab)
    head += h * h + h if s.pooler else 0
    layers = per_layer * s.num_layers
    total = embedding + layers + head
    active = total - (mlp_total - mlp_active) * s.num_layers
    matrices = vocab * (1 if s.tied_embeddings or not s.lm_head else 2)
    return ParamCount(embedding, per_layer, layers, head, total, active, matrices)


@dataclass(frozen=True, slots=True)
class Convention:
    """How one ``model_type`` lays out its weights."""

    mlp: MlpKind = MlpKind.GATED
    norm: NormKind = NormKind.RMSNORM
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    tied_default: bool = False
    learned_positions_key: str | None = None
    encoder: bool = False
    reason: str = ""


ARCHITECTURES: dict[str, Convention] = {
    "llama": Convention(reason="LlamaConfig: SwiGLU, RMSNorm, attention_bias/mlp_bias keys"),
    "mistral": Convention(reason="MistralConfig: as Llama, GQA, untied"),
    "mixtral": Convention(reason="MixtralConfig: Mistral with num_local_experts SwiGLU experts"),
    "qwen2": Convention(qkv_bias=True, reason="Qwen2Attention: q/k/v projections have biases"),
    "qwen2_moe": Convention(qkv_bias=True, reason="Qwen2-MoE: q/k/v biases, shared expert"),
    "qwen3": Convention(qk_norm=True, reason="Qwen3Attention: no biases, q_norm/k_norm"),
    "gemma": Convention(tied_default=True, reason="GemmaConfig: GeGLU, tied, explicit head_dim"),
    "gpt2": Convention(MlpKind.PLAIN, NormKind.LAYERNORM, True, True, True, tied_default=True,
                       learned_positions_key="n_positions",
                       reason="GPT2: Conv1D with biases, LayerNorm, learned positions, tied"),
    "bert": Convention(MlpKind.PLAIN, NormKind.LAYERNORM, True, True, True, tied_default=True,
                       learned_positions_key="max_position_embeddings", encoder=True,
                       reason="BertModel: biases, embedding LayerNorm, segment embeddings, pooler"),
}

_DTYPES = {"float32": Precision.FP32, "bfloat16": Precision.BF16, "float16": Precision.FP16}


def _get(cfg: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def _int(cfg: Mapping[str, Any], *keys: str, required: bool = True) -> int | None:
    value = _get(cfg, *keys)
    if value is None:
        if required:
            raise ModelConfigError(f"model config has no {' / '.join(keys)}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ModelConfigError(f"model config key {keys[0]} is {value!r}, not a count")
    return int(value)


def from_hf_config(config: Mapping[str, Any], name: str = "") -> ModelShape:
    """A :class:`ModelShape` from a Hugging Face ``config.json`` (already parsed).

    Multimodal configs are read through their ``text_config``. An unknown ``model_type`` is
    refused rather than guessed; pass explicit shapes instead.
    """
    if not isinstance(config, Mapping):
        raise ModelConfigError("model config is not a JSON object")
    if isinstance(config.get("text_config"), Mapping):
        config = {**config["text_config"], "model_type": config["text_config"].get(
            "model_type", config.get("model_type"))}
    model_type = str(config.get("model_type") or "")
    conv = ARCHITECTURES.get(model_type)
    if conv is None:
        known = ", ".join(sorted(ARCHITECTURES))
        raise ModelConfigError(f"model_type {model_type!r} is not supported (known: {known});"
                               " pass --params or the layer shapes instead")
    h = _int(config, "hidden_size", "n_embd", "d_model")
    heads = _int(config, "num_attention_heads", "n_head")
    assert h is not None and heads is not None
    inter = _int(config, "intermediate_size", "n_inner", "ffn_dim", required=False) or 4 * h
    experts = _int(config, "num_local_experts", "num_experts", required=False) or 0
    expert_inter = _int(config, "moe_intermediate_size", required=False)
    shared_inter = _int(config, "shared_expert_intermediate_size", required=False) or 0
    dtype_name = _get(config, "torch_dtype", "dtype")
    attn_bias = config.get("attention_bias")
    return ModelShape(
        hidden_size=h,
        num_layers=_int(config, "num_hidden_layers", "n_layer", "num_layers") or 0,
        num_heads=heads,
        intermediate_size=inter,
        vocab_size=_int(config, "vocab_size") or 0,
        num_kv_heads=_int(config, "num_key_value_heads", required=False),
        head_dim=_int(config, "head_dim", required=False),
        tied_embeddings=bool(config.get("tie_word_embeddings", conv.tied_default)),
        mlp=conv.mlp,
        norm=conv.norm,
        qkv_bias=conv.qkv_bias or bool(attn_bias),
        out_bias=conv.out_bias or bool(attn_bias),
        mlp_bias=conv.mlp_bias or bool(config.get("mlp_bias")),
        qk_norm=conv.qk_norm,
        learned_positions=(_int(config, conv.learned_positions_key, required=False) or 0)
        if conv.learned_positions_key else 0,
        token_types=(_int(config, "type_vocab_size", required=False) or 0) if conv.encoder else 0,
        embedding_norm=conv.encoder,
        final_norm=not conv.encoder,
        lm_head=not conv.encoder,
        pooler=conv.encoder,
        num_experts=experts,
        experts_per_token=_int(config, "num_experts_per_tok", required=False) or 0,
        expert_intermediate_size=expert_inter,
        shared_expert_intermediate_size=shared_inter,
        attention_dropout=float(_get(config, "attention_dropout", "attn_pdrop",
                                     "attention_probs_dropout_prob") or 0.0),
        hidden_dropout=float(_get(config, "resid_pdrop", "hidden_dropout_prob",
                                  "hidden_dropout") or 0.0),
        dtype=_DTYPES.get(str(dtype_name)) if dtype_name else None,
        name=name or str(_get(config, "_name_or_path") or model_type),
    )
