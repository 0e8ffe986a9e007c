"""A :class:`ModelShape` from a Hugging Face ``config.json``, derived from the config's fields.

Inputs: a parsed ``config.json`` (a mapping; reading the file is the caller's job). Outputs: a
frozen :class:`~rightsize.analyzers.sizing.model_shape.ModelShape` whose parameter count matches
``sum(p.numel() for p in model.parameters())`` of the transformers class built from it.

The structure comes from fields, not from a list of model names: ``rms_norm_eps`` vs
``layer_norm_eps`` picks the norm, ``kv_lora_rank`` turns on multi-head latent attention,
``num_key_value_heads``/``multi_query`` the KV heads, ``attention_bias``/``use_qkv_bias``/
``mlp_bias``/``use_bias`` the biases, ``n_routed_experts``/``num_local_experts`` and
``first_k_dense_replace`` the MoE layout, ``layer_types``/``sliding_window`` the windows. What a
transformers class hard-codes instead of reading is in :data:`~.hf_fields.FAMILIES`; every
assumption and every field not understood lands in ``ModelShape.notes``.
Encoder-decoder and vision configs go to :mod:`.hf_other`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rightsize.analyzers.sizing.hf_fields import (
    FAMILIES,
    Family,
    Fields,
    ModelConfigError,
    gated_by_activation,
)
from rightsize.analyzers.sizing.model_shape import (
    MlpKind,
    ModelShape,
    NormKind,
    ParamCount,
    QkNorm,
    count_params,
)
from rightsize.vocab import Precision

__all__ = ["MlpKind", "ModelConfigError", "ModelShape", "NormKind", "ParamCount", "QkNorm",
           "count_params", "from_hf_config"]

_DTYPES = {"float32": Precision.FP32, "bfloat16": Precision.BF16, "float16": Precision.FP16}


def from_hf_config(config: Mapping[str, Any], name: str = "") -> ModelShape:
    """A :class:`ModelShape` from a Hugging Face ``config.json`` (already parsed).

    Multimodal configs are read through their ``text_config``; encoder-decoder (T5, BART) and
    vision (ViT) configs through :mod:`.hf_other`. A config missing a field the structure needs
    raises :class:`ModelConfigError` naming that field.
    """
    if not isinstance(config, Mapping):
        raise ModelConfigError("model config is not a JSON object")
    text = config.get("text_config")
    towers: list[str] = []
    if isinstance(text, Mapping):
        towers = [k for k in ("vision_config", "audio_config") if k in config]
        config = {**text, "model_type": text.get("model_type", config.get("model_type"))}
    model_type = str(config.get("model_type") or "")
    family = FAMILIES.get(model_type, Family())
    notes: list[str] = []
    absent = [(k, v) for k, v in family.defaults if k not in config]
    if absent:
        config = {**config, **dict(absent)}
        notes.append(", ".join(f"{k} absent: the config class default {v}" for k, v in absent))
    f = Fields(config)
    from rightsize.analyzers.sizing import hf_other

    if hf_other.handles(f):
        return hf_other.read(f, name)
    if towers:
        notes.append(f"multimodal config: the text model only; {', '.join(towers)} towers"
                     " and projectors not counted (use --exact for the whole model)")
    if model_type and model_type not in FAMILIES:
        notes.append(f"model_type {model_type!r}: structure read from the config's fields"
                     " alone (no hard-coded conventions known for it)")
    shape = ModelShape(**_core(f, family, notes), **_norms(f, family, notes),
                       **_biases(f, family),
                       **_attention(f, family), **_moe(f, family),
                       **_embeddings(f, family, notes), **_windows(f, family),
                       attention_dropout=f.fraction("attention_dropout", "attn_pdrop",
                                                    "attention_probs_dropout_prob"),
                       hidden_dropout=f.fraction("resid_pdrop", "hidden_dropout_prob",
                                                 "hidden_dropout"),
                       dtype=_DTYPES.get(f.text("torch_dtype", "dtype")),
                       name=name or f.text("_name_or_path") or model_type)
    return _finish(shape, f, notes)


def _finish(shape: ModelShape, f: Fields, notes: list[str]) -> ModelShape:
    from dataclasses import replace

    if f.has("quantization_config"):
        notes.append("the config has a quantization_config: pass the matching --precision")
    unread = f.unread()
    if unread:
        notes.append("config fields not understood, assumed not to change the parameter count"
                     f" or memory: {', '.join(unread)}")
    return replace(shape, notes=tuple(notes))


def _core(f: Fields, family: Family, notes: list[str]) -> dict[str, Any]:
    h = f.count("hidden_size", "n_embd", "d_model", required=True, minimum=1)
    heads = f.count("num_attention_heads", "n_head", "num_heads", required=True, minimum=1)
    assert h is not None and heads is not None
    if f.flag("multi_query", default=False) and not f.flag("new_decoder_architecture",
                                                            default=False):
        kv_heads: int | None = 1
    else:
        kv_heads = f.count("num_key_value_heads", "num_kv_heads", "n_head_kv", minimum=1)
    head_dim = f.count("head_dim", minimum=1)
    if head_dim is None and not f.has("kv_lora_rank") and h % heads:
        raise ModelConfigError(f"model config has no head_dim and hidden_size {h} is not a"
                               f" multiple of num_attention_heads {heads}")
    if kv_heads and heads % kv_heads:
        raise ModelConfigError(f"num_attention_heads {heads} is not a multiple of"
                               f" num_key_value_heads {kv_heads}")
    # GPT-2/GPT-J leave n_inner null for the 4 x hidden default.
    key, _ = f.raw("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size")
    inter = f.count("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", minimum=1)
    if family.mlp_width_multiple:  # the class hard-codes it (BLOOM's 4h)
        if inter is not None and inter != family.mlp_width_multiple * h:
            notes.append(f"{key} {inter} not used: the model class's MLP is"
                         f" {family.mlp_width_multiple} x hidden_size")
        inter = family.mlp_width_multiple * h
    elif inter is None and not f.has("n_embd"):
        notes.append("no intermediate_size: 4 x hidden_size assumed (the GPT-2 default)")
    return {"hidden_size": h, "num_heads": heads, "num_kv_heads": kv_heads,
            "head_dim": head_dim, "intermediate_size": inter or 4 * h,
            "num_layers": f.count("num_hidden_layers", "n_layer", "num_layers", required=True,
                                  minimum=1),
            "vocab_size": f.count("vocab_size", required=True, minimum=1),
            "max_positions": f.count("max_position_embeddings", "n_positions", "n_ctx") or 0}


def _norms(f: Fields, family: Family, notes: list[str]) -> dict[str, Any]:
    if f.has("rms_norm_eps"):
        norm = NormKind.RMSNORM
    elif any(f.has(k) for k in ("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon",
                                "norm_epsilon")):
        norm = NormKind.LAYERNORM
    else:
        norm = NormKind.RMSNORM
        notes.append("no rms_norm_eps / layer_norm_eps: RMSNorm assumed")
    gated = family.gated_mlp
    if gated is None:
        if not f.text("hidden_act", "hidden_activation", "activation_function", "activation"):
            notes.append("no hidden_act: a gated (SwiGLU) MLP assumed")
            gated = True
        else:
            gated = gated_by_activation(f)
    parallel = f.flag("use_parallel_residual", "parallel_attn", default=family.parallel_block)
    # GPT-NeoX keeps two norms even when parallel; StableLM and Phi-style blocks keep one.
    layer_norms = family.layer_norms
    if parallel and f.text("model_type") == "stablelm":
        layer_norms = 1
    if f.flag("new_decoder_architecture", default=False):  # Falcon-40B: ln_attn and ln_mlp
        layer_norms = f.count("num_ln_in_parallel_attn", minimum=1) or 2
    elif f.text("model_type") == "falcon" and not parallel:
        layer_norms = 2
    norm_bias = f.flag("layer_norm_bias", default=family.norm_bias)
    return {"norm": norm, "norm_bias": bool(norm_bias),
            "layer_norms": layer_norms, "parallel_block": bool(parallel),
            "mlp": MlpKind.GATED if gated else MlpKind.PLAIN}


def _biases(f: Fields, family: Family) -> dict[str, Any]:
    """Biases: an explicit field wins; else the family's; else the GPT-2/BERT lineage
    (LayerNorm + plain MLP) has them everywhere and the Llama lineage nowhere."""
    lineage = (f.has("layer_norm_eps") or f.has("layer_norm_epsilon")
               or f.has("norm_epsilon")) and \
        not (family.gated_mlp or gated_by_activation(f))
    every = f.flag("use_bias", "bias", default=None)
    attn = f.flag("attention_bias", default=every)
    qkv = f.flag("use_qkv_bias", "qkv_bias", default=attn)
    mlp = f.flag("mlp_bias", default=every)

    def pick(explicit: bool | None, fam: bool | None) -> bool:
        if explicit is not None:
            return explicit
        return fam if fam is not None else bool(lineage)

    return {"qkv_bias": pick(qkv, family.qkv_bias), "out_bias": pick(attn, family.out_bias),
            "mlp_bias": pick(mlp, family.mlp_bias), "lm_head_bias": family.lm_head_bias}


def _attention(f: Fields, family: Family) -> dict[str, Any]:
    qk = QkNorm(family.qk_norm)
    qk_bias = False
    if f.flag("qk_layernorm", "use_qk_norm", default=False):
        # Phi: one LayerNorm(head_dim) with bias for all heads; StableLM: one per head, no bias.
        phi = f.text("model_type") == "phi"
        qk, qk_bias = (QkNorm.HEAD, True) if phi else (QkNorm.FULL, False)
    out: dict[str, Any] = {"qk_norm": qk, "qk_norm_bias": qk_bias}
    if f.has("kv_lora_rank"):
        for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            out[key] = f.count(key, required=True, minimum=1)
        out["q_lora_rank"] = f.count("q_lora_rank", minimum=1) or 0
    return out


def _moe(f: Fields, family: Family) -> dict[str, Any]:
    experts = f.count("num_local_experts", "num_experts", "n_routed_experts") or 0
    if not experts:
        return {}
    layers = f.count("num_hidden_layers", "n_layer", "num_layers") or 0
    top_k = f.count("num_experts_per_tok", "num_experts_per_token", "moe_topk", minimum=1)
    if top_k is None:
        raise ModelConfigError("model config has experts but no num_experts_per_tok")
    width = f.count("moe_intermediate_size", minimum=1)
    shared = f.count("shared_expert_intermediate_size") or 0
    n_shared = f.count("n_shared_experts") or 0
    if n_shared:  # DeepSeek: n_shared_experts fused into one MLP of n x moe width
        shared = n_shared * (width or 0)
    first_dense = f.count("first_k_dense_replace") or 0
    freq = f.count("moe_layer_freq", minimum=1) or 1
    step = f.count("decoder_sparse_step", minimum=1) or 1
    _, only_mlp = f.raw("mlp_only_layers")
    only = set(only_mlp) if isinstance(only_mlp, list) else set()
    moe = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0
              and (i + 1) % step == 0 and i not in only)
    return {"num_experts": experts, "experts_per_token": top_k,
            "expert_intermediate_size": width, "shared_expert_intermediate_size": shared,
            "shared_expert_gate": family.shared_expert_gate and shared > 0,
            "dense_layers": layers - moe}


def _embeddings(f: Fields, family: Family, notes: list[str]) -> dict[str, Any]:
    encoder = f.has("type_vocab_size")  # BERT lineage: segment embeddings, encoder only
    rotary = any(f.has(k) for k in ("rotary_dim", "rope_theta", "partial_rotary_factor",
                                     "rotary_pct", "rope_scaling"))
    kind = f.text("position_embedding_type")
    absolute = kind == "absolute" or (encoder and not kind)  # BertConfig's default
    positions = 0
    if absolute or (f.has("n_positions") and not rotary):
        positions = f.count("max_position_embeddings", "n_positions", minimum=1) or 0
    tied = f.flag("tie_word_embeddings", default=None)
    if tied is None:
        tied = bool(family.tied_default)
        if family.tied_default is None and not encoder:
            # ambiguous: PretrainedConfig ties by default, most decoder classes untie
            lm_head = (f.count("vocab_size") or 0) * (f.count("hidden_size", "n_embd",
                                                                "d_model") or 0)
            notes.append("tie_word_embeddings absent: an untied lm head assumed (the"
                         " transformers default ties it, many model classes do not; tied,"
                         f" {lm_head:,} parameters fewer)")
    out: dict[str, Any] = {"learned_positions": positions, "tied_embeddings": tied,
                           "embedding_norm": family.embedding_norm}
    if encoder:
        arch = _first_architecture(f)
        mlm = arch.endswith("ForMaskedLM")
        h = f.count("hidden_size", minimum=1) or 0
        vocab = f.count("vocab_size", minimum=1) or 0
        # BertOnlyMLMHead: dense + LayerNorm transform, decoder tied to the embedding + bias.
        out.update(token_types=f.count("type_vocab_size") or 0, embedding_norm=True,
                   final_norm=False, lm_head=False, pooler=not mlm,
                   extra_params=h * h + 3 * h + vocab if mlm else 0)
        if not arch:
            notes.append("encoder without architectures: the base model with its pooler")
    return out


def _windows(f: Fields, family: Family) -> dict[str, Any]:
    """Sliding-window layers: an explicit ``layer_types`` list, else the family pattern,
    Qwen2's layers above ``max_window_layers``, or every layer (Mistral)."""
    window = f.count("sliding_window") or 0
    layers = f.count("num_hidden_layers", "n_layer", "num_layers") or 0
    use = f.flag("use_sliding_window", default=True)
    above = f.count("max_window_layers")
    _, types = f.raw("layer_types")
    if isinstance(types, list):
        sliding = sum(1 for t in types if t == "sliding_attention")
        return {"sliding_window": window if sliding else 0, "sliding_layers": sliding}
    if not window or use is False:
        return {}
    pattern = f.count("sliding_window_pattern", minimum=1) or family.sliding_pattern
    if pattern:
        sliding = sum(1 for i in range(layers) if (i + 1) % pattern)
    elif above is not None:
        sliding = max(0, layers - above)
    else:
        sliding = layers
    return {"sliding_window": window if sliding else 0, "sliding_layers": sliding}


def _first_architecture(f: Fields) -> str:
    _, arch = f.raw("architectures")
    return arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else ""
