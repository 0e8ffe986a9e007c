"""Attention done eagerly, found by its shape, and what a fused kernel would take instead.

Inputs: the trace's host ops (with ``record_shapes``: ``Input Dims``/``Input type``; Python
frames when ``with_stack``), the primary GPU's kernels, the step windows and the catalog GPU.
Output: :class:`EagerAttention` (the chains found, their kernel time, FLOPs and the score
matrices they write) and the measures and words of the ``eager-attention`` rule.

A chain is a batched matmul whose output is ``[..., Lq, Lk]`` (``aten::bmm``, ``baddbmm``,
``matmul``: Q Kᵀ), a softmax over that shape, and the next batched matmul taking
``[..., Lq, Lk]`` as its first operand (P V), one after the other on one thread; its kernels are
every kernel an op launched between the first matmul's start and the last one's end (the
scaling, masking and casts in between too). A fused attention elsewhere in the trace does not
hide a chain. Without recorded shapes, the kernels of batched matmuls and softmax ops count
when the trace has a softmax and no fused attention op (names alone).

What-if: the chains' attention FLOPs (``2·B·H·Lq·Lk·(D + Dv)``) at the rate the GPU's fused
attention kernel reached in real traces (``data/fused_attention.json``, written by
``benchmarks/fused_attention_rates.py``: the largest flash call measured on that GPU; another
GPU takes its vendor's measured fraction of peak, applied to its own peak); at best at
:data:`FLASH_BEST_FRACTION` of peak, at worst at half the measured rate. Pure.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis.roofline import DTYPE_BYTES, MATMUL_ARGS, op_cost
from rightsize.catalog import Gpu

BMM_OPS = ("aten::bmm", "aten::baddbmm", "aten::matmul")
SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
FUSED_OPS = ("aten::_flash_attention_forward", "aten::_efficient_attention_forward",
             "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_cudnn_attention")
# FlashAttention-2, which SDPA's flash backend runs, reaches 35% of an H100's dense peak
# (FlashAttention-3, Shah et al. 2024, abstract): the best a fused kernel is credited with.
FLASH_BEST_FRACTION = 0.35


@dataclass(frozen=True, slots=True)
class EagerAttention:
    """The eager attention of the primary GPU inside the steps."""

    kernel_ns: int  # kernels of the chains (or of bmm/softmax ops, by names alone)
    chains: int  # bmm -> softmax -> bmm chains (0: found by names alone)
    flops: float  # attention FLOPs of the chains (Q Kᵀ and P V), all steps
    scores: tuple[int, ...]  # the largest softmax input [..., Lq, Lk]
    score_bytes: int  # scores and probabilities of that chain, held at once
    precision: str | None  # of the score matmuls
    module: str | None  # the ``nn.Module: *Attention*`` frame around them (with_stack/modules)


@cache
def fused_rates() -> dict[str, dict[str, Any]]:
    text = resources.files("rightsize.analyzers.diagnosis").joinpath(
        "data/fused_attention.json").read_text()
    return dict(json.loads(text)["gpus"])


def _shape(text: str | None) -> list[Any]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _outermost(ops: pl.DataFrame) -> pl.DataFrame:
    """Ops not inside another op of the list on their thread (aten::matmul's own aten::bmm);
    ``ops`` sorted by thread and start."""
    keep, tid_now, end_now = [], None, -1
    for tid, ts, end in ops.select("tid", "ts_ns", "end_ns").iter_rows():
        inner = tid == tid_now and ts < end_now and end <= end_now
        keep.append(not inner)
        if not inner:
            tid_now, end_now = tid, end
    return ops.filter(pl.Series(keep, dtype=pl.Boolean))


def _matmul_shapes(name: str, dims: list[Any]) -> tuple[list[int], list[int]] | None:
    """(first operand, output) shapes of a batched matmul, or None if not recorded."""
    _, ia, ib = MATMUL_ARGS.get(name, (None, 0, 1))
    if max(ia, ib) >= len(dims):
        return None
    a, b = dims[ia], dims[ib]
    if not (isinstance(a, list) and isinstance(b, list) and len(a) >= 3 and len(b) >= 2):
        return None
    return a, [*a[:-1], b[-1]]


def _same(x: list[int], y: list[int]) -> bool:
    """The same [..., L, S] up to how the batch dims are split ([B, H, L, S] vs [B*H, L, S])."""
    return len(x) >= 3 and len(y) >= 3 and x[-2:] == y[-2:] and \
        math.prod(x[:-2]) == math.prod(y[:-2])


def find(cpu_ops: pl.DataFrame, kernels: pl.DataFrame, starts: np.ndarray,
         ends: np.ndarray) -> EagerAttention | None:
    """Eager attention of ``kernels`` within the step windows; None when no kernel names its
    launching op."""
    if kernels.height == 0 or "external_id" not in kernels.columns:
        return None
    in_steps = _in_windows(kernels, starts, ends)
    names = cpu_ops.filter(pl.col("name").is_in((*SOFTMAX_OPS, *FUSED_OPS)))
    if names.height == 0:
        return EagerAttention(0, 0, 0.0, (), 0, None, None)
    shaped = names.filter(pl.col("name").is_in(SOFTMAX_OPS) & pl.col("input_dims").is_not_null())
    if shaped.height == 0:
        return _by_names(cpu_ops, in_steps, names)
    ops = cpu_ops.filter(pl.col("name").is_in((*BMM_OPS, *SOFTMAX_OPS))
                         & pl.col("input_dims").is_not_null()).with_columns(
        end_ns=pl.col("ts_ns") + pl.col("dur_ns")).sort(["tid", "ts_ns", "dur_ns"],
                                                       descending=[False, False, True])
    chains = _chains(_outermost(ops))
    if not chains:
        return EagerAttention(0, 0, 0.0, (), 0, None, None)
    return _measure(chains, cpu_ops, in_steps, starts, ends)


def _chains(ops: pl.DataFrame) -> list[dict[str, Any]]:
    """bmm -> softmax -> bmm on one thread, each step reading the one before's [.., Lq, Lk]."""
    out: list[dict[str, Any]] = []
    for (tid,), rows in ops.partition_by("tid", as_dict=True, maintain_order=True).items():
        seq = rows.select("name", "ts_ns", "end_ns", "input_dims", "input_types").rows()
        for i, (name, ts, end, dims, types) in enumerate(seq):
            if name not in SOFTMAX_OPS:
                continue
            scores = (_shape(dims) or [None])[0]
            if not isinstance(scores, list) or len(scores) < 3:
                continue
            qk = next((r for r in reversed(seq[:i]) if r[0] in BMM_OPS), None)
            pv = next((r for r in seq[i + 1:] if r[0] in BMM_OPS), None)
            qk_s = _matmul_shapes(qk[0], _shape(qk[3])) if qk else None
            pv_s = _matmul_shapes(pv[0], _shape(pv[3])) if pv else None
            if qk and pv and qk_s and pv_s and _same(qk_s[1], scores) \
                    and _same(pv_s[0], scores):
                out.append({"tid": tid, "start": qk[1], "end": pv[2], "scores": scores,
                            "score_type": (_shape(types) or [None])[0], "ops": (qk, pv)})
    return out


def in_windows_ns(kernels: pl.DataFrame, starts: np.ndarray, ends: np.ndarray) -> int:
    """Kernel time of the kernels that start inside a step window."""
    return int(_in_windows(kernels, starts, ends)["dur_ns"].sum()) if kernels.height else 0


def _in_windows(kernels: pl.DataFrame, starts: np.ndarray, ends: np.ndarray) -> pl.DataFrame:
    ts = kernels["ts_ns"].to_numpy()
    i = np.searchsorted(starts, ts, side="right") - 1
    ok = (i >= 0) & (ts < ends[np.clip(i, 0, None)]) if len(starts) else np.zeros(len(ts), bool)
    return kernels.filter(pl.Series(ok))


def _measure(chains: list[dict[str, Any]], cpu_ops: pl.DataFrame, kernels: pl.DataFrame,
             starts: np.ndarray, ends: np.ndarray) -> EagerAttention:
    by_tid: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for c in chains:
        by_tid[c["tid"]].append((c["start"], c["end"]))
    inside = []
    for tid, spans in by_tid.items():
        lo = pl.Series([s for s, _ in spans], dtype=pl.Int64)
        hi = pl.Series([e for _, e in spans], dtype=pl.Int64)
        ops = cpu_ops.filter((pl.col("tid") == tid) & pl.col("external_id").is_not_null())
        ts = ops["ts_ns"].to_numpy()
        j = np.searchsorted(lo.to_numpy(), ts, side="right") - 1
        hit = (j >= 0) & (ts < hi.to_numpy()[np.clip(j, 0, None)])
        inside.append(ops.filter(pl.Series(hit)).select("external_id"))
    ids = pl.concat(inside).unique()
    kernel_ns = int(kernels.join(ids, on="external_id", how="semi")["dur_ns"].sum())
    counted = [c for c in chains if len(starts) and _inside(c["start"], starts, ends)]
    flops = 0.0
    precision = None
    for c in counted:
        for name, _, _, dims, types in c["ops"]:
            cost = op_cost(name, _shape(dims), _shape(types))
            if cost is not None:
                flops += cost.flops
                precision = precision or cost.precision
    big = max(chains, key=lambda c: math.prod(c["scores"]))
    size = DTYPE_BYTES.get(big["score_type"], 2)
    return EagerAttention(kernel_ns, len(counted), flops, tuple(big["scores"]),
                          2 * math.prod(big["scores"]) * size, precision,
                          _module(cpu_ops, big["tid"], big["start"], big["end"]))


# A Python frame of an attention module (with_stack or with_modules): "nn.Module:
# ViTSelfAttention_0", "nn.Module: Attention_3" (timm).
ATTENTION_MODULE = r"^nn\.Module: (\w*Attention\w*?)(?:_\d+)?$"


def _module(cpu_ops: pl.DataFrame, tid: str, start: int, end: int) -> str | None:
    """The innermost attention module frame around [start, end] on ``tid``, if recorded."""
    frames = cpu_ops.filter((pl.col("tid") == tid) & (pl.col("ts_ns") <= start)
                            & (pl.col("ts_ns") + pl.col("dur_ns") >= end)
                            & pl.col("name").str.contains(ATTENTION_MODULE))
    if frames.height == 0:
        return None
    name = frames.sort("ts_ns")["name"][-1]
    return str(name).removeprefix("nn.Module: ").rsplit("_", 1)[0]


def _inside(ts: int, starts: np.ndarray, ends: np.ndarray) -> bool:
    i = int(np.searchsorted(starts, ts, side="right")) - 1
    return i >= 0 and ts < int(ends[i])


def _by_names(cpu_ops: pl.DataFrame, kernels: pl.DataFrame,
              names: pl.DataFrame) -> EagerAttention:
    """No shapes recorded: kernels of bmm and softmax ops, when no fused attention op ran."""
    if names["name"].is_in(FUSED_OPS).any():
        return EagerAttention(0, 0, 0.0, (), 0, None, None)
    launched = cpu_ops.filter(pl.col("external_id").is_not_null()
                              & pl.col("name").is_in((*BMM_OPS, *SOFTMAX_OPS))
                              ).select("external_id").unique()
    ns = int(kernels.join(launched, on="external_id", how="semi")["dur_ns"].sum())
    return EagerAttention(ns, 0, 0.0, (), 0, None, None)


def fused_rate(gpu: Gpu | None, precision: str | None) -> tuple[float, str] | None:
    """(FLOP/s a fused attention kernel reaches on ``gpu``, where that rate comes from)."""
    if gpu is None:
        return None
    peak, used = gpu.tflops(precision or "bf16")
    if not peak:
        return None
    table = fused_rates()
    if gpu.name in table:
        r = table[gpu.name]
        return r["tflops"] * 1e12, (
            f"{r['tflops']:.0f} TFLOP/s, measured for the {gpu.name}'s fused kernel on its"
            f" largest call in {r['source'].split('__')[0]} ({r['call_gflops']:.1f} GFLOP a"
            " call)")
    same = [r["fraction_of_peak"] for r in table.values() if r.get("vendor") == gpu.vendor]
    pool = same or [r["fraction_of_peak"] for r in table.values()]
    if not pool:
        return None
    fraction = statistics.median(pool)
    return fraction * peak * 1e12, (
        f"{fraction:.1%} of the {gpu.name}'s {used} peak, the fraction"
        f" {'its vendor' if same else 'other'} GPUs' fused kernels reached in real traces")


def measures(found: EagerAttention | None, gpu: Gpu | None, step_ns: int, kernel_ns: int,
             steps: int) -> tuple[dict[str, float | None], dict[str, str]]:
    """The rule's measures (% of kernel time and of the step; the fused time of the chains'
    FLOPs, as measured, at best and at worst, % of the step) and the words of its detail and
    what-if."""
    if found is None:
        return {"eager_attention_pct": None, "eager_attention_step_pct": None}, {}
    pct = {"eager_attention_pct": 100.0 * found.kernel_ns / kernel_ns if kernel_ns else None,
           "eager_attention_step_pct": 100.0 * found.kernel_ns / step_ns if step_ns else None}
    words = {"attention": _shape_words(found, steps)}
    rate = fused_rate(gpu, found.precision) if found.flops else None
    if rate is None or not step_ns or gpu is None:
        return pct, words
    peak = (gpu.tflops(found.precision or "bf16")[0] or 0.0) * 1e12
    best_rate = max(rate[0], FLASH_BEST_FRACTION * peak)
    eager = float(found.kernel_ns)
    def share(r: float) -> float:  # never more than the eager kernels themselves take
        return 100.0 * min(found.flops / r * 1e9, eager) / step_ns
    pct |= {"fused_attention_pct": share(rate[0]), "fused_attention_best_pct": share(best_rate),
            "fused_attention_worst_pct": share(rate[0] / 2)}
    words["fused_attention_rate"] = (
        f"the chains' {found.flops / steps / 1e9:,.1f} GFLOP a step run at {rate[1]}; at best"
        f" at {FLASH_BEST_FRACTION:.0%} of peak (FlashAttention-2 on an H100, FlashAttention-3"
        " paper), at worst at half the measured rate")
    return pct, words


def _shape_words(found: EagerAttention, steps: int) -> str:
    """' over 3,137 tokens ([12, 3137, 3137] scores, 12 chains a step: ...)' or ''."""
    if not found.scores:
        return ""
    lq, lk = found.scores[-2], found.scores[-1]
    tokens = f"{lq:,} tokens" if lq == lk else f"{lq:,} queries x {lk:,} keys"
    chains = found.chains / steps if steps else 0
    where = f" in {found.module}" if found.module else ""
    return (f" over {tokens}{where} (bmm -> softmax -> bmm on {list(found.scores)} scores,"
            f" {chains:g} a step; a fused kernel never writes those scores and probabilities:"
            f" {found.score_bytes / 2**30:.2f} GiB per layer less memory at once)")
