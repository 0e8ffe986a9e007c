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

from rightsize.analyzers.serving.ops import ACT_BYTES, WEIGHT_BYTES, Attention, Gemm, Ops
from rightsize.analyzers.serving.timer import Timer
from rightsize.catalog import Gpu

ELEMENTWISE_KERNELS = 4  # per layer: 2 fused add+RMSNorm, RoPE, the gated activation


@dataclass(frozen=True, slots=True)
class Parts:
    """µs per step by operator class (arrays, one entry per step), all stages. GEMM time is
    split into its compute-bound and memory-bound shares (by the operator's time at the
    GPU's datasheet peak and bandwidth, :func:`compute_share`)."""

    gemm_compute: np.ndarray
    gemm_memory: np.ndarray
    prefill_attention: np.ndarray
    decode_attention: np.ndarray
    comm: np.ndarray
    other: np.ndarray

    @property
    def gemm(self) -> np.ndarray:
        return self.gemm_compute + self.gemm_memory

    @property
    def attention(self) -> np.ndarray:
        return self.prefill_attention + self.decode_attention

    @property
    def compute(self) -> np.ndarray:
        """Time bound by tensor throughput: compute-bound GEMMs and prefill attention."""
        return self.gemm_compute + self.prefill_attention

    @property
    def memory(self) -> np.ndarray:
        """Time bound by memory bandwidth: weight streaming, decode attention, elementwise."""
        return self.gemm_memory + self.decode_attention + self.other

    @property
    def total(self) -> np.ndarray:
        return self.gemm + self.attention + self.comm + self.other


def compute_share(gpu: Gpu, flops: np.ndarray, bytes_: np.ndarray, precision: str) -> np.ndarray:
    """The share of an operator's time bound by compute: its time at the datasheet peak over
    that plus its time at the datasheet bandwidth (0.5 at the ridge point)."""
    peak = (gpu.tflops(precision)[0] or gpu.fp32_tflops or 1.0) * 1e12
    tc = flops / peak
    tm = bytes_ / (gpu.memory_bandwidth_gbs * 1e9)
    return tc / np.maximum(tc + tm, 1e-30)


def _gemms_us(timer: Timer, gemms: tuple[Gemm, ...], m: np.ndarray,
              precision: str) -> tuple[np.ndarray, np.ndarray]:
    """(compute-bound, memory-bound) µs of ``gemms`` at ``m`` tokens."""
    comp, mem = np.zeros_like(m), np.zeros_like(m)
    wb = WEIGHT_BYTES[precision]
    for g in gemms:
        p = precision if g.quantized else "bf16"
        if g.experts:
            touched = g.experts * (1.0 - (1.0 - g.top_k / g.experts) ** m)
            touched = np.maximum(touched, 1.0)
            rows, n = np.maximum(m * g.top_k / touched, 1.0), np.round(g.n * touched)
        else:
            rows, n = np.maximum(m, 1.0), np.full_like(m, g.n)
        t = np.where(m > 0, timer.gemm_us(rows, n, g.k, p), 0.0)
        flops = 2.0 * rows * n * g.k
        bytes_ = n * g.k * (wb if g.quantized else ACT_BYTES) + rows * (n + g.k) * ACT_BYTES
        share = compute_share(timer.gpu, flops, bytes_, "fp8" if p == "fp8" else "bf16")
        comp += share * t
        mem += (1 - share) * t
    return comp, mem


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


