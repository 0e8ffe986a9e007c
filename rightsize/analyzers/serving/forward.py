"""One served step's time, by operator class, from the operators and a :class:`~.timer.Timer`.

Inputs: the :class:`~.ops.Ops` of a model on one GPU, a timer for that GPU, the pipeline
degree and, as equal-length arrays (one entry per step), the step's prefill work (tokens,
sequences, and one chunk's context attention time) and decode work (sequences, total KV
length). Output: :class:`Parts`, µs per step split into GEMMs, attention, communication and
other (elementwise, embedding, sampling) — the classes calibration scales separately.

A step runs every layer once over all its tokens: the GEMMs at ``m`` = prefill tokens +
decode sequences, prefill attention over each chunk's prompt, decode attention over each
sequence's KV, ``allreduces_per_layer`` all-reduces of ``m x hidden`` 16-bit values, four
memory-bound kernels (two fused add+norm, RoPE, the activation), then the LM head at one row
per sequence (vLLM computes logits only where a token is sampled). Pipeline stages run in
turn (a step's latency is every stage's time plus ``pp - 1`` activation transfers). MoE
layers route each token to ``top_k`` experts: a fused MoE kernel is timed as one GEMM with the
rows per touched expert and the touched experts' weights (:func:`~.ops.experts_touched`).
Pure, numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rightsize.analyzers.serving.ops import ACT_BYTES, Attention, Gemm, Ops
from rightsize.analyzers.serving.timer import Timer

ELEMENTWISE_KERNELS = 4  # per layer: 2 fused add+RMSNorm, RoPE, the gated activation


@dataclass(frozen=True, slots=True)
class Parts:
    """µs per step by operator class (arrays, one entry per step), all stages."""

    gemm: np.ndarray
    attention: np.ndarray
    comm: np.ndarray
    other: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.gemm + self.attention + self.comm + self.other


def _gemms_us(timer: Timer, gemms: tuple[Gemm, ...], m: np.ndarray, precision: str) -> np.ndarray:
    total = np.zeros_like(m)
    for g in gemms:
        p = precision if g.quantized else "bf16"
        if g.experts:
            rows = m * g.top_k
            touched = g.experts * (1.0 - (1.0 - g.top_k / g.experts) ** m)
            touched = np.maximum(touched, 1.0)
            t = timer.gemm_us(np.maximum(rows / touched, 1.0), np.round(g.n * touched), g.k, p)
        else:
            t = timer.gemm_us(np.maximum(m, 1.0), g.n, g.k, p)
        total += np.where(m > 0, t, 0.0)
    return total


def attention_layers(ops: Ops) -> tuple[tuple[Attention, int], ...]:
    """(attention, layers) pairs: full-attention layers and windowed ones."""
    a = ops.attention
    full = replace(a, window=0, windowed_layers=0)
    if not a.window:
        return ((full, ops.layers),)
    return ((full, ops.layers - a.windowed_layers), (a, a.windowed_layers))


def context_us(ops: Ops, timer: Timer, seqs: np.ndarray, new: np.ndarray,
               cached: np.ndarray) -> np.ndarray:
    """Prefill attention over every layer (µs): ``seqs`` chunks of ``new`` tokens each over
    ``cached`` ones (arrays)."""
    total = np.zeros(np.broadcast(seqs, new, cached).shape)
    for a, layers in attention_layers(ops):
        if layers:
            total += layers * timer.context_attention_us(seqs, new, cached, a,
                                                         ops.kv_element_bytes)
    return total


def decode_us(ops: Ops, timer: Timer, seqs: np.ndarray, kv_sum: np.ndarray) -> np.ndarray:
    """Decode attention over every layer (µs): ``seqs`` sequences, ``kv_sum`` KV tokens."""
    kv_mean = np.where(seqs > 0, kv_sum / np.maximum(seqs, 1), 0.0)
    total = np.zeros_like(kv_mean)
    for a, layers in attention_layers(ops):
        if layers:
            total += layers * timer.generation_attention_us(seqs, kv_mean, a,
                                                            ops.kv_element_bytes)
    return total


def step_parts(ops: Ops, timer: Timer, pp: int, prefill_tokens: np.ndarray,
               prefill_seqs: np.ndarray, prefill_attention_us: np.ndarray,
               decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> Parts:
    """µs per step by class; ``prefill_attention_us`` from :func:`context_us`."""
    m = np.asarray(prefill_tokens, float) + np.asarray(decode_seqs, float)
    precision = ops.weight_precision
    gemm = (ops.layers * _gemms_us(timer, ops.attention_gemms, m, precision)
            + ops.dense_layers * _gemms_us(timer, ops.dense_mlp, m, precision)
            + ops.moe_layers * _gemms_us(timer, ops.moe_mlp, m, precision))
    rows = np.asarray(prefill_seqs, float) + np.asarray(decode_seqs, float)
    lm_head = np.where(rows > 0, timer.gemm_us(np.maximum(rows, 1.0), ops.vocab, ops.hidden,
                                               "bf16"), 0.0)
    attention = prefill_attention_us + decode_us(ops, timer, np.asarray(decode_seqs, float),
                                                 np.asarray(decode_kv_sum, float))
    a = ops.attention
    width = max(g.n for g in ops.dense_mlp + ops.moe_mlp) if ops.dense_mlp + ops.moe_mlp else 0
    per_layer_bytes = m * ACT_BYTES * (6 * ops.hidden + 2 * (a.heads + a.kv_heads) * a.head_dim
                                       + 1.5 * width)
    other = (ops.layers * ELEMENTWISE_KERNELS * timer.elementwise_us(
        per_layer_bytes / ELEMENTWISE_KERNELS)
        + timer.elementwise_us(2 * m * ops.hidden * ACT_BYTES)  # embedding gather
        + timer.elementwise_us(rows * ops.vocab * 8.0))  # logits to fp32 and the sampler
    other = np.where(m > 0, other, 0.0)
    comm = np.zeros_like(m)
    if ops.tp > 1:
        ar = timer.allreduce_us(m * ops.hidden * ACT_BYTES, ops.tp)
        comm = np.where(m > 0, (ops.layers * ops.allreduces_per_layer + 1) * ar, 0.0)
    if pp > 1:  # activations handed to the next stage: a 2-rank all-reduce moves as much
        comm = comm + (pp - 1) * np.where(
            m > 0, timer.allreduce_us(m * ops.hidden * ACT_BYTES, 2), 0.0)
    return Parts(gemm + lm_head, attention, comm, other)
