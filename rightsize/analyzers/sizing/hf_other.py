"""Encoder-decoder (T5, BART lineage) and vision-transformer (ViT) configs, for the count.

Inputs: a :class:`~.hf_fields.Fields` over a parsed ``config.json``. Outputs: a
:class:`~.model_shape.ModelShape` whose parameter count is the transformers model's
(t5-small 60,506,624; bart-base 139,420,416; vit-base-patch16-224 as ViTModel 86,389,248).
The stack is expressed as one layer list (encoder + decoder layers) plus
``cross_attention_layers`` and ``extra_params`` for what sits outside it. Memory beyond the
weights (activations, KV cache) is modelled as for a decoder of the same width, said in notes.
"""

from __future__ import annotations

from dataclasses import replace

from rightsize.analyzers.sizing.hf_fields import Fields, ModelConfigError
from rightsize.analyzers.sizing.model_shape import MlpKind, ModelShape, NormKind, mlp_params

# T5Config default for relative_attention_num_buckets.
T5_BUCKETS = 32


def handles(f: Fields) -> bool:
    """Encoder-decoder (``is_encoder_decoder``/``num_decoder_layers``/``decoder_layers``) or
    vision (``image_size`` with ``patch_size``) configs."""
    return bool(f.flag("is_encoder_decoder", default=False)) or f.has("num_decoder_layers") \
        or f.has("decoder_layers") or (f.has("image_size") and f.has("patch_size"))


def read(f: Fields, name: str) -> ModelShape:
    if f.has("image_size") and f.has("patch_size"):
        shape = _vit(f)
    elif f.has("d_kv") or f.has("relative_attention_num_buckets"):
        shape = _t5(f)
    elif f.has("encoder_layers"):
        shape = _bart(f)
    else:
        raise ModelConfigError("encoder-decoder config has neither d_kv (T5) nor"
                               " encoder_layers (BART): its layout is not known")
    notes = list(shape.notes)
    unread = f.unread()
    if unread:
        notes.append("config fields not understood, assumed not to change the parameter"
                     f" count or memory: {', '.join(unread)}")
    return replace(shape, name=name or f.text("_name_or_path") or f.text("model_type"),
                   notes=tuple(notes))


def _req(f: Fields, *keys: str) -> int:
    value = f.count(*keys, required=True, minimum=1)
    assert value is not None
    return value


def _t5(f: Fields) -> ModelShape:
    """T5ForConditionalGeneration: bias-free attention and MLP, weight-only norms, relative
    position buckets in the first layer of each stack, final norms on both stacks."""
    d, heads = _req(f, "d_model"), _req(f, "num_heads")
    enc = _req(f, "num_layers")
    dec = f.count("num_decoder_layers", minimum=1) or enc
    buckets = f.count("relative_attention_num_buckets", minimum=1) or T5_BUCKETS
    gated = f.text("feed_forward_proj").startswith("gated")
    return ModelShape(hidden_size=d, num_layers=enc + dec, num_heads=heads,
                      head_dim=_req(f, "d_kv"), intermediate_size=_req(f, "d_ff"),
                      vocab_size=_req(f, "vocab_size"),
                      mlp=MlpKind.GATED if gated else MlpKind.PLAIN,
                      tied_embeddings=bool(f.flag("tie_word_embeddings", default=True)),
                      cross_attention_layers=dec, extra_params=2 * buckets * heads + d,
                      notes=(("encoder-decoder (T5): activations and KV cache modelled as a"
                             " decoder of the same width"),))


def _bart(f: Fields) -> ModelShape:
    """BartForConditionalGeneration: biases everywhere, LayerNorm, learned positions with an
    offset of 2 and an embedding LayerNorm on each stack, no final norms, tied lm head."""
    d = _req(f, "d_model")
    enc, dec = _req(f, "encoder_layers"), _req(f, "decoder_layers")
    enc_ffn, dec_ffn = _req(f, "encoder_ffn_dim"), _req(f, "decoder_ffn_dim")
    positions = _req(f, "max_position_embeddings") + 2
    shape = ModelShape(hidden_size=d, num_layers=enc + dec,
                       num_heads=_req(f, "encoder_attention_heads"),
                       intermediate_size=enc_ffn, vocab_size=_req(f, "vocab_size"),
                       mlp=MlpKind.PLAIN, norm=NormKind.LAYERNORM, qkv_bias=True,
                       out_bias=True, mlp_bias=True, final_norm=False,
                       tied_embeddings=bool(f.flag("tie_word_embeddings", default=True)),
                       cross_attention_layers=dec, max_positions=positions - 2,
                       notes=(("encoder-decoder (BART): activations and KV cache modelled as"
                              " a decoder of the same width"),))
    _req(f, "decoder_attention_heads")
    ffn_delta = dec * (mlp_params(shape, dec_ffn) - mlp_params(shape, enc_ffn))
    final = f.flag("add_final_layer_norm", default=f.text("model_type") == "mbart")
    norms = 2 * 2 * d if final else 0
    extra = 2 * positions * d + 2 * 2 * d + ffn_delta + norms
    return replace(shape, extra_params=extra)


def _vit(f: Fields) -> ModelShape:
    """ViTModel: patch-embedding convolution, class token, learned positions, biased
    attention and MLP, LayerNorms, final LayerNorm, pooler (not in ForImageClassification,
    which has a classifier instead)."""
    h = _req(f, "hidden_size")
    image, patch = _req(f, "image_size"), _req(f, "patch_size")
    channels = f.count("num_channels", minimum=1) or 3
    patches = (image // patch) ** 2
    _, arch = f.raw("architectures")
    classifier = isinstance(arch, list) and any(
        isinstance(a, str) and a.endswith("ForImageClassification") for a in arch)
    _, labels = f.raw("id2label")
    n_labels = len(labels) if isinstance(labels, dict) and labels else 2
    extra = h + channels * patch * patch * h + h
    extra += n_labels * (h + 1) if classifier else 0
    return ModelShape(hidden_size=h, num_layers=_req(f, "num_hidden_layers"),
                      num_heads=_req(f, "num_attention_heads"),
                      intermediate_size=_req(f, "intermediate_size"), vocab_size=0,
                      mlp=MlpKind.PLAIN, norm=NormKind.LAYERNORM,
                      qkv_bias=bool(f.flag("qkv_bias", default=True)), out_bias=True,
                      mlp_bias=True, learned_positions=patches + 1, lm_head=False,
                      pooler=not classifier, extra_params=extra, max_positions=patches + 1,
                      notes=((f"vision transformer: its sequence is {patches} patches + the class"
                             f" token; pass --seq {patches + 1}"),))
