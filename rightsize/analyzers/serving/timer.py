"""Per-operator times on one GPU, vectorized: the interface every source of times implements,
and the per-kernel projection behind GPUs without a measured table.

A :class:`Timer` answers, for arrays of sizes, how long one GPU takes for a GEMM, a prefill
(context) attention, a decode (generation) attention, a memory-bound elementwise kernel and a
tensor-parallel all-reduce (µs). :class:`ProjectionTimer` answers from the catalog's datasheet
peaks and the rates the trace analysis fitted (``sizing/rates.py``: a floor, the GEMM efficiency
curve over FLOPs, the achieved fraction of DRAM bandwidth) and the collective model of
``sizing/comm.py``; the measured tables (``tables.py``) answer the same questions from
AIConfigurator's measurements. Pure, numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from rightsize.analyzers.job import names
from rightsize.analyzers.serving.ops import ACT_BYTES, Attention
from rightsize.analyzers.sizing import comm
from rightsize.analyzers.sizing.rates import Rates, load_rates, peak_flops, rate_key
from rightsize.catalog import Gpu

# Fused attention kernels reach a lower share of the tensor peak than a large GEMM: FlashAttention-2
# 50-73% of A100 peak, FlashAttention-3 on H100 about 75% of its GEMM rate (Dao 2023, fig. 4;
# Shah et al. 2024, fig. 5): 0.6 of the GEMM curve is taken where no table measured it.
ATTENTION_OF_GEMM = 0.6


class Timer(Protocol):
    """Times (µs) of one GPU's operators; every argument may be an array (broadcast)."""

    source: str  # where the times come from, in words
    gpu: Gpu

    def gemm_us(self, m: np.ndarray, n: np.ndarray | int, k: int,
                precision: str) -> np.ndarray: ...

    def context_attention_us(self, seqs: np.ndarray, new: np.ndarray, cached: np.ndarray,
                             a: Attention, kv_bytes: float) -> np.ndarray: ...

    def generation_attention_us(self, seqs: np.ndarray, kv_mean: np.ndarray, a: Attention,
                                kv_bytes: float) -> np.ndarray: ...

    def elementwise_us(self, bytes_: np.ndarray) -> np.ndarray: ...

    def allreduce_us(self, bytes_: np.ndarray, ranks: int) -> np.ndarray: ...


def pairs(new: np.ndarray, cached: np.ndarray, window: int = 0) -> np.ndarray:
    """Causal query-key pairs per sequence (vectorized :func:`~.ops.causal_pairs`)."""
    p = new * cached + new * (new + 1) / 2
    if window:
        p = np.where(new + cached > window, np.minimum(p, new * window), p)
    return p


