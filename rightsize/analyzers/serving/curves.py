"""Per-GPU rate curves fitted on the measured tables: a few physical numbers per operator class
that reproduce a GPU's tables, ship as package data, and project onto GPUs without tables.

Forms (µs; ``P`` the datasheet dense peak in FLOPs/µs at the operator's precision, ``BW`` the
datasheet memory bandwidth in bytes/µs, both from the catalog):

- GEMM and prefill attention: ``t = t0 + max(F / (P e(F)), B / (BW beta))`` with the achieved
  fraction of peak ``e(F) = e_max F^s / (F^s + (tau P e_max)^s)``: a launch floor ``t0``, the
  best fraction ``e_max``, the time ``tau`` at which a smaller operator reaches half of it
  (small operators fill few SMs), the curve's steepness ``s``, and the fraction ``beta`` of
  bandwidth a memory-bound one streams at. ``F`` = FLOPs, ``B`` = bytes moved.
- Decode attention: ``t = t0 + B / (BW b(B))``, ``b(B) = b_max B^s / (B^s + (tau BW b_max)^s)``
  over the KV bytes read.

``benchmarks/fit_serving_rates.py`` fits them per GPU and dtype on AIConfigurator's tables
(least squared log error) and writes ``catalog/data/serving_rates.json``; a GPU it did not fit
gets the median of the fitted GPUs' numbers (they are fractions and times, comparable across
GPUs). :class:`CurveTimer` implements :class:`~.timer.Timer` from them. Pure but for reading the
package table once.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from rightsize.analyzers.serving.ops import ACT_BYTES, Attention
from rightsize.analyzers.serving.timer import ProjectionTimer, pairs
from rightsize.catalog import Gpu

COMPUTE = ("t0_us", "e_max", "tau_us", "shape", "beta")
COMPUTE_FP8 = (*COMPUTE, "row_us")
STREAM = ("t0_us", "b_max", "tau_us", "shape", "seq_us")
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def compute_us(p: Mapping[str, float], flops: np.ndarray, bytes_: np.ndarray, peak: float,
               bw: float, rows: np.ndarray | float = 0.0) -> np.ndarray:
    """The GEMM / prefill-attention form (see the module docstring); ``peak``, ``bw`` per µs.
    fp8 GEMMs add ``row_us`` per input row (the per-token dynamic quantization of the
    activations that vLLM's fp8 linear runs first)."""
    f = np.maximum(flops, 1.0)
    half = p["tau_us"] * peak * p["e_max"]
    s = p["shape"]
    tc = f / (peak * p["e_max"]) * (1.0 + (half / f) ** s)
    tm = bytes_ / (bw * p["beta"])
    return p["t0_us"] + p.get("row_us", 0.0) * rows + np.maximum(tc, tm)


def stream_us(p: Mapping[str, float], bytes_: np.ndarray, bw: float,
              seqs: np.ndarray | float = 0.0) -> np.ndarray:
    """The decode-attention form: KV bytes at a bandwidth fraction that grows with them, plus
    ``seq_us`` per sequence (each sequence's own blocks and its split-KV reduction)."""
    b = np.maximum(bytes_, 1.0)
    half = p["tau_us"] * bw * p["b_max"]
    return (p["t0_us"] + p.get("seq_us", 0.0) * seqs
            + b / (bw * p["b_max"]) * (1.0 + (half / b) ** p["shape"]))


def gemm_flops_bytes(m: np.ndarray, n: np.ndarray | int, k: int,
                     weight_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(m, float)
    n = np.asarray(n, float)
    return 2.0 * m * n * k, n * k * weight_bytes + m * (n + k) * ACT_BYTES


def context_flops_bytes(seqs: np.ndarray, new: np.ndarray, cached: np.ndarray, a: Attention,
                        kv_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    p = seqs * pairs(np.asarray(new, float), np.asarray(cached, float), a.window)
    flops = 2.0 * p * a.heads * (a.head_dim + a.v_head_dim)
    tokens = seqs * new
    io = tokens * a.heads * (a.head_dim + a.v_head_dim) * ACT_BYTES
    kv = seqs * (new + cached) * a.kv_heads * (a.head_dim + a.v_head_dim) * kv_bytes
    return flops, io + kv


def generation_bytes(seqs: np.ndarray, kv: np.ndarray, a: Attention,
                     kv_bytes: float) -> np.ndarray:
    return seqs * kv * a.kv_heads * (a.head_dim + a.v_head_dim) * kv_bytes


@cache
def load_curves() -> Mapping[str, Any]:
    """The shipped fit (``catalog/data/serving_rates.json``); empty when absent."""
    path = resources.files("rightsize.catalog").joinpath("data/serving_rates.json")
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text("utf-8")))


def pooled(gpus: Mapping[str, Mapping[str, Any]], exclude: str = "") -> dict[str, Any]:
    """The median of each fitted number over ``gpus`` (but ``exclude``): the curves of a GPU
    without tables."""
    pool = [v for k, v in gpus.items() if k != exclude]
    out: dict[str, Any] = {}
    for cls in ("gemm_bf16", "gemm_fp8", "context", "generation"):
        have = [g[cls] for g in pool if cls in g]
        if have:
            out[cls] = {k: statistics.median(h[k] for h in have) for k in have[0]}
    return out


class CurveTimer:
    """Times from fitted rate curves (this GPU's own, or the pooled ones)."""

    def __init__(self, gpu: Gpu, params: Mapping[str, Any], source: str) -> None:
        self.gpu = gpu
        self.params = params
        self.source = source
        self.projection = ProjectionTimer(gpu)
        self.bw = gpu.memory_bandwidth_gbs * 1e3  # bytes/µs
        self.peak = {p: (gpu.tflops(p)[0] or gpu.fp32_tflops or 1.0) * 1e6
                     for p in ("bf16", "fp8")}

    def gemm_us(self, m: np.ndarray, n: np.ndarray | int, k: int,
                precision: str) -> np.ndarray:
        use_fp8 = precision == "fp8" and "gemm_fp8" in self.params and \
            self.gpu.tflops("fp8")[1] == "fp8"
        p = self.params["gemm_fp8" if use_fp8 else "gemm_bf16"]
        flops, bytes_ = gemm_flops_bytes(m, n, k, WEIGHT_BYTES.get(precision, ACT_BYTES))
        return compute_us(p, flops, bytes_, self.peak["fp8" if use_fp8 else "bf16"], self.bw,
                          np.asarray(m, float))

    def context_attention_us(self, seqs: np.ndarray, new: np.ndarray, cached: np.ndarray,
                             a: Attention, kv_bytes: float) -> np.ndarray:
        flops, bytes_ = context_flops_bytes(seqs, new, cached, a, kv_bytes)
        t = compute_us(self.params["context"], flops, bytes_, self.peak["bf16"], self.bw)
        return np.where((seqs > 0) & (np.asarray(new) > 0), t, 0.0)

    def generation_attention_us(self, seqs: np.ndarray, kv_mean: np.ndarray, a: Attention,
                                kv_bytes: float) -> np.ndarray:
        kv = np.minimum(kv_mean, a.window) if a.window else np.asarray(kv_mean, float)
        t = stream_us(self.params["generation"], generation_bytes(seqs, kv, a, kv_bytes),
                      self.bw, seqs)
        return np.where(seqs > 0, t, 0.0)

    def elementwise_us(self, bytes_: np.ndarray) -> np.ndarray:
        return self.projection.elementwise_us(bytes_)

    def allreduce_us(self, bytes_: np.ndarray, ranks: int) -> np.ndarray:
        return self.projection.allreduce_us(bytes_, ranks)


def curve_timer(gpu: Gpu, curves: Mapping[str, Any] | None = None) -> CurveTimer | None:
    """The curves fitted on ``gpu``'s own tables (None: it has none in the shipped fit). The
    pooled curves (:func:`pooled`) are not used for other GPUs: in the leave-one-GPU-out
    validation they predicted prefill steps better than the per-kernel projection but decode
    steps worse (docs/serving.md), so those GPUs keep the projection the trace analysis uses."""
    doc = load_curves() if curves is None else curves
    gpus = doc.get("gpus", {})
    if gpu.name not in gpus:
        return None
    return CurveTimer(gpu, gpus[gpu.name], f"rate curves fitted on {gpu.name}'s measured"
                      " tables (AIConfigurator 0.12.0, the shipped fit: no tables found)")