def token_parts(ops: Ops, timer: Timer, pp: int, m: np.ndarray) -> np.ndarray:
    """What depends only on the step's token count ``m``, µs, rows: GEMM compute, GEMM
    memory, elementwise (with the embedding), communication."""
    precision = ops.weight_precision
    comp, mem = np.zeros_like(m), np.zeros_like(m)
    for gemms, layers in ((ops.attention_gemms, ops.layers), (ops.dense_mlp, ops.dense_layers),
                          (ops.moe_mlp, ops.moe_layers)):
        if layers and gemms:
            c, w = _gemms_us(timer, gemms, m, precision)
            comp, mem = comp + layers * c, mem + layers * w
    a = ops.attention
    width = max(g.n for g in ops.dense_mlp + ops.moe_mlp) if ops.dense_mlp + ops.moe_mlp else 0
    per_layer_bytes = m * ACT_BYTES * (6 * ops.hidden + 2 * (a.heads + a.kv_heads) * a.head_dim
                                       + 1.5 * width)
    other = (ops.layers * ELEMENTWISE_KERNELS * timer.elementwise_us(
        per_layer_bytes / ELEMENTWISE_KERNELS)
        + timer.elementwise_us(2 * m * ops.hidden * ACT_BYTES))  # embedding gather
    comm = np.zeros_like(m)
    if ops.tp > 1:
        ar = timer.allreduce_us(m * ops.hidden * ACT_BYTES, ops.tp)
        comm = (ops.layers * ops.allreduces_per_layer + 1) * ar
    if pp > 1:  # activations handed to the next stage: a 2-rank all-reduce moves as much
        comm = comm + (pp - 1) * timer.allreduce_us(m * ops.hidden * ACT_BYTES, 2)
    return np.stack([comp, mem, other, comm])


def row_parts(ops: Ops, timer: Timer, rows: np.ndarray) -> np.ndarray:
    """What depends only on the sequences sampled (one logit row each), µs, rows: LM head
    compute, LM head memory, logits to fp32 and the sampler."""
    c, w = _gemms_us(timer, (Gemm("lm_head", ops.vocab, ops.hidden, quantized=False),), rows,
                     "bf16")
    return np.stack([c, w, timer.elementwise_us(rows * ops.vocab * 8.0)])


# The row counts AIConfigurator's GEMM tables measure past 16 (every 16 to 256, every 256 to
# 4,352, each with its + 1 probe): between a full-tile size and its probe a table's time can
# step (tables.py, padded_envelope), which grid points around it would smear over a few rows.
TILE_ROWS = np.unique(np.concatenate([np.arange(16, 257, 16), np.arange(256, 4353, 256)]))
TILE_KNOTS = np.concatenate([TILE_ROWS, TILE_ROWS + 1]).astype(float)

# Token counts at which the token- and row-dependent times are computed once per deployment and
# interpolated between (log spaced: 1 to 1M, 96 a decade, plus the tables' tile sizes and
# probes): within 1% of computing them at every count on dense models, 2% on MoE ones (whose
# touched experts change with the count).
GRID = np.unique(np.concatenate([np.round(np.logspace(0, 6, 577)), TILE_KNOTS]))


class StepCurves:
    """:func:`token_parts` and :func:`row_parts` on :data:`GRID`, interpolated over log tokens:
    what makes a vectorized step a handful of ``np.interp`` calls."""

    def __init__(self, ops: Ops, timer: Timer, pp: int) -> None:
        self.log_grid = np.log(GRID)
        self.tokens = token_parts(ops, timer, pp, GRID)
        self.rows = row_parts(ops, timer, GRID)

    def _at(self, table: np.ndarray, x: np.ndarray) -> np.ndarray:
        lx = np.log(np.maximum(x, 1.0))
        out = np.stack([np.interp(lx, self.log_grid, t) for t in table])
        beyond = np.maximum(x / GRID[-1], 1.0)  # past the grid: linear in the work
        return np.where(x > 0, out * beyond, 0.0)

    def parts(self, m: np.ndarray, rows: np.ndarray) -> np.ndarray:
        t, r = self._at(self.tokens, m), self._at(self.rows, rows)
        return np.stack([t[0] + r[0], t[1] + r[1], t[2] + r[2], t[3]])


def step_parts(curves: StepCurves, ops: Ops, timer: Timer, prefill_tokens: np.ndarray,
               prefill_seqs: np.ndarray, prefill_attention_us: np.ndarray,
               decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> Parts:
    """µs per step by class; ``prefill_attention_us`` from :func:`context_us`."""
    m = np.asarray(prefill_tokens, float) + np.asarray(decode_seqs, float)
    rows = np.asarray(prefill_seqs, float) + np.asarray(decode_seqs, float)
    comp, mem, other, comm = curves.parts(m, rows)
    decode = decode_us(ops, timer, np.asarray(decode_seqs, float),
                       np.asarray(decode_kv_sum, float))
    return Parts(comp, mem, np.asarray(prefill_attention_us, float), decode, comm, other)
