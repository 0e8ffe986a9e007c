"""Operator counts of a served forward pass, worked by hand from two configs' numbers.

Llama-3.1-8B-Instruct (``shared/configs/dotnet-meta-llama-3.1-8B-Instruct.json``): hidden
4096, 32 heads of 128, 8 KV heads, intermediate 14336 (SwiGLU), 32 layers, vocab 128256,
untied. Mixtral-8x7B (``mlc-Mixtral-8x7B-v0.1.json``): the same attention, 8 experts of 14336,
2 per token. The fields below are copied from those files.
"""

from __future__ import annotations

import pytest

from rightsize.analyzers.serving.ops import build_ops, experts_touched, layer_costs
from rightsize.analyzers.sizing.hf_config import from_hf_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
         "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
         "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
         "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "vocab_size": 128256, "attention_bias": False,
         "mlp_bias": False}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
           "intermediate_size": 14336, "max_position_embeddings": 32768,
           "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
           "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
           "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": None,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000}


def _costs(config, tp, tokens, **kw):
    ops = build_ops(from_hf_config(config), tp, "bf16")
    return ops, {c.name: (c.flops, c.bytes) for c in layer_costs(ops, tokens, **kw)}


def test_llama_8b_one_layer_at_16_prompt_tokens_tp1():
    ops, c = _costs(LLAMA, 1, 16, prefill_seqs=1, prompt=16)
    # QKV: n = 32 x 128 + 2 x 8 x 128 = 6144, k = 4096; 2mnk; weights 2 B + (m(n+k)) x 2 B
    assert c["qkv"] == (2 * 16 * 6144 * 4096, 6144 * 4096 * 2 + 16 * (6144 + 4096) * 2)
    assert c["qkv"] == (805_306_368, 50_659_328)
    assert c["o"] == (536_870_912, 33_554_432 + 262_144)
    # gate and up fused: n = 2 x 14336 = 28672
    assert c["gate_up"] == (3_758_096_384, 234_881_024 + 1_048_576)
    assert c["down"] == (1_879_048_192, 117_440_512 + 589_824)
    # causal pairs 16 x 17 / 2 = 136; 2 x 136 x 32 heads x (128 + 128) FLOPs;
    # Q and O 16 x 32 x 256 x 2 B, K and V 16 x 8 x 256 x 2 B
    assert c["context_attention"] == (2_228_224, 262_144 + 65_536)
    assert "all_reduce" not in c
    # weights: 32 layers x (6144 + 4096 + 28672 + 14336) x 4096 x 2 B + 2 vocab matrices
    assert ops.weight_bytes == 32 * 53248 * 4096 * 2 + 2 * 128256 * 4096 * 2
    assert ops.kv_bytes_per_token == 2 * 8 * 128 * 32 * 2  # 131,072 B per token


def test_llama_8b_decode_at_tp2():
    ops, c = _costs(LLAMA, 2, 8, decode_seqs=8, kv_len=1000)
    assert c["qkv"][0] == 2 * 8 * (16 * 128 + 2 * 4 * 128) * 4096 == 201_326_592
    assert c["gate_up"][0] == 2 * 8 * 14336 * 4096 == 939_524_096
    # 8 sequences x 1000 KV tokens x 4 KV heads x 256 x 2 B
    assert c["generation_attention"] == (2 * 8000 * 16 * 256, 16_384_000)
    assert c["all_reduce"] == (0.0, 2 * 8 * 4096 * 2)
    assert ops.vocab == 64128 and ops.kv_bytes_per_token == 65_536


def test_mixtral_moe_layer_at_16_tokens_tp2():
    ops, c = _costs(MIXTRAL, 2, 16, prefill_seqs=1, prompt=16, moe=True)
    assert ops.dense_layers == 0 and ops.moe_layers == 32
    # router: 8 experts x 4096, unsharded, 16-bit
    assert c["router"] == (2 * 16 * 8 * 4096, 8 * 4096 * 2 + 16 * (8 + 4096) * 2)
    touched = 8 * (1 - (1 - 2 / 8) ** 16)
    assert experts_touched(8, 2, 16) == pytest.approx(touched) == pytest.approx(7.91982, abs=1e-5)
    # each of 16 tokens through 2 experts: gate_up n = 2 x 14336 / 2 = 14336 per GPU
    flops, bytes_ = c["expert_gate_up"]
    assert flops == 2 * 16 * 2 * 14336 * 4096 == 3_758_096_384
    assert bytes_ == pytest.approx(14336 * 4096 * 2 * touched + 32 * (14336 + 4096) * 2)
    flops, bytes_ = c["expert_down"]
    assert flops == 2 * 32 * 4096 * 7168
    assert bytes_ == pytest.approx(4096 * 7168 * 2 * touched + 32 * (4096 + 7168) * 2)
    expert = 3 * 4096 * 14336 * 2 / 2  # three matrices, bf16, split 2 ways
    assert ops.weight_bytes == 32 * ((6144 // 2 + 2048) * 4096 * 2 + 8 * expert
                                     + 8 * 4096 * 2) + 2 * 16000 * 4096 * 2


def test_fp8_and_int4_weights_and_kv():
    llama = from_hf_config(LLAMA)
    fp8 = build_ops(llama, 1, "fp8")
    assert fp8.kv_bytes_per_token == 65_536  # fp8 KV cache
    int4 = build_ops(llama, 1, "int4")
    assert int4.kv_bytes_per_token == 131_072  # 16-bit KV under weight-only quantization
    # said explicitly: vLLM's "auto" keeps fp8 weights' KV 16-bit, --kv-cache-dtype fp8 halves
    # any: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes = 131,072
    assert build_ops(llama, 1, "fp8", "bf16").kv_bytes_per_token == 131_072
    assert build_ops(llama, 1, "bf16", "fp8").kv_bytes_per_token == 65_536
    assert (fp8.kv_cache_dtype, int4.kv_cache_dtype) == ("fp8", "bf16")
    # layers at half a byte, the vocabulary matrices kept 16-bit
    assert int4.weight_bytes == 32 * 53248 * 4096 * 0.5 + 2 * 128256 * 4096 * 2
