"""Memory estimator: parameter counts of real configs, KV cache, activations, optimizer bytes,
ZeRO sharding, LoRA, placement on GPUs, the `rightsize estimate` CLI, and one measured run."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace

import pytest

from rightsize.analyzers.sizing.estimator import (
    EstimateError,
    Mode,
    Optimizer,
    Recompute,
    Setup,
    estimate,
    kv_cache_bytes,
    layer_activation_bytes,
    lora_params,
)
from rightsize.analyzers.sizing.hf_config import (
    MlpKind,
    ModelConfigError,
    ModelShape,
    NormKind,
    from_hf_config,
)
from rightsize.analyzers.sizing.placement import place
from rightsize.catalog import load_catalog
from rightsize.vocab import Precision
from tests.conftest import REPO, SAMPLES, cli


def shape_of(name: str) -> ModelShape:
    return from_hf_config(json.loads((SAMPLES / "configs" / f"{name}.json").read_text()))


# config, exact count, published count (model cards), active params
COUNTS = [
    ("Llama-2-7b-hf", 6_738_415_616, 6.74e9, None),
    ("Meta-Llama-3-8B", 8_030_261_248, 8.03e9, None),
    ("Mistral-7B-v0.1", 7_241_732_096, 7.24e9, None),
    ("Qwen1.5-0.5B", 463_987_712, 0.464e9, None),
    ("gpt2", 124_439_808, 124.4e6, None),
    ("Mixtral-8x7B-v0.1", 46_702_792_704, 46.7e9, 12_879_925_248),
]


@pytest.mark.parametrize(("name", "exact", "published", "active"), COUNTS)
def test_param_counts_match_published(name, exact, published, active):
    counts = shape_of(name).params()
    assert counts.total == exact
    assert abs(counts.total - published) / published < 0.01
    assert counts.active == (active or exact)


def test_bert_base_count_with_pooler():
    cfg = {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
           "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
           "max_position_embeddings": 512, "type_vocab_size": 2}
    assert from_hf_config(cfg).params().total == 109_482_240  # bert-base-uncased


def test_qwen2_conventions_read_from_config():
    s = shape_of("Qwen1.5-0.5B")
    assert (s.qkv_bias, s.tied_embeddings, s.kv_heads, s.head_size) == (True, True, 16, 64)
    assert s.dtype is Precision.BF16


def test_kv_cache_per_token_exact():
    assert kv_cache_bytes(shape_of("Llama-2-7b-hf"), 1, 1, 2) == 512 * 1024
    assert kv_cache_bytes(shape_of("Meta-Llama-3-8B"), 1, 1, 2) == 128 * 1024
    est = estimate(shape_of("Meta-Llama-3-8B"), Setup(mode=Mode.INFERENCE, batch=8, seq=8192))
    assert est.memory.kv_cache_bytes == 8 * 2**30


def _gpt(h=1024, heads=16):
    return ModelShape(h, 1, heads, 4 * h, 0, mlp=MlpKind.PLAIN, norm=NormKind.LAYERNORM,
                      attention_dropout=0.1, hidden_dropout=0.1, lm_head=False)


def test_korthikanti_34sbh_with_selective_recompute():
    setup = Setup(precision=Precision.FP16, batch=2, seq=512, recompute=Recompute.SELECTIVE,
                  flash_attention=False)
    assert layer_activation_bytes(_gpt(), setup, 2) == 34 * 512 * 2 * 1024


def test_attention_scores_term_without_flash():
    setup = Setup(precision=Precision.FP16, batch=2, seq=512, flash_attention=False)
    # fp32 softmax (4) + fp16 copy (2) + dropout mask (1) + dropout output (2) per score
    assert layer_activation_bytes(_gpt(), setup, 2) == 34 * 512 * 2 * 1024 + 9 * 16 * 512**2 * 2


def test_full_recompute_keeps_layer_inputs():
    s = shape_of("Llama-2-7b-hf")
    none = estimate(s, Setup(batch=1, seq=4096)).memory.activations_bytes
    full = estimate(s, Setup(batch=1, seq=4096, recompute=Recompute.FULL)).memory
    assert full.activations_bytes < none / 5  # the fp32 loss over the vocabulary remains


@pytest.mark.parametrize(("precision", "optimizer", "bytes_per_param"), [
    (Precision.BF16, Optimizer.ADAMW, 16), (Precision.FP16, Optimizer.ADAM, 16),
    (Precision.FP32, Optimizer.ADAM, 16), (Precision.BF16, Optimizer.SGD, 12),
    (Precision.FP32, Optimizer.SGD, 12), (Precision.BF16, Optimizer.ADAM8BIT, 10),
])
def test_training_bytes_per_parameter(precision, optimizer, bytes_per_param):
    m = estimate(None, Setup(precision=precision, optimizer=optimizer, device="cpu"),
                 params=1_000_000).memory
    assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == bytes_per_param * 10**6
    assert m.total_bytes == bytes_per_param * 10**6  # no activations known: nothing overlaps


def test_overhead_is_context_plus_fragmentation():
    m = estimate(None, Setup(), params=7_000_000_000).memory
    assert m.overhead_bytes == 2**30 + int(0.05 * 112e9)
    assert m.total_bytes == 112_000_000_000 + m.overhead_bytes


def test_gradients_overlap_activations_unless_accumulating():
    s = shape_of("gpt2")
    setup = Setup(batch=8, seq=1024, device="cpu")
    m = estimate(s, setup).memory
    parts = (m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activations_bytes)
    assert m.total_bytes == parts - min(m.gradients_bytes, m.activations_bytes)
    acc = estimate(s, replace(setup, accumulate_gradients=True)).memory
    assert acc.total_bytes == parts


@pytest.mark.parametrize(("stage", "weights", "grads", "optimizer"), [
    (0, 16e9, 16e9, 96e9), (1, 16e9, 16e9, 12e9), (2, 16e9, 2e9, 12e9), (3, 2e9, 2e9, 12e9),
])
def test_zero_stages_shard_over_gpus(stage, weights, grads, optimizer):
    m = estimate(None, Setup(zero_stage=stage, gpus=8, device="cpu"), params=8_000_000_000).memory
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (weights, grads, optimizer)


def test_qlora_int4_llama2():
    s = shape_of("Llama-2-7b-hf")
    assert lora_params(s, 16) == 16_777_216
    m = estimate(s, Setup(mode=Mode.LORA, precision=Precision.INT4, device="cpu")).memory
    assert m.weights_bytes == (6_738_415_616 - 262_144_000) // 2 + 262_144_000 * 2 + 16_777_216 * 4
    assert (m.gradients_bytes, m.optimizer_bytes) == (16_777_216 * 4, 16_777_216 * 8)


def test_training_quantized_weights_is_refused():
    with pytest.raises(EstimateError, match="use --mode lora"):
        estimate(shape_of("gpt2"), Setup(precision=Precision.INT8))


@pytest.mark.parametrize(("cfg", "words"), [
    ({"model_type": "rwkv", "hidden_size": 8}, "no num_attention_heads / n_head"),
    ({"model_type": "llama", "num_attention_heads": 8}, "no hidden_size"),
    ({"model_type": "llama", "hidden_size": "big", "num_attention_heads": 8}, "not a count"),
    ([1, 2], "not a JSON object"),
])
def test_bad_configs_raise(cfg, words):
    with pytest.raises(ModelConfigError, match=words):
        from_hf_config(cfg)


def test_placement_alone_or_sharded():
    cat = load_catalog()
    inference = {p.gpu: p for p in place(shape_of("Meta-Llama-3-8B"),
                                         Setup(mode=Mode.INFERENCE, seq=4096), cat)}
    assert (inference["L4"].gpus, inference["L4"].fits) == (1, True)
    # bf16 (the default): a T4 (Turing) has none, so it holds nothing however many
    assert (inference["T4"].fits, inference["T4"].unsupported) == (False, "the T4 has no bf16")
    fp16 = {p.gpu: p for p in place(shape_of("Meta-Llama-3-8B"),
                                    Setup(mode=Mode.INFERENCE, seq=4096, precision="fp16"), cat)}
    assert fp16["T4"].gpus == 2 and "tensor parallel" in fp16["T4"].parallelism
    assert "crosses PCIe" in fp16["T4"].interconnect
    train = {p.gpu: p for p in place(shape_of("Llama-2-7b-hf"), Setup(seq=4096), cat)}
    assert train["H100 SXM"].gpus == 4 and "FSDP" in train["H100 SXM"].parallelism
    assert "NVLink" in train["H100 SXM"].interconnect


def _cli(*args):
    return cli("estimate", *args)

def test_cli_estimate_json_keys():
    out = _cli("--hf-config", str(SAMPLES / "configs" / "Meta-Llama-3-8B.json"),
               "--mode", "inference", "--batch", "8", "--seq", "8192", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["params"] == 8_030_261_248
    assert set(data["memory_bytes"]) == {"weights", "gradients", "optimizer", "activations",
                                         "kv_cache", "overhead", "total"}
    assert data["memory_bytes"]["kv_cache"] == 8 * 2**30
    assert {"gpu": "L4", "gpus": 2} == {k: v for k, v in data["fits"][1].items()
                                        if k in ("gpu", "gpus")}


@pytest.mark.parametrize(("content", "words"), [
    (None, "cannot read the model config"), ("{oops", "not valid JSON"),
    ('{"model_type": "llama"}', "no hidden_size"),
])
def test_cli_estimate_bad_config_one_line(tmp_path, content, words):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    out = _cli("--hf-config", str(path))
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and words in out.stderr


MEASURED_SHAPES = [
    ModelShape(128, 2, 4, 344, 512, num_kv_heads=2, name="tiny"),
    ModelShape(128, 2, 4, 344, 512, q_lora_rank=48, kv_lora_rank=32, qk_rope_head_dim=8,
               qk_nope_head_dim=16, v_head_dim=16, num_experts=4, experts_per_token=2,
               expert_intermediate_size=128, shared_expert_intermediate_size=128,
               shared_expert_gate=True, dense_layers=1, name="tiny-mla-moe"),
]


@pytest.mark.parametrize("shape", MEASURED_SHAPES, ids=lambda s: s.name)
def test_estimate_matches_measured_cpu_peak(shape):
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location(
        "estimator_vs_measured", REPO / "benchmarks" / "estimator_vs_measured.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["estimator_vs_measured"] = bench
    spec.loader.exec_module(bench)
    case = bench.Case(shape.name, shape, 4, 128, True)
    measured, n_params = bench.measure(case, 2)
    est = estimate(case.shape, Setup(precision=Precision.FP32, batch=4, seq=128,
                                     optimizer=Optimizer.ADAM, device="cpu"))
    assert est.params == n_params
    assert abs(est.total_bytes - measured) / measured < 0.15
