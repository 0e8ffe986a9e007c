"""Prefill and decode passes told apart in traces: a real one (the shared TraceLens Qwen1.5-0.5B
Hugging Face forward on an H100) and hand-made frames with vLLM's flattened token batches."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.analyzers.serving.trace_steps import TraceStep, trace_steps
from tests.conftest import shared_path


def _frames(shapes: list[str], gaps_ns: int = 1_000_000):
    ops = pl.DataFrame({"name": ["aten::embedding"] * len(shapes),
                        "ts_ns": [i * gaps_ns for i in range(len(shapes))],
                        "input_dims": shapes})
    # two kernels per pass: 100 µs then 200 µs, 50 µs apart
    ts = [t for i in range(len(shapes)) for t in (i * gaps_ns + 10, i * gaps_ns + 150_010)]
    kernels = pl.DataFrame({"ts_ns": ts, "dur_ns": [100_000, 200_000] * len(shapes)})
    return ops, kernels


def test_vllm_flattened_batches():
    ops, kernels = _frames(["[[128256, 4096], [4096]]", "[[128256, 4096], [8]]",
                            "[[128256, 4096], [8]]"])
    assert trace_steps(ops, kernels) == [TraceStep(8, 512, 0, 0.35),
                                         TraceStep(8, 1, 512, 0.35),
                                         TraceStep(8, 1, 513, 0.35)]


def test_hf_generate_batches():
    ops, kernels = _frames(["[[32000, 4096], [4, 100]]", "[[32000, 4096], [4, 1]]"])
    assert trace_steps(ops, kernels) == [TraceStep(4, 100, 0, 0.35), TraceStep(4, 1, 100, 0.35)]


@pytest.mark.shared
def test_tracelens_qwen_prefill_on_h100():
    from rightsize.traces.kineto import read_kineto

    path = shared_path("traces", "kineto",
                       "tracelens-h100-Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    t = read_kineto(path)
    # one forward of 16 prompts of 559 tokens (the trace's task shape: batch 16), its kernels
    # from first start to last end
    assert trace_steps(t.cpu_ops, t.kernels) == [TraceStep(16, 559, 0, 34.892419)]
