"""One deployment under an online load: the simulation at the step model's point estimate and
at the low and high ends of its range.

Input: a :class:`~rightsize.analyzers.serving.step.StepModel`, the scheduler limits, the
requests and the replicas. Output: :class:`Online`, the pooled :class:`~.latency.Summary` of
every replica at the point estimate, and at the low and high step times (the model's range
propagated: each simulation's every step at that end). Requests go to replicas at random
(:func:`~.load.split`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rightsize.analyzers.serving.latency import Summary, summarize
from rightsize.analyzers.serving.load import split
from rightsize.analyzers.serving.simulate import Limits, Requests, simulate
from rightsize.analyzers.serving.step import StepModel
from rightsize.analyzers.serving.tabulated import Tabulated
from rightsize.catalog import Gpu

BIG_GPU_BYTES = 70 * 2**30  # vLLM's larger batch defaults from 70 GiB (not on A100s)


def vllm_defaults(gpu: Gpu) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) that ``vllm serve`` picks on this GPU
    (``EngineArgs.get_batch_defaults``, OpenAI server context): 1024 and 8192 on GPUs of 70 GiB
    or more other than the A100, else 256 and 2048."""
    big = gpu.memory_bytes >= BIG_GPU_BYTES and "a100" not in gpu.name.lower()
    return (1024, 8192) if big else (256, 2048)


@dataclass(frozen=True, slots=True)
class Ranges:
    """Step-time factors at the low and high end, per kind of step (prefill, decode)."""

    low: tuple[float, float]
    high: tuple[float, float]


def ranges_of(model: StepModel, isl: int) -> Ranges:
    """The model's range as factors of its point estimate, for a prefill and a decode step."""
    pf, dec = model.prefill([max(isl, 1)]), model.decode([max(isl, 1)])
    return Ranges((pf.low_ms / pf.ms, dec.low_ms / dec.ms),
                  (pf.high_ms / pf.ms, dec.high_ms / dec.ms))


def tables(model: StepModel, limits: Limits, reqs: Requests) -> Tabulated:
    """The step model tabulated over what this load and these limits can ask."""
    longest = int((reqs.prompt_tokens + reqs.output_tokens).max())
    common = np.unique(reqs.prompt_tokens)
    return Tabulated(model.step_ms_vec, limits.max_num_seqs,
                     max(limits.max_num_batched_tokens, int(reqs.prompt_tokens.max())), longest,
                     prompts=common.tolist() if common.size <= 8 else ())


@dataclass(frozen=True, slots=True)
class Online:
    point: Summary
    low: Summary  # at the low end of every step time
    high: Summary
    replicas: int
    limits: Limits


def run(table: Tabulated, ranges: Ranges | None, limits: Limits, reqs: Requests,
        replicas: int, *, seed: int = 0, skip: float = 0.0, scale: float = 1.0) -> Online:
    """Simulate every replica (at the point, low and high step times when ``ranges``)."""
    parts = split(reqs, replicas, seed)

    def at(prefill: float, decode: float) -> Summary:
        t = table.scaled(prefill * scale, decode * scale)
        return summarize(tuple(simulate(p, limits, t) for p in parts), skip)

    point = at(1.0, 1.0)
    if ranges is None:
        return Online(point, point, point, replicas, limits)
    return Online(point, at(*ranges.low), at(*ranges.high), replicas, limits)


def p95s(summary: Summary) -> tuple[float, float]:
    return summary.ttft_ms.p95, summary.tpot_ms.p95


def mean_lengths(reqs: Requests) -> tuple[float, float]:
    return float(np.mean(reqs.prompt_tokens)), float(np.mean(reqs.output_tokens))
