"""The step-model contract (rightsize/analyzers/serving/step.py) that the serving simulation
and plans build on: shapes of the answers, consistency between the exact and vectorized
paths, the reasons a deployment cannot serve a model."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.serving.step import (
    Deployment,
    ServingError,
    fits,
    step_model,
)
from rightsize.analyzers.serving.tables import Tables
from rightsize.analyzers.sizing.hf_config import from_hf_config
from tests.serving.test_serving_ops import LLAMA, MIXTRAL

NO_TABLES = Tables()


@pytest.fixture(scope="module")
def llama():
    return from_hf_config(LLAMA)


def test_prefill_and_decode_grow_with_the_work(llama):
    m = step_model(llama, Deployment("H100 SXM"), tables=NO_TABLES)
    one, eight = m.prefill([1024]), m.prefill([1024] * 8)
    assert one.low_ms < one.ms < one.high_ms
    assert eight.ms > 4 * one.ms  # compute-bound: close to 8x
    d1, d64 = m.decode([1000]), m.decode([1000] * 64)
    # decode is weight-bound: 64 sequences cost far less than 64 x one
    assert d1.ms < d64.ms < 4 * d1.ms
    # Llama-3.1-8B's 16 GB of bf16 weights cannot be read faster than the H100's 3.35 TB/s
    assert d1.ms > 16.06e9 / 3.35e12 * 1e3


def test_vectorized_matches_the_exact_path(llama):
    m = step_model(llama, Deployment("H100 SXM", tp=2), tables=NO_TABLES)
    vec = m.step_ms_vec(np.array([512, 0, 300]), np.array([0, 0, 1000]),
                        np.array([0, 16, 8]), np.array([0, 16 * 700, 8 * 500]))
    exact = [m.prefill([512]).ms, m.decode([700] * 16).ms,
             m.step([(300, 1000)], [500] * 8).ms]
    assert vec == pytest.approx(exact, rel=1e-9)


def test_tensor_parallel_cuts_the_step_and_memory(llama):
    m1 = step_model(llama, Deployment("H100 SXM", tp=1), tables=NO_TABLES)
    m4 = step_model(llama, Deployment("H100 SXM", tp=4), tables=NO_TABLES)
    assert m4.prefill([2048] * 4).ms < m1.prefill([2048] * 4).ms
    assert m4.memory_per_gpu_bytes < m1.memory_per_gpu_bytes
    assert m4.kv_cache_tokens > 4 * m1.kv_cache_tokens


def test_fits_says_why_not(llama):
    assert fits(llama, Deployment("H100 SXM", tp=3)) == (
        "tensor parallel 3 does not split 32 query heads and 8 KV heads evenly")
    assert fits(llama, Deployment("H100 SXM", pp=33)) == (
        "pipeline parallel 33 exceeds the model's 32 layers")
    mixtral = from_hf_config(MIXTRAL)
    why = fits(mixtral, Deployment("L4"))
    assert why is not None and why.startswith("weights and activations need")
    assert why.endswith("more than 90% of the L4's 24 GiB")
    assert fits(mixtral, Deployment("H100 SXM", tp=2)) is None
    why = fits(llama, Deployment("L4"), batch=64, seq=8192)
    assert why is not None and why.startswith("the KV cache of 64 sequences of 8,192 tokens")
    with pytest.raises(ServingError, match="precision 'fp4' is not one of bf16, fp8, int8, int4"):
        fits(llama, Deployment("H100 SXM", precision="fp4"))
    with pytest.raises(ServingError, match="does not split"):
        step_model(llama, Deployment("H100 SXM", tp=3), tables=NO_TABLES)


def test_unknown_gpu_lists_the_known_ones(llama):
    with pytest.raises(Exception, match=r"no GPU called 'H900' in the catalog \(known: T4, L4"):
        step_model(llama, Deployment("H900"), tables=NO_TABLES)


def test_moe_decode_reads_only_the_touched_experts():
    mixtral = from_hf_config(MIXTRAL)
    m = step_model(mixtral, Deployment("H100 SXM", tp=2), tables=NO_TABLES)
    # one token touches 2 of 8 experts: far less than the 256-sequence step that touches all
    assert m.decode([500]).ms < 0.6 * m.decode([500] * 256).ms
    assert any("MoE" in a for a in m.assumes)


def test_the_v0_engine_adds_its_cpu_work_per_scheduled_sequence(llama):
    """vLLM V0's per-sequence CPU work (vLLM issue #6801: 20 ms at 200 sequences, less the
    0.5 ms fixed decode overhead: 0.0975 ms a sequence) is added to a step for each prefill
    and decode sequence it schedules; V1 (the default) adds none."""
    v1 = step_model(llama, Deployment("H100 SXM"), tables=NO_TABLES)
    v0 = step_model(llama, Deployment("H100 SXM", engine="vllm-v0"), tables=NO_TABLES)
    assert v0.decode([700] * 200).ms - v1.decode([700] * 200).ms == pytest.approx(19.5)
    assert v0.prefill([512] * 3).ms - v1.prefill([512] * 3).ms == pytest.approx(0.2925)
    # one prefill chunk with 16 decodes: 17 sequences
    assert v0.step([(300, 1000)], [500] * 16).ms - v1.step([(300, 1000)], [500] * 16).ms \
        == pytest.approx(1.6575)
    vec = v0.step_ms_vec(np.array([300, 0]), np.array([1000, 0]), np.array([16, 200]),
                         np.array([8000, 140000])) - \
        v1.step_ms_vec(np.array([300, 0]), np.array([1000, 0]), np.array([16, 200]),
                       np.array([8000, 140000]))
    assert vec == pytest.approx([1.6575, 19.5])
    assert any("vllm-v0: 0.0975 ms of engine CPU work per scheduled sequence" in a
               for a in v0.assumes)
    assert not any("engine CPU work" in a for a in v1.assumes)
    with pytest.raises(ServingError, match="engine 'sglang' is not one of vllm, vllm-v0"):
        step_model(llama, Deployment("H100 SXM", engine="sglang"), tables=NO_TABLES)


def test_predict_on_vllm_v0_adds_the_batch_times_the_per_sequence_cost(llama):
    """predict_points' TTFT (one prefill of the 8 prompts) and TPOT (one decode step of 8
    sequences) each grow by 8 x 0.0975 = 0.78 ms under vllm-v0, exactly."""
    from rightsize.analyzers.serving.predict import Point, predict_points

    point = [Point("H100 SXM", 1, 1, 8, 512, 64)]
    v1, = predict_points(llama, point, tables=NO_TABLES)
    v0, = predict_points(llama, point, tables=NO_TABLES, engine="vllm-v0")
    assert (v1.engine, v0.engine) == ("vllm", "vllm-v0")
    assert v0.ttft_ms - v1.ttft_ms == pytest.approx(0.78)
    assert v0.tpot_ms - v1.tpot_ms == pytest.approx(0.78)
    assert v0.to_json()["engine"] == "vllm-v0"
