"""Reading a Hugging Face ``config.json`` field by field, validated, remembering what was read.

Inputs: the parsed config mapping. Outputs: validated counts, flags and strings through
:class:`Fields`, and :meth:`Fields.unread` — the keys nobody read and that
:data:`NO_MEMORY_EFFECT` does not list, which the reader reports instead of ignoring silently.
Also :data:`FAMILIES`: the few conventions a Hugging Face class hard-codes rather than reading
from its config (Qwen2's q/k/v biases, Gemma-2's four norms per layer), one line of reason each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rightsize.errors import RightsizeError

# Larger than any real dimension or vocabulary (2^40 ~ 1.1e12), small enough that products stay
# exact in float64 arithmetic downstream.
MAX_COUNT = 1 << 40


class ModelConfigError(RightsizeError):
    """A model config lacks what the estimator needs or holds a value it cannot use."""


# Keys that change neither the parameter count nor the memory (token ids, RoPE and norm
# constants, initialization, generation and routing hyper-parameters, tokenizer and tooling).
NO_MEMORY_EFFECT = frozenset((
    "_name_or_path", "architectures", "auto_map", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "initializer_range",
    "initializer_factor", "transformers_version", "use_cache", "tokenizer_class", "rope_theta",
    "rope_scaling", "rope_local_base_freq", "rope_type", "rotary", "rotary_dim",
    "rotary_emb_base", "rotary_pct", "partial_rotary_factor", "rms_norm_eps", "layer_norm_eps",
    "layer_norm_epsilon", "layernorm_epsilon", "hidden_act", "hidden_activation",
    "activation_function", "torch_dtype", "dtype", "pretraining_tp", "attn_logit_softcapping",
    "final_logit_softcapping", "query_pre_attn_scalar", "cache_implementation",
    "router_aux_loss_coef", "router_jitter_noise", "output_router_logits", "norm_topk_prob",
    "scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor",
    "aux_loss_alpha", "seq_aux", "scale_attn_weights", "attention_softmax_in_fp32",
    "scale_attention_softmax_in_fp32", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "summary_type", "summary_use_proj", "summary_activation",
    "summary_proj_to_labels", "summary_first_dropout", "classifier_dropout",
    "gradient_checkpointing", "embd_pdrop", "embedding_dropout", "sliding_window_size",
    "runner_max_sequence_length", "use_flash_attn", "use_sdpa", "_attn_implementation",
    "id2label", "label2id", "problem_type", "finetuning_task", "bad_words_ids",
    "task_specific_params", "prefix", "max_length", "output_attentions",
    "output_hidden_states", "return_dict", "chunk_size_feed_forward", "is_encoder_decoder",
    "model_type", "position_embedding_type", "ep_size", "moe_layer_freq", "attention_dropout",
    "attn_pdrop", "attention_probs_dropout_prob", "hidden_dropout_prob", "resid_pdrop",
    "hidden_dropout", "dropout", "mlp_dropout", "use_return_dict", "tie_encoder_decoder",
    "rope_parameters", "dense_act_fn", "is_gated_act", "dropout_rate",
    "relative_attention_max_distance", "scale_decoder_outputs", "activation_dropout",
    "decoder_layerdrop", "encoder_layerdrop", "forced_eos_token_id", "init_std",
    "scale_embedding", "encoder_stride", "pooler_act", "original_max_position_embeddings",
    "logit_scale", "residual_dropout", "qk_head_dim", "rope_interleave", "activation", "alibi",
    "is_decoder", "norm_epsilon",
    # Megatron-DeepSpeed fusion switches and ALiBi constants that BLOOM configs carry
    "apply_residual_connection_post_layernorm", "bias_dropout_fusion", "masked_softmax_fusion",
    "offset_alibi", "skip_bias_add", "skip_bias_add_qkv", "slow_but_exact", "unk_token_id",
))


@dataclass(frozen=True, slots=True)
class Family:
    """What one ``model_type``'s Hugging Face class hard-codes instead of reading a field."""

    gated_mlp: bool | None = None  # None: SiLU activations gate, others do not
    tied_default: bool | None = None  # None: untied unless tie_word_embeddings says so
    qkv_bias: bool | None = None
    out_bias: bool | None = None
    mlp_bias: bool | None = None
    lm_head_bias: bool = False
    layer_norms: int = 2
    norm_bias: bool = True  # LayerNorm models only
    parallel_block: bool = False
    qk_norm: str = "none"  # "head" or "full" when the class always has one
    shared_expert_gate: bool = False
    sliding_pattern: int = 0  # every n-th layer is global, the rest slide (Gemma-2: 2)
    embedding_norm: bool = False  # a norm right after the token embedding (BLOOM)
    mlp_width_multiple: int = 0  # the MLP is this x hidden whatever the config says (BLOOM: 4)
    # Defaults of the config class for keys a trimmed config.json may omit (absent, not null).
    defaults: tuple[tuple[str, Any], ...] = ()
    reason: str = ""


