"""Step-time stand-ins with the ``StepModel`` protocol's signatures, for the simulation's tests.

``Constant`` takes the same time for every step (the M/D/1 check); ``Affine`` is a plain
roofline-shaped model (a floor, per-token GEMM, per-KV-token attention, quadratic prefill
attention) whose numbers are chosen to look like an 8B model on one H100: the simulation's
tests need controlled step times, not the serving model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rightsize.analyzers.serving.step import Deployment, Timed


@dataclass
class Constant:
    ms: float
    kv_cache_tokens: int = 1 << 30
    deployment: Deployment = field(default_factory=lambda: Deployment("H100 SXM"))
    calibrated_by: str = ""
    assumes: tuple[str, ...] = ()
    memory_per_gpu_bytes: int = 0
    spread: float = 0.0  # low/high = ms x (1 -/+ spread)

    def _timed(self, ms: float) -> Timed:
        return Timed(ms, ms * (1 - self.spread), ms * (1 + self.spread))

    def prefill(self, prompt_tokens: Sequence[int]) -> Timed:
        return self._timed(self.ms)

    def decode(self, kv_lens: Sequence[int]) -> Timed:
        return self._timed(self.ms)

    def step(self, chunks: Sequence[tuple[int, int]], kv_lens: Sequence[int]) -> Timed:
        return self._timed(self.ms)

    def step_ms_vec(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                    decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray:
        return np.full(len(prefill_tokens), self.ms)


@dataclass
class Affine(Constant):
    """``floor + per_token x (prefill + decode tokens) + per_kv x KV read + per_attn x
    prefill attention pairs``, in ms."""

    ms: float = 6.0  # the floor: weights read once per step
    per_token: float = 0.03
    per_kv: float = 5e-5
    per_attn: float = 2e-7
    kv_cache_tokens: int = 400_000

    def step_ms_vec(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                    decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray:
        p = np.asarray(prefill_tokens, np.float64)
        tokens = p + np.asarray(decode_seqs, np.float64)
        gemm = np.maximum(self.ms, self.per_token * tokens)
        attn = self.per_kv * np.asarray(decode_kv_sum, np.float64) + self.per_attn * p * (
            np.asarray(prefill_ctx, np.float64) + p / 2)
        return gemm + attn

    def step(self, chunks: Sequence[tuple[int, int]], kv_lens: Sequence[int]) -> Timed:
        ms = float(self.step_ms_vec(np.array([sum(c[0] for c in chunks)]),
                                    np.array([sum(c[1] for c in chunks)]),
                                    np.array([len(kv_lens)]), np.array([sum(kv_lens)]))[0])
        return self._timed(ms)