def collective_line(gpu: Gpu, collective: str, ranks: int
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """The communication model's time (µs) for ``collective`` over ``ranks`` GPUs of one node
    (the catalog's links of ``gpu``), for arrays of bytes: NCCL's algorithm and protocol per
    size (``sizing/comm.py``, ``comm.collective_curve``)."""
    if ranks < 2:
        return lambda bytes_: np.zeros(np.shape(bytes_))
    return comm.collective_curve(collective, comm.span_for(gpu, ranks))


class ProjectionTimer:
    """Datasheet peaks x the fitted rates of ``sizing/rates.py`` (the trace analysis's
    per-kernel model), for a GPU without a measured table."""

    def __init__(self, gpu: Gpu, rates: Rates | None = None) -> None:
        self.gpu = gpu
        self.rates = rates or load_rates().for_gpu(gpu)
        self.floor_us = self.rates.floor_us
        self.bandwidth = gpu.memory_bandwidth_gbs * 1e3 * self.rates.stream_fraction  # B/µs
        fitted = "fitted" if self.rates.fitted else "its vendor's median"
        self.source = (f"no measured table for {gpu.name}: the per-kernel projection"
                       f" (datasheet peaks x {fitted} achieved rates, sizing/rates.py)")
        self._allreduce: dict[int, Callable[[np.ndarray], np.ndarray]] = {}

    def _compute_us(self, flops: np.ndarray, precision: str) -> np.ndarray:
        r = self.rates
        key = rate_key(str(self.gpu.tflops(precision)[1]))
        top = r.gemm_max.get(key, float(np.median(list(r.gemm_max.values()))))
        half = r.gemm_half_flops.get(key, float(np.median(list(r.gemm_half_flops.values()))))
        s = r.gemm_shape.get(key, 1.0)
        f = np.maximum(flops, 1.0)
        frac = top * f**s / (f**s + half**s)
        return f / (peak_flops(self.gpu, precision) * 1e-6 * frac)

    def gemm_us(self, m: np.ndarray, n: np.ndarray | int, k: int,
                precision: str) -> np.ndarray:
        m = np.asarray(m, dtype=float)
        flops = 2.0 * m * n * k
        wb = {"fp8": 1.0, "int8": 1.0, "int4": 0.5}.get(precision, ACT_BYTES)
        bytes_ = np.asarray(n, dtype=float) * k * wb + m * (np.asarray(n) + k) * ACT_BYTES
        math_precision = "fp8" if precision == "fp8" else "bf16"  # int4/int8: weight-only
        t = np.maximum(self._compute_us(flops, math_precision), bytes_ / self.bandwidth)
        return np.maximum(t, self.floor_us)

    def context_attention_us(self, seqs: np.ndarray, new: np.ndarray, cached: np.ndarray,
                             a: Attention, kv_bytes: float) -> np.ndarray:
        p = seqs * pairs(np.asarray(new, float), np.asarray(cached, float), a.window)
        flops = 2.0 * p * a.heads * (a.head_dim + a.v_head_dim)
        io = seqs * (new + cached) * a.kv_heads * (a.head_dim + a.v_head_dim) * kv_bytes
        t = np.maximum(self._compute_us(flops, "bf16") / ATTENTION_OF_GEMM,
                       io / self.bandwidth)
        return np.where(seqs > 0, np.maximum(t, self.floor_us), 0.0)

    def generation_attention_us(self, seqs: np.ndarray, kv_mean: np.ndarray, a: Attention,
                                kv_bytes: float) -> np.ndarray:
        kv = np.minimum(kv_mean, a.window) if a.window else kv_mean
        bytes_ = seqs * kv * a.kv_heads * (a.head_dim + a.v_head_dim) * kv_bytes
        return np.where(seqs > 0, np.maximum(bytes_ / self.bandwidth, self.floor_us), 0.0)

    def elementwise_us(self, bytes_: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(bytes_, float) / self.bandwidth, self.floor_us)

    def allreduce_us(self, bytes_: np.ndarray, ranks: int) -> np.ndarray:
        line = self._allreduce.get(ranks)
        if line is None:
            line = self._allreduce[ranks] = collective_line(self.gpu, names.ALLREDUCE, ranks)
        return line(bytes_)


class CommTimer:
    """Another timer with its tensor-parallel all-reduces from a communication model the user
    fitted on their own nccl-tests logs (``rightsize comm fit``, ``--comm-model``): their
    measured fabric rather than the tables' or the catalog's."""

    def __init__(self, timer: Timer, model: comm.CommModel) -> None:
        self.timer = timer
        self.gpu = timer.gpu
        self.model = model
        self.source = f"{timer.source}; all-reduces by the communication model of {model.source}"
        self._allreduce: dict[int, Callable[[np.ndarray], np.ndarray]] = {}

    def gemm_us(self, m: np.ndarray, n: np.ndarray | int, k: int,
                precision: str) -> np.ndarray:
        return self.timer.gemm_us(m, n, k, precision)

    def context_attention_us(self, seqs: np.ndarray, new: np.ndarray, cached: np.ndarray,
                             a: Attention, kv_bytes: float) -> np.ndarray:
        return self.timer.context_attention_us(seqs, new, cached, a, kv_bytes)

    def generation_attention_us(self, seqs: np.ndarray, kv_mean: np.ndarray, a: Attention,
                                kv_bytes: float) -> np.ndarray:
        return self.timer.generation_attention_us(seqs, kv_mean, a, kv_bytes)

    def elementwise_us(self, bytes_: np.ndarray) -> np.ndarray:
        return self.timer.elementwise_us(bytes_)

    def allreduce_us(self, bytes_: np.ndarray, ranks: int) -> np.ndarray:
        line = self._allreduce.get(ranks)
        if line is None:
            line = self._allreduce[ranks] = (
                comm.collective_curve(names.ALLREDUCE, comm.span_for(self.gpu, ranks),
                                      self.model) if ranks > 1
                else (lambda b: np.zeros(np.shape(b))))
        return line(np.asarray(bytes_, dtype=float))