FAMILIES: dict[str, Family] = {
    "gemma": Family(gated_mlp=True, tied_default=True,
                    reason="GemmaMLP gates with GELU; GemmaForCausalLM ties the lm head"),
    "gemma2": Family(gated_mlp=True, tied_default=True, layer_norms=4, sliding_pattern=2,
                     reason="Gemma2DecoderLayer: pre/post norms around attention and MLP;"
                            " even layers slide"),
    "gemma3_text": Family(gated_mlp=True, tied_default=True, layer_norms=4, qk_norm="head",
                          sliding_pattern=6,
                          reason="Gemma3: Gemma-2 layout plus q_norm/k_norm over head_dim"),
    "qwen2": Family(qkv_bias=True, reason="Qwen2Attention: q/k/v biases, no o bias"),
    "qwen2_moe": Family(qkv_bias=True, shared_expert_gate=True,
                        reason="Qwen2MoeSparseMoeBlock: shared expert with a sigmoid gate"),
    "qwen3": Family(qk_norm="head", reason="Qwen3Attention: q_norm/k_norm over head_dim"),
    "qwen3_moe": Family(qk_norm="head", reason="Qwen3MoeAttention: q_norm/k_norm"),
    "olmo2": Family(qk_norm="full", reason="Olmo2Attention: q_norm/k_norm over all heads"),
    "phi": Family(layer_norms=1, parallel_block=True, lm_head_bias=True,
                  reason="PhiDecoderLayer: one LayerNorm, parallel attention and MLP;"
                         " lm_head has a bias"),
    "gptj": Family(layer_norms=1, parallel_block=True, lm_head_bias=True, qkv_bias=False,
                   out_bias=False, mlp_bias=True,
                   reason="GPTJBlock: one LayerNorm, parallel; bias-free attention"),
    "llama": Family(reason="LlamaConfig: every structural choice is a config field"),
    "mistral": Family(reason="MistralConfig: as Llama; sliding_window on every layer"),
    "mixtral": Family(reason="MixtralConfig: Mistral with num_local_experts experts"),
    "stablelm": Family(reason="StableLmConfig: use_qkv_bias, qk_layernorm, parallel flags"),
    "bert": Family(defaults=(("layer_norm_eps", 1e-12), ("hidden_act", "gelu")),
                   reason="BertConfig: encoder; LayerNorm and GELU by default, pooler"),
    "deepseek_v2": Family(defaults=(("q_lora_rank", 1536),), tied_default=False,
                          reason="DeepseekV2Config: q_lora_rank defaults to 1536 when absent"),
    "deepseek_v3": Family(defaults=(("q_lora_rank", 1536),), tied_default=False,
                          reason="DeepseekV3Config: q_lora_rank defaults to 1536 when absent"),
    "cohere": Family(layer_norms=1, parallel_block=True, norm_bias=False, tied_default=True,
                     reason="CohereDecoderLayer: one bias-free LayerNorm, parallel; tied"),
    "falcon": Family(layer_norms=1, reason="FalconDecoderLayer: one norm when parallel, two"
                                           " (ln_attn, ln_mlp) in the new architecture"),
    "mbart": Family(reason="MBart: BART plus a final LayerNorm on each stack"),
    "gpt2": Family(tied_default=True, reason="GPT2LMHeadModel ties the lm head"),
    "gpt_bigcode": Family(tied_default=True, reason="GPTBigCodeForCausalLM ties the lm head"),
    "bloom": Family(gated_mlp=False, tied_default=True, embedding_norm=True,
                    mlp_width_multiple=4,
                    reason="BloomModel: word_embeddings_layernorm after the embedding; BloomMLP"
                           " is dense_h_to_4h -> GELU -> dense_4h_to_h (4 x hidden, no"
                           " activation field); BloomForCausalLM ties the lm head; ALiBi"),
    "starcoder2": Family(tied_default=True,
                         reason="Starcoder2Config: tie_word_embeddings defaults to True (the"
                                " PretrainedConfig default before 5.x, a field since)"),
}

_SILU = ("silu", "swish", "swiglu")


class Fields:
    """A config mapping whose reads are validated and recorded."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._cfg = config
        self._read: set[str] = set()

    def has(self, key: str) -> bool:
        self._read.add(key)
        return self._cfg.get(key) is not None

    def raw(self, *keys: str) -> tuple[str, Any]:
        """The first of ``keys`` with a non-null value, and that value (``("", None)``)."""
        self._read.update(keys)
        for key in keys:
            if self._cfg.get(key) is not None:
                return key, self._cfg[key]
        return "", None

    def count(self, *keys: str, required: bool = False, minimum: int = 0) -> int | None:
        """A whole number >= ``minimum`` from the first present key; a one-line error for a
        string, bool, NaN, infinity, fraction or value beyond :data:`MAX_COUNT`."""
        key, value = self.raw(*keys)
        if value is None:
            if required:
                raise ModelConfigError(f"model config has no {' / '.join(keys)}")
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ModelConfigError(f"model config key {key} is {_show(value)}, not a count")
        if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
            raise ModelConfigError(f"model config key {key} is {_show(value)}, not a count")
        if not minimum <= value <= MAX_COUNT:
            raise ModelConfigError(f"model config key {key} is {_show(value)}; it must be"
                                   f" between {minimum} and {MAX_COUNT:,}")
        return int(value)

    def fraction(self, *keys: str) -> float:
        """A probability (dropout) in [0, 1]; absent is 0."""
        key, value = self.raw(*keys)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 <= value <= 1:
            raise ModelConfigError(f"model config key {key} is {_show(value)}, not a"
                                   " probability between 0 and 1")
        return float(value)

    def flag(self, *keys: str, default: bool | None = None) -> bool | None:
        key, value = self.raw(*keys)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ModelConfigError(f"model config key {key} is {_show(value)}, not true/false")
        return value

    def text(self, *keys: str) -> str:
        _, value = self.raw(*keys)
        return value if isinstance(value, str) else ""

    def unread(self) -> list[str]:
        return sorted(k for k in self._cfg if k not in self._read and k not in NO_MEMORY_EFFECT)


def gated_by_activation(f: Fields) -> bool:
    """SiLU-family activations come with gated MLPs (SwiGLU) in every Hugging Face decoder;
    GELU ones with plain fc1/fc2 unless the family says otherwise (Gemma's GeGLU)."""
    act = f.text("hidden_act", "hidden_activation", "activation_function", "activation").lower()
    return act in _SILU


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
