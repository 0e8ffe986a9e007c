"""Prefill and decode steps of a served model, told apart in a Kineto trace.

Inputs: a trace's ``cpu_ops`` and ``kernels`` frames (``traces/schema.py``; shapes recorded).
Output: one :class:`TraceStep` per forward pass: what it held and its GPU time.

A forward pass starts at the model's token embedding (``aten::embedding``, one per pass in
Hugging Face ``generate``, vLLM and SGLang alike); its time is the span of the kernels that run
from its start to the next pass's start (idle gaps inside a pass count, as they do in a served
step). What it held comes from the embedding's index tensor: ``[batch, tokens]`` (``generate``:
tokens > 1 is the prefill, 1 a decode step) or ``[tokens]`` (vLLM/SGLang flatten the batch: a
pass with several times the tokens of the pass after it is a prefill of that many sequences,
the passes that follow with one token per sequence are decode steps). Decode steps' KV length
is the prompt plus the tokens generated before them. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

EMBEDDING_OPS = ("aten::embedding",)


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One forward pass: ``seqs`` sequences of ``tokens`` new tokens each over ``cached``
    ones; ``gpu_ms`` from its first kernel's start to its last kernel's end."""

    seqs: int
    tokens: int
    cached: int
    gpu_ms: float

    @property
    def prefill(self) -> bool:
        return self.tokens > 1


def _dims(text: str | None) -> list[int] | None:
    """The index tensor's shape: the second input of ``aten::embedding(weight, indices)``."""
    if not text:
        return None
    try:
        dims = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(dims, list) or len(dims) < 2 or not isinstance(dims[1], list):
        return None
    shape = dims[1]
    return [int(x) for x in shape] if shape and all(isinstance(x, int) for x in shape) else None


def _shapes(raw: list[list[int]]) -> list[tuple[int, int]]:
    """(sequences, new tokens each) per pass."""
    out: list[tuple[int, int]] = []
    for i, shape in enumerate(raw):
        if len(shape) >= 2:
            out.append((shape[0], shape[1]))
            continue
        total = shape[0]
        following = raw[i + 1][0] if i + 1 < len(raw) and len(raw[i + 1]) == 1 else None
        if following and total >= 2 * following and total % following == 0:
            out.append((following, total // following))  # a prefill of `following` prompts
        else:
            out.append((total, 1))
    return out


def trace_steps(cpu_ops: pl.DataFrame, kernels: pl.DataFrame) -> list[TraceStep]:
    """The forward passes of a served model's trace (empty: no embedding op with shapes)."""
    emb = (cpu_ops.filter(pl.col("name").is_in(EMBEDDING_OPS))
           .select("ts_ns", "input_dims").sort("ts_ns"))
    starts, raw = [], []
    for ts, text in emb.iter_rows():
        shape = _dims(text)
        if shape is not None:
            starts.append(int(ts))
            raw.append(shape)
    if not starts or kernels.is_empty():
        return []
    k = kernels.select("ts_ns", "dur_ns").sort("ts_ns")
    out: list[TraceStep] = []
    context = 0
    for i, (seqs, tokens) in enumerate(_shapes(raw)):
        end = starts[i + 1] if i + 1 < len(starts) else None
        window = k.filter(pl.col("ts_ns") >= starts[i])
        if end is not None:
            window = window.filter(pl.col("ts_ns") < end)
        if window.is_empty():
            continue
        ends = (window["ts_ns"] + window["dur_ns"]).to_numpy()
        span_ns = int(ends.max()) - int(window["ts_ns"].to_numpy().min())
        cached = 0 if tokens > 1 else context
        context = tokens if tokens > 1 else context + 1
        out.append(TraceStep(seqs, tokens, cached, span_ns / 1e6))
    return out
