"""The config reader on real configs (../shared/configs, exact counts from its SOURCES.md),
KV cache per token for GQA, MQA, MLA and sliding-window configs, validation of bad configs and
options, and --exact against transformers (skipped when it is not installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from rightsize.analyzers.sizing.estimator import Mode, Setup, estimate, kv_cache_bytes
from rightsize.analyzers.sizing.hf_config import ModelConfigError, QkNorm, from_hf_config
from rightsize.analyzers.sizing.memory_parts import kv_cache
from tests.conftest import cli, shared_path

# file -> exact count, as listed in ../shared/configs/SOURCES.md (checked against it below)
SHARED_COUNTS = {
    "dotnet-meta-llama-3.1-8B-Instruct.json": 8_030_261_248,
    "dotnet-phi-2-config.json": 2_779_683_840,
    "mlc-Mixtral-8x7B-v0.1.json": 46_702_792_704,
    "mlc-deepseek_v2_lite.json": 15_748_993_024,
    "mlc-gemma2_9b.json": 9_241_705_984,
    "mlc-gemma3_1b_it.json": 999_885_952,
    "mlc-gemma_2b.json": 2_506_172_416,
    "mlc-gpt_bigcode.json": 1_124_886_528,
    "mlc-gpt_j.json": 6_050_882_784,
    "mlc-olmo2_7b.json": 7_298_617_344,
    "mlc-qwen2moe.json": 14_315_784_192,
    "mlc-qwen3_1.7b.json": 1_720_574_976,
    "mlc-snowflake-arctic-embed-m.json": 109_482_240,
    "mlc-stablelm-2-zephyr-1_6b.json": 1_644_515_328,
}


def shared_config(name: str) -> dict:
    return json.loads(shared_path("configs", name).read_text())


def test_counts_table_is_sources_md():
    text = shared_path("configs", "SOURCES.md").read_text()
    row = r"^\| (\S+\.json) \|.*?\| \w+ \| ([\d,]+) \|"
    rows = dict(re.findall(row, text, re.MULTILINE))
    assert {k: int(v.replace(",", "")) for k, v in rows.items()} == SHARED_COUNTS


@pytest.mark.parametrize(("name", "count"), sorted(SHARED_COUNTS.items()))
def test_shared_config_counts_exact(name, count):
    assert from_hf_config(shared_config(name)).params().total == count


def test_structure_read_from_fields():
    ds = from_hf_config(shared_config("mlc-deepseek_v2_lite.json"))
    assert (ds.mla, ds.q_lora_rank, ds.dense_layers, ds.num_experts) == (True, 1536, 1, 64)
    assert ds.shared_expert_intermediate_size == 2 * 1408
    assert ds.notes[0] == "q_lora_rank absent: the config class default 1536"
    gemma2 = from_hf_config(shared_config("mlc-gemma2_9b.json"))
    assert (gemma2.layer_norms, gemma2.sliding_window, gemma2.sliding_layers) == (4, 4096, 21)
    olmo = from_hf_config(shared_config("mlc-olmo2_7b.json"))
    assert olmo.qk_norm is QkNorm.FULL
    phi = from_hf_config(shared_config("dotnet-phi-2-config.json"))
    assert (phi.parallel_block, phi.layer_norms, phi.lm_head_bias, phi.qkv_bias) == \
        (True, 1, True, True)


def test_moe_active_params():
    qwen = from_hf_config(shared_config("mlc-qwen2moe.json")).params()
    # 24 layers x (60 - 4) idle experts x 3 x 2048 x 1408; card: 2.7B activated
    assert qwen.active == 14_315_784_192 - 24 * 56 * 3 * 2048 * 1408 == 2_689_173_504


# bytes per token at 16-bit, summed over layers
@pytest.mark.parametrize(("name", "per_token"), [
    ("dotnet-meta-llama-3.1-8B-Instruct.json", 2 * 8 * 128 * 32 * 2),  # GQA 32q/8kv
    ("mlc-gpt_bigcode.json", 2 * 1 * 128 * 24 * 2),  # MQA
    ("mlc-deepseek_v2_lite.json", (512 + 64) * 27 * 2),  # MLA latent
    ("mlc-gemma2_9b.json", 2 * 8 * 256 * 42 * 2),  # below the window every layer holds all
])
def test_kv_cache_per_token_exact(name, per_token):
    assert kv_cache_bytes(from_hf_config(shared_config(name)), 1, 1, 2) == per_token


def test_mla_decompressed_size_shown():
    cache = kv_cache(from_hf_config(shared_config("mlc-deepseek_v2_lite.json")), 1, 1, 2)
    assert (cache.bytes, cache.decompressed_bytes) == (31_104, 16 * (192 + 128) * 27 * 2)


def test_sliding_window_layers_capped():
    gemma2 = from_hf_config(shared_config("mlc-gemma2_9b.json"))
    # 21 global layers keep 8192 tokens, 21 sliding layers keep the 4096-token window
    assert kv_cache_bytes(gemma2, 8192, 1, 2) == 4096 * (21 * 8192 + 21 * 4096) * 2
    gemma3 = from_hf_config(shared_config("mlc-gemma3_1b_it.json"))
    assert (gemma3.sliding_layers, gemma3.sliding_window) == (22, 512)
    assert kv_cache_bytes(gemma3, 4096, 1, 2) == 2 * 256 * (4 * 4096 + 22 * 512) * 2


def test_seq_beyond_positions_warns():
    bert = from_hf_config(shared_config("mlc-snowflake-arctic-embed-m.json"))
    est = estimate(bert, Setup(mode=Mode.INFERENCE, seq=4096))
    assert est.warnings and "exceeds the model's max_position_embeddings 512" in est.warnings[0]
    assert estimate(bert, Setup(mode=Mode.INFERENCE, seq=512)).warnings == ()


def test_unknown_fields_reported():
    cfg = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 10, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "tie_word_embeddings": False, "intermediate_size": 128, "frobnicate_layers": 3}
    notes = from_hf_config(cfg).notes
    words = ("config fields not understood, assumed not to change the parameter count"
             " or memory: frobnicate_layers")
    assert notes == (words,)


@pytest.mark.parametrize(("patch", "words"), [
    ({"num_attention_heads": 0}, "num_attention_heads is 0; it must be between 1"),
    ({"hidden_size": float("nan")}, "hidden_size is nan, not a count"),
    ({"hidden_size": float("inf")}, "hidden_size is inf, not a count"),
    ({"hidden_size": 10**400}, "it must be between 1 and"),
    ({"vocab_size": "32000"}, "vocab_size is '32000', not a count"),
    ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"),
    ({"attention_dropout": float("nan")}, "not a probability"),
    ({"tie_word_embeddings": "yes"}, "not true/false"),
])
def test_bad_config_values_one_line(patch, words):
    cfg = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 10, **patch}
    with pytest.raises(ModelConfigError, match=re.escape(words)):
        from_hf_config(cfg)


def _cli(*args):
    return cli("estimate", *args)

@pytest.mark.parametrize(("args", "words"), [
    (("--params", "-5"), "--params: '-5' must be between 1"),
    (("--params", "nan"), "--params: 'nan' is not a whole number"),
    (("--params", "1e400"), "--params: '1e400' is not a whole number"),
    (("--params", "7e9", "--headroom", "nan"), "--headroom: nan is not a fraction"),
    (("--layers", "2", "--hidden", "64", "--heads", "0", "--vocab", "9"), "--heads: '0'"),
])
def test_cli_bad_options_one_line(args, words):
    out = _cli(*args)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and words in out.stderr


def test_cli_json_strict_with_warning_and_mla(tmp_path):
    path = shared_path("configs", "mlc-deepseek_v2_lite.json")
    out = _cli("--hf-config", str(path), "--mode", "inference", "--seq", "200000",
               "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["kv_cache"]["bytes"] == 576 * 27 * 200_000 * 2 == data["memory_bytes"]["kv_cache"]
    assert data["kv_cache"]["decompressed_bytes"] == 5120 * 27 * 200_000 * 2
    assert "max_position_embeddings 163840" in data["warnings"][0]
    assert data["active_params"] < data["params"]


def test_cli_suggests_when_nothing_fits():
    out = _cli("--params", "400000000000", "--mode", "train")
    assert out.returncode == 0
    assert "does not fit even sharded" in out.stdout and "--mode lora" in out.stdout


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers not installed (pip install rightsize[exact])")
@pytest.mark.parametrize("name", ["mlc-deepseek_v2_lite.json", "dotnet-phi-2-config.json",
                                  "mlc-snowflake-arctic-embed-m.json"])
def test_exact_matches_reader(name):
    out = _cli("--hf-config", str(shared_path("configs", name)), "--exact", "--format", "json")
    assert out.returncode == 0, out.stderr
    exact = json.loads(out.stdout)["exact"]
    assert exact["params"] == SHARED_COUNTS[name] and exact["difference"] == 0


def test_exact_without_transformers_says_what_to_install(tmp_path):
    if importlib.util.find_spec("transformers") is not None:
        # hide transformers from the child: a sitecustomize that blocks the import
        (tmp_path / "sitecustomize.py").write_text(
            "import sys\nsys.modules['transformers'] = None\n")
    env = {"PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "rightsize", "estimate", "--hf-config",
                          str(shared_path("configs", "mlc-gemma_2b.json")), "--exact"],
                         check=False, capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})
    assert out.returncode == 1 and "pip install rightsize[exact]" in out.stderr
    assert out.stderr.count("\n") == 1


# transformers 5.24 default configs (t5-small, bart-large, vit-base-patch16-224 dimensions);
# counts: sum(p.numel()) of the class built on the meta device, checked with --exact
OTHER_CONFIGS = [
    ({"model_type": "t5", "is_encoder_decoder": True, "d_model": 512, "d_kv": 64, "d_ff": 2048,
      "num_layers": 6, "num_decoder_layers": 6, "num_heads": 8, "vocab_size": 32128,
      "feed_forward_proj": "relu", "relative_attention_num_buckets": 32}, 60_506_624),
    ({"model_type": "bart", "is_encoder_decoder": True, "d_model": 1024, "encoder_layers": 12,
      "decoder_layers": 12, "encoder_attention_heads": 16, "decoder_attention_heads": 16,
      "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096, "vocab_size": 50265,
      "max_position_embeddings": 1024}, 406_291_456),
    ({"model_type": "vit", "architectures": ["ViTModel"], "hidden_size": 768,
      "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
      "image_size": 224, "patch_size": 16, "num_channels": 3, "qkv_bias": True}, 86_389_248),
]


@pytest.mark.parametrize(("cfg", "count"), OTHER_CONFIGS, ids=["t5", "bart", "vit"])
def test_encoder_decoder_and_vision_counts(cfg, count):
    assert from_hf_config(cfg).params().total == count


def test_multimodal_reads_text_model_and_says_so():
    cfg = {"model_type": "llava", "vision_config": {"hidden_size": 1024},
           "text_config": {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                           "num_hidden_layers": 2, "vocab_size": 10, "rms_norm_eps": 1e-6,
                           "hidden_act": "silu", "tie_word_embeddings": False}}
    shape = from_hf_config(cfg)
    assert shape.params().total == 2 * (4 * 64 * 64 + 3 * 64 * 256 + 128) + 2 * 640 + 64
    assert "vision_config towers and projectors not counted" in shape.notes[0]


def test_encoder_only_has_no_kv_cache():
    bert = from_hf_config(shared_config("mlc-snowflake-arctic-embed-m.json"))
    est = estimate(bert, Setup(mode=Mode.INFERENCE, seq=512))
    assert (est.memory.kv_cache_bytes, est.kv_cache) == (0, None)
    assert "learned position table has no row" in estimate(
        bert, Setup(mode=Mode.INFERENCE, seq=513)).warnings[0]


@pytest.mark.parametrize(("name", "ways"), [
    ("dotnet-meta-llama-3.1-8B-Instruct.json", 8),  # 8 KV heads over 8 GPUs
    ("mlc-gpt_bigcode.json", 1),  # MQA: the one KV head is replicated
    ("mlc-deepseek_v2_lite.json", 1),  # the MLA latent is replicated
])
def test_tensor_parallel_kv_split_by_heads(name, ways):
    shape = from_hf_config(shared_config(name))
    one = estimate(shape, Setup(mode=Mode.INFERENCE, seq=1024)).memory.kv_cache_bytes
    eight = estimate(shape, Setup(mode=Mode.INFERENCE, seq=1024, gpus=8)).memory.kv_cache_bytes
    assert eight == one // ways


# bigscience/bloom config.json (https://huggingface.co/bigscience/bloom/blob/main/config.json),
# its keys and values as published; BLOOM-560M is the same file at hidden 1024, 16 heads, 24
# layers (https://huggingface.co/bigscience/bloom-560m/blob/main/config.json)
BLOOM_176B = {
    "apply_residual_connection_post_layernorm": False, "architectures": ["BloomForCausalLM"],
    "attention_dropout": 0.0, "attention_softmax_in_fp32": True, "bias_dropout_fusion": True,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0, "hidden_size": 14336,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": True,
    "model_type": "bloom", "n_head": 112, "n_inner": None, "n_layer": 70, "offset_alibi": 100,
    "pad_token_id": 3, "pretraining_tp": 4, "skip_bias_add": True, "skip_bias_add_qkv": False,
    "slow_but_exact": False, "transformers_version": "4.21.0", "unk_token_id": 0,
    "use_cache": True, "vocab_size": 250880,
}


def _bloom_count(h: int, layers: int, vocab: int = 250880) -> int:
    """BloomForCausalLM by its modules: word_embeddings (v x h) and word_embeddings_layernorm
    (2h); per block input_layernorm (2h), query_key_value (h x 3h + 3h), dense (h x h + h),
    post_attention_layernorm (2h), dense_h_to_4h (h x 4h + 4h), dense_4h_to_h (4h x h + h):
    12h^2 + 13h; ln_f (2h); the lm head tied to word_embeddings; ALiBi has no weights."""
    return vocab * h + 2 * h + layers * (12 * h * h + 13 * h) + 2 * h


def test_bloom_176b_counts_its_plain_gelu_mlp_and_tied_head():
    assert _bloom_count(14336, 70) == 176_247_271_424  # BLOOM's "176B"
    shape = from_hf_config(BLOOM_176B)
    # before: 237,393,723,392 (+35%): a gated MLP (no activation field) and an untied head
    assert shape.params().total == 176_247_271_424
    assert (shape.intermediate_size, shape.mlp, shape.tied_embeddings, shape.qkv_bias) == \
        (4 * 14336, "plain", True, True)
    assert shape.notes == ()  # every key understood; nothing assumed
    small = {**BLOOM_176B, "hidden_size": 1024, "n_head": 16, "n_layer": 24, "pretraining_tp": 1}
    # 559,214,592: also keras-hub's bloom_560m_multi preset metadata "params"
    assert from_hf_config(small).params().total == _bloom_count(1024, 24) == 559_214_592


def test_bloom_n_inner_that_the_class_ignores_is_said():
    shape = from_hf_config({**BLOOM_176B, "n_inner": 4096})
    assert shape.intermediate_size == 4 * 14336
    assert shape.notes == ("n_inner 4096 not used: the model class's MLP is 4 x hidden_size",)


# bigcode/starcoder2-7b config.json dimensions (no tie_word_embeddings key): Starcoder2Config
# ties by default (transformers: `tie_word_embeddings: bool = True` in
# src/transformers/models/starcoder2/configuration_starcoder2.py; before 5.x the
# PretrainedConfig default True)
STARCODER2_7B = {
    "architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2",
    "hidden_act": "gelu_pytorch_tanh", "hidden_size": 4608, "intermediate_size": 18432,
    "max_position_embeddings": 16384, "norm_epsilon": 1e-05, "num_attention_heads": 36,
    "num_hidden_layers": 32, "num_key_value_heads": 4, "rope_theta": 1000000,
    "sliding_window": 4096, "use_bias": True, "vocab_size": 49152, "torch_dtype": "bfloat16",
}


def test_starcoder2_ties_its_head_by_default():
    h, kv, inter = 4608, 4 * 128, 18432
    attention = 2 * h * h + 2 * h * kv + (h + 2 * kv) + h  # q, o; k, v; q/k/v biases; o bias
    layer = attention + 2 * 2 * h + 2 * h * inter + inter + h  # two LayerNorms; c_fc, c_proj
    count = 49152 * h + 32 * layer + 2 * h  # tied embedding; final LayerNorm
    assert count == 7_173_923_840  # the "7B" of the model card
    shape = from_hf_config(STARCODER2_7B)
    assert shape.params().total == count  # before: + 49152 x 4608 = 226,492,416 (+3.2%)
    assert not any("tie_word_embeddings" in n for n in shape.notes)


def test_an_absent_tie_word_embeddings_of_an_unknown_family_is_a_note_with_its_size():
    cfg = {"model_type": "newlm", "hidden_size": 64, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 10, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "intermediate_size": 128}
    notes = from_hf_config(cfg).notes
    assert "tie_word_embeddings absent: an untied lm head assumed (the transformers default" \
           " ties it, many model classes do not; tied, 640 parameters fewer)" in notes
    assert any(n.startswith("model_type 'newlm': structure read") for n in notes)
