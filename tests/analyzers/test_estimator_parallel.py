"""Memory estimator under tensor and sequence parallelism (Korthikanti et al. table 2), node
counts, long-context inference placement, and the `rightsize estimate` CLI's parallel layouts and
text rows."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from rightsize.analyzers.sizing.estimator import (
    EstimateError,
    Mode,
    Recompute,
    Setup,
    estimate,
    layer_activation_bytes,
)
from rightsize.analyzers.sizing.hf_config import (
    ModelShape,
    from_hf_config,
)
from rightsize.analyzers.sizing.placement import place
from rightsize.catalog import load_catalog
from rightsize.vocab import Precision
from tests.analyzers.test_estimator import _cli, _gpt
from tests.conftest import SAMPLES, shared_path


def test_tensor_parallel_degrees_split_the_heads_and_stay_in_a_node():
    from rightsize.analyzers.sizing.model_shape import ModelShape
    from rightsize.analyzers.sizing.placement import parallelism_for, tp_degree
    from rightsize.catalog import load_catalog

    qwen7 = ModelShape(hidden_size=3584, num_layers=28, num_heads=28, intermediate_size=18944,
                       vocab_size=152064, num_kv_heads=4)
    # 28 heads: no TP 8 (or 16); 8 GPUs are TP 4 x PP 2, 16 are TP 4 x PP 4
    assert [tp_degree(qwen7, n) for n in (1, 2, 4, 8, 16)] == [1, 2, 4, 4, 4]
    mqa = ModelShape(hidden_size=4096, num_layers=32, num_heads=32, intermediate_size=11008,
                     vocab_size=32000, num_kv_heads=1)  # one KV head, replicated per GPU
    assert tp_degree(mqa, 8) == 8
    odd = ModelShape(hidden_size=1400, num_layers=4, num_heads=7, intermediate_size=5600,
                     vocab_size=1000)
    assert tp_degree(odd, 2) is None  # 7 heads split no way over 2
    cat = load_catalog()
    words, wire = parallelism_for(False, 16, cat.gpu("L4"), tp_degree(qwen7, 16))
    assert words.startswith("tensor parallel 4 x pipeline parallel 4")
    assert wire.startswith("2 nodes of 8: PCIe within a node")  # an L4 has no NVLink
    _, wire = parallelism_for(False, 16, cat.gpu("H100 SXM"))
    assert wire.startswith("2 nodes of 8: NVLink within a node")


# --- tensor and sequence parallelism (Korthikanti et al. 2022, Table 2) --------------------
# _gpt(): h = 1024, 16 heads, LayerNorm, a 4h GELU MLP, dropout, fp16: per token and layer the
# replicated part is 10 bytes x h (2 LayerNorm inputs 4h, q/k/v and MLP inputs 2h + 2h, two
# dropout masks 2h) and the part tensor parallelism splits 24h (Q, K, V, o-proj input 8h; MLP
# intermediates 16h). s = 512, b = 2: sbh = 1,048,576.
SBH = 512 * 2 * 1024


@pytest.mark.parametrize(("tp", "sp", "per_sbh"), [
    (1, False, 34), (4, False, 10 + 24 / 4), (4, True, 34 / 4), (2, True, 17), (8, False, 13),
])
def test_korthikanti_table2_under_tensor_and_sequence_parallelism(tp, sp, per_sbh):
    setup = Setup(precision=Precision.FP16, batch=2, seq=512, recompute=Recompute.SELECTIVE,
                  flash_attention=False)
    assert layer_activation_bytes(_gpt(), setup, 2, tp=tp, sp=sp) == per_sbh * SBH


def test_attention_scores_split_by_tensor_parallelism():
    setup = Setup(precision=Precision.FP16, batch=2, seq=512, flash_attention=False)
    # sbh(10 + 24/4) + 9 bytes x a s^2 b / 4 (HF eager: fp32 softmax, its fp16 copy, mask,
    # dropped output): 16,777,216 + 9 x 16 x 512^2 x 2 / 4 = 16,777,216 + 18,874,368
    assert layer_activation_bytes(_gpt(), setup, 2, tp=4) == 16 * SBH + 18_874_368
    assert layer_activation_bytes(_gpt(), setup, 2, tp=4, sp=True) == 8.5 * SBH + 18_874_368


def test_training_estimate_splits_state_and_activations_over_tensor_parallel_ranks():
    # one layer, no vocabulary: q/k/v/o 4h^2 + MLP 2 x 4h^2 + 3 LayerNorms of 2h = 12,589,056
    shape = _gpt()
    base = Setup(precision=Precision.FP16, batch=2, seq=512, recompute=Recompute.SELECTIVE,
                 flash_attention=False)  # CUDA: dropout keeps a 1-byte mask
    one = estimate(shape, base)
    tp = estimate(shape, replace(base, gpus=4, tensor_parallel=4, sequence_parallel=True))
    assert tp.tensor_parallel == 4 and one.params == 12_589_056
    # weights 2, gradients 2, optimizer 12 bytes per parameter, each split 4 ways
    assert (tp.memory.weights_bytes, tp.memory.gradients_bytes, tp.memory.optimizer_bytes) == \
        (6_294_528, 6_294_528, 37_767_168)
    # the layer sbh x 34/4, plus the final LayerNorm input and head input (2 + 2 bytes x h per
    # token), split along the sequence: 1024 tokens x 4096 / 4
    assert tp.memory.activations_bytes == 8.5 * SBH + 1024 * 4096 // 4
    assert one.memory.activations_bytes == 34 * SBH + 1024 * 4096
    assert any("sbh(34/t + 5as/(ht)), their Table 2" in n for n in tp.assumptions)
    # 2 data-parallel groups of TP 4 under ZeRO-1: the optimizer splits again
    dp = estimate(shape, replace(base, gpus=8, tensor_parallel=4, zero_stage=1))
    assert dp.memory.optimizer_bytes == 37_767_168 // 2
    assert any("ZeRO stage 1 over 2 data-parallel GPUs" in n for n in dp.assumptions)


@pytest.mark.parametrize(("setup", "words"), [
    (Setup(gpus=4, tensor_parallel=3), "tensor parallel 3 must divide --gpus 4"),
    (Setup(gpus=6, tensor_parallel=6),
     "tensor parallel 6 does not split 16 query heads and 4 KV heads evenly"),
    (Setup(sequence_parallel=True), "needs a tensor-parallel degree of 2 or more"),
    (Setup(prefill_chunk=2048), "applies to inference"),
    (Setup(mode=Mode.INFERENCE, prefill_chunk=-1), "whole number of tokens from 0"),
])
def test_impossible_layouts_are_refused(setup, words):
    with pytest.raises(EstimateError, match=words):
        estimate(ModelShape(1024, 2, 16, 4096, 1000, num_kv_heads=4), setup)


# --- inference per prefill chunk: Llama-3.1-8B (32 layers, 32 heads, 8 KV heads, h 4096,
# MLP 14336, vocabulary 128256) at 128k tokens -------------------------------------------
LLAMA31 = ("configs", "dotnet-meta-llama-3.1-8B-Instruct.json")


def _llama31():
    return from_hf_config(json.loads(shared_path(*LLAMA31).read_text()))


@pytest.mark.shared
def test_long_context_inference_counts_one_prefill_chunk():
    shape = _llama31()
    one = estimate(shape, Setup(mode=Mode.INFERENCE, seq=131_072)).memory
    # one layer's working set, width 2h + q + k + v + 3 x MLP = 8192 + 4096 + 1024 + 1024 +
    # 43008 = 57,344, for the 8192-token chunk (vLLM's default on an H100) at 2 bytes, plus the
    # fp32 logits of the last position: 2 x 57,344 x 8192 + 4 x 128,256 = 940,037,120
    assert one.activations_bytes == 940_037_120
    # the KV cache keeps every token: 128 KiB per token (2 x 8 x 128 x 32 layers x 2 bytes)
    assert one.kv_cache_bytes == 131_072 * 131_072
    # weights 16,060,522,496 + KV 17,179,869,184 + 940,037,120 = 34,180,428,800; overhead
    # 2^30 + 5% = 2,782,763,264: 36,963,192,064 (34.42 GiB) on one H100
    assert one.total_bytes == 36_963_192_064
    whole = estimate(shape, Setup(mode=Mode.INFERENCE, seq=131_072, prefill_chunk=0)).memory
    assert whole.activations_bytes == 2 * 57_344 * 131_072 + 4 * 128_256  # 14.0 GiB at once


@pytest.mark.shared
def test_seven_b_gqa_at_128k_is_placed_on_h100s_not_called_unfit():
    shape = _llama31()
    setup = Setup(mode=Mode.INFERENCE, seq=131_072, batch=5)
    # Counted at once (as before), five whole prompts' activations are 2 x 57,344 x 655,360 +
    # 4 x 128,256 x 5 = 75,164,492,800 bytes (70 GiB) on every GPU however many: "does not
    # fit even sharded" on an 80 GiB H100.
    assert estimate(shape, replace(setup, prefill_chunk=0)).memory.activations_bytes == \
        75_164_492_800
    fits = {p.gpu: p for p in place(shape, setup, load_catalog())}
    h100 = fits["H100 SXM"]
    # 2 x H100, TP 2: weights 8,030,261,248; KV 85,899,345,920 / 2 = 42,949,672,960; one
    # 8192-token chunk, width 2h + (q + 3 x MLP) / 2 + (k + v) / 2 = 8192 + 23,552 + 1024 =
    # 32,768: 2 x 32,768 x 8192 + 4 x 128,256 x 5 = 539,436,032; overhead 2^30 + 5% of
    # 51,519,370,240 = 3,649,710,336: 55,169,080,576 per GPU (51.38 GiB), x 1.1 fits 80 GiB
    assert (h100.gpus, h100.fits, h100.tensor_parallel, h100.prefill_chunk_tokens,
            h100.memory_bytes_per_gpu) == (2, True, 2, 8192, 55_169_080_576)
    assert (h100.nodes, h100.gpus_per_node, h100.gpus_per_node_source) == (1, 8, "catalog")
    # an A100 prefills 2048 tokens at a time in vLLM: 2 x 32,768 x 2048 + 2,565,120 =
    # 136,782,848; overhead 2^30 + 5% of 51,116,717,056: 54,746,294,732
    a100 = fits["A100 80GB SXM"]
    assert (a100.gpus, a100.prefill_chunk_tokens, a100.memory_bytes_per_gpu) == \
        (2, 2048, 54_746_294_732)


def test_node_counts_from_the_catalog_or_the_default():
    from rightsize.analyzers.sizing.placement import gpus_per_node, parallelism_for, tp_degree

    cat = load_catalog()
    assert gpus_per_node(cat.gpu("H100 SXM")) == (8, "catalog")
    assert gpus_per_node(cat.gpu("GB200 (per GPU)")) == (4, "catalog")  # an NVL72 tray
    assert gpus_per_node(cat.gpu("L4")) == (8, "default")
    # h 8192, 64 layers, 64 heads, 8 KV heads (56.9B parameters), 64 requests of 4096 tokens
    big = ModelShape(8192, 64, 64, 28672, 128_256, num_kv_heads=8, name="big")
    fits = {p.gpu: p for p in place(big, Setup(mode=Mode.INFERENCE, seq=4096, batch=64), cat)}
    # 16 L4s: TP 8 within a node, pipeline 2 across 2 nodes of the assumed 8
    l4 = fits["L4"]
    assert (l4.gpus, l4.tensor_parallel, l4.nodes, l4.gpus_per_node, l4.gpus_per_node_source) \
        == (16, 8, 2, 8, "default")
    assert l4.node_words == "2 nodes of 8 (8 assumed: no node size in the catalog)"
    assert l4.parallelism.startswith("tensor parallel 8 x pipeline parallel 2")
    assert fits["H100 SXM"].node_words == "1 node of 8"
    gb = fits["GB200 (per GPU)"]
    assert (gb.gpus, gb.nodes, gb.gpus_per_node) == (2, 1, 4)
    # 8 GB200 = 2 trays of 4: TP 4 x PP 2, NVLink across the NVL72 rack
    assert tp_degree(big, 8, 4) == 4
    words, wire = parallelism_for(False, 8, cat.gpu("GB200 (per GPU)"), 4)
    assert words.startswith("tensor parallel 4 x pipeline parallel 2")
    assert wire == ("2 nodes of 4: NVLink within a node and NVLink through the NVL72 rack's"
                    " switches between nodes (an NVL4 system: InfiniBand/RoCE)")
    assert all(p.nodes == math.ceil(p.gpus / p.gpus_per_node) for p in fits.values())


def test_cli_estimate_states_tensor_and_sequence_parallelism():
    cfg = str(SAMPLES / "configs" / "Meta-Llama-3-8B.json")
    out = _cli("--hf-config", cfg, "--tp", "8", "--sequence-parallel", "--seq", "8192",
               "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["tensor_parallel"], data["setup"]["tensor_parallel"],
            data["setup"]["sequence_parallel"], data["setup"]["gpus"]) == (8, 8, True, 8)
    assert data["prefill_chunk_tokens"] is None  # training
    # 16 bytes per parameter split 8 ways: 8,030,261,248 x 2 / 8 weights
    assert data["memory_bytes"]["weights"] == 8_030_261_248 * 2 // 8
    h100 = next(p for p in data["fits"] if p["gpu"] == "H100 SXM")
    assert {k: h100[k] for k in ("gpus", "tensor_parallel", "nodes", "gpus_per_node",
                                 "gpus_per_node_source", "prefill_chunk_tokens")} == \
        {"gpus": 8, "tensor_parallel": 8, "nodes": 1, "gpus_per_node": 8,
         "gpus_per_node_source": "catalog", "prefill_chunk_tokens": None}
    assert h100["parallelism"].startswith("tensor parallel 8 (Megatron, sequence parallel)")
    text = _cli("--hf-config", cfg, "--tp", "8", "--sequence-parallel", "--seq", "8192")
    assert "8 GPU(s), tensor parallel 8 with sequence parallelism" in " ".join(
        text.stdout.split())
    bad = _cli("--hf-config", cfg, "--tp", "3")
    assert bad.returncode == 1
    assert bad.stderr == ("rightsize: error: tensor parallel 3 does not split 32 query heads and"
                          " 8 KV heads evenly\n")


@pytest.mark.shared
def test_cli_seven_b_at_128k_fits_h100s():
    out = _cli("--hf-config", str(shared_path(*LLAMA31)), "--mode", "inference", "--seq",
               "131072", "--batch", "5", "--all")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    # 55,169,080,576 bytes per GPU (test above) = 51.38 GiB; 2 x $2.99 an hour
    assert "2 x H100 SXM: $5.98/hour, 51.38 GiB per GPU, tensor parallel" in text
    unfit = text.split("does not fit even sharded:")[1].split("to shrink it")[0] \
        if "does not fit even sharded:" in text else ""
    assert "H100" not in unfit
    assert "prefilled in chunks of 8,192 tokens shared by the batch" in text


def test_cli_text_rows_sum_to_the_total_and_the_cheapest_placement_leads():
    """Llama-3-8B training, bf16, batch 1 x 2048 (the defaults): gradients and activations
    are not held at once (no accumulation), so the smaller (gradients, 14.96 GiB) is its own
    negative row and the rows sum to the 128.00 GiB total; the cheapest placement that fits is
    named first (one H200 SXM at $3.99 an hour), five are listed, GPUs without bf16 are said
    not to run it."""
    out = _cli("--hf-config", str(SAMPLES / "configs" / "Meta-Llama-3-8B.json"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("assumptions:")[0].splitlines()
    rows = {ln.split()[0] if not ln.startswith("  not at once") else "not at once":
            float(ln.split("GiB")[0].split()[-1].replace(",", ""))
            for ln in lines if ln.startswith("  ") and "GiB" in ln and "x " not in ln}
    total = rows.pop("total")
    assert rows["not at once"] == -14.96 and total == 128.0
    assert abs(sum(rows.values()) - total) < 0.015  # each row rounded to 0.01 GiB
    text = " ".join(out.stdout.split())
    assert "cheapest that fits (with 10% headroom): 1 x H200 SXM, $3.99/hour" in text
    data = json.loads(_cli("--hf-config", str(SAMPLES / "configs" / "Meta-Llama-3-8B.json"),
                           "--format", "json").stdout)
    fitting = sum(p["fits"] for p in data["fits"])
    assert f"fits, cheapest first (5 of {fitting}; --all lists every one):" in text
    assert "cannot run it: the T4 has no bf16; the V100 16GB SXM2 has no bf16;" in text
    assert "64 x" not in text  # the many-GPU placements wait for --all
    v100 = next(p for p in data["fits"] if p["gpu"] == "V100 32GB SXM2")
    assert (v100["fits"], v100["unsupported"]) == (False, "the V100 32GB SXM2 has no bf16")
