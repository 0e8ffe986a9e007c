"""A step model tabulated for a simulation: step times by table lookup instead of a model call
per step.

The simulation asks for one step's time thousands of times, one at a time; the step model
answers arrays fast (``step_ms_vec``) but a single step slowly (milliseconds of numpy over its
measured tables). A step's time splits into a decode part, a function of the decode sequences
``B`` and their mean KV length, and a prefill part added to it, a function of the prefill
tokens, their cached context and ``B`` (the GEMMs see ``prefill + B`` rows, and the measured
GEMM tables jump at some row counts, so ``B`` is never interpolated there):

- decode: every ``B`` to 64, then 2% apart to ``max_num_seqs``, times 27 mean KV lengths
  (geometric), bilinear; built at once;
- prefill: ``S(P, ctx, B, K) - S(0, 0, B, K)`` for every ``B`` exactly, on a grid of token
  counts (1 to 48 by doubling, then geometric to ``max_num_batched_tokens``, plus the load's
  own prompt lengths, exact) and contexts (0, then geometric), linear between grid points;
  each grid point's row over every ``B`` is computed the first time a step needs it (one
  vectorized call), so a simulation pays only for the prompt sizes it meets.

:meth:`Tabulated.check` measures the error against the model on random steps;
``benchmarks/serving_plan.py`` compares whole simulations on the table and on the model.
``scale`` multiplies prefill and decode steps by separate factors (the low and high ends of
the model's range, or an online calibration). Pure.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from rightsize.analyzers.serving.forward import TILE_KNOTS

KV_POINTS = 64  # geometric mean-KV grid points of the decode table
StepVec = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _grid(top: float, points: int, start: float = 1.0) -> np.ndarray:
    return np.unique(np.concatenate([[0.0], np.geomspace(start, max(top, start), points)]))


def _kv_grid(top: float) -> np.ndarray:
    """Mean KV lengths the decode table is computed at: 64 geometric points (8% apart) and
    every power of two below ``top``, where the attention tables' measured lengths put the
    knees of their log-log interpolation (linear interpolation between 33%-apart points that
    skipped them was up to 2.3% off a decode step on an L40S)."""
    twos = 2.0 ** np.arange(0, np.floor(np.log2(max(top, 1.0))) + 1)
    return np.unique(np.concatenate([_grid(top, KV_POINTS), twos]))


class _Prefill:
    """The prefill part's rows over every batch, filled on first use (shared by scaled
    copies of a table)."""

    def __init__(self, step: StepVec, max_seqs: int, p: list[float], c: list[float],
                 kv_per_seq: float) -> None:
        self.step = step
        self.b = np.arange(max_seqs + 1, dtype=np.int64)
        self.kv = np.round(self.b * kv_per_seq).astype(np.int64)
        zeros = np.zeros_like(self.b)
        self.base = np.asarray(step(zeros, zeros, self.b, self.kv), np.float64)
        self.p, self.c = p, c
        self.rows: dict[tuple[int, int], list[float]] = {}

    def row(self, ip: int, ic: int) -> list[float]:
        got = self.rows.get((ip, ic))
        if got is None:
            ms = np.asarray(self.step(np.full_like(self.b, int(self.p[ip])),
                                      np.full_like(self.b, int(self.c[ic])), self.b, self.kv),
                            np.float64)
            got = self.rows[(ip, ic)] = (ms - self.base).tolist()
        return got


class Tabulated:
    """Step times like ``step_ms_vec`` (``__call__``, arrays), :meth:`one` for a single step
    and :meth:`decodes` for a run of decode steps (the simulation's three uses)."""

    def __init__(self, step: StepVec, max_seqs: int, max_tokens: int, max_kv: int,
                 prompts: Sequence[int] = (), scale: tuple[float, float] = (1.0, 1.0)) -> None:
        self.step = step
        self.scale = scale  # (prefill steps, decode steps)
        self.max_seqs = max_seqs
        max_kv = max(max_kv, 2)
        b_dec = np.unique(np.concatenate([np.arange(min(max_seqs, 64) + 1),
                                          np.round(np.geomspace(64, max(max_seqs, 64), 48)),
                                          TILE_KNOTS]))
        self.b_dec = b_dec[b_dec <= max_seqs].astype(np.float64)
        self.kvm = _kv_grid(max_kv)
        bb, kk = np.meshgrid(self.b_dec, self.kvm, indexing="ij")
        zeros = np.zeros(bb.size, np.int64)
        self.dec = np.asarray(step(zeros, zeros, bb.ravel().astype(np.int64),
                                   np.round(bb * kk).ravel().astype(np.int64)),
                              np.float64).reshape(bb.shape)
        # from 1 token: a prefill's first token carries the prefill overhead (a jump from 0)
        p = np.unique(np.concatenate([[1, 2, 4, 8, 16, 32, 48],
                                      np.round(np.geomspace(64, max(max_tokens, 64), 32)),
                                      [x for x in prompts if 1 <= x <= max_tokens]]))
        c = _grid(max_kv, 13, 16.0).round()
        self.pre = _Prefill(step, max_seqs, p.tolist(), c.tolist(), min(1024.0, max_kv))
        self._lists()

    def _lists(self) -> None:
        self._dec_rows = self.dec.tolist()
        self._bd, self._kvm = self.b_dec.tolist(), self.kvm.tolist()

    def scaled(self, prefill: float, decode: float) -> Tabulated:
        """The same tables (sharing the prefill rows), steps multiplied by these factors."""
        out = object.__new__(Tabulated)
        for name in ("step", "b_dec", "kvm", "dec", "pre", "max_seqs"):
            setattr(out, name, getattr(self, name))
        out._lists()
        out.scale = (prefill, decode)
        return out

    def one(self, p_tok: int, p_ctx: int, d_seqs: int, d_kv: int) -> float:
        """One step's time in ms."""
        if d_seqs > self.max_seqs:
            raise ValueError(f"{d_seqs} decode sequences: the table stops at {self.max_seqs}")
        if d_seqs == 0:
            ms = self._dec_rows[0][0]
        else:
            i, f = _locate(self._bd, float(d_seqs))
            x = d_kv / d_seqs
            ms = _lerp(self._kvm, self._dec_rows[i], x) * (1 - f)
            if f:
                ms += _lerp(self._kvm, self._dec_rows[i + 1], x) * f
        if p_tok <= 0:
            return ms * self.scale[1]
        return (ms + self._prefill(float(p_tok), float(p_ctx), d_seqs)) * self.scale[0]

    def decodes(self, seqs: int, kv_sums: np.ndarray) -> np.ndarray:
        """Decode-only steps of ``seqs`` sequences, one per KV sum."""
        if seqs == 0:
            return np.full(len(kv_sums), self.dec[0, 0] * self.scale[1])
        i, f = _locate(self._bd, float(seqs))
        x = np.asarray(kv_sums, np.float64) / seqs
        ms = np.interp(x, self.kvm, self.dec[i]) * (1 - f)
        if f:
            ms += np.interp(x, self.kvm, self.dec[i + 1]) * f
        return ms * self.scale[1]

    def _prefill(self, p: float, c: float, b: int) -> float:
        ip, fp = _locate(self.pre.p, p)
        ic, fc = _locate(self.pre.c, c)
        out = 0.0
        for dp, wp in ((0, 1 - fp), (1, fp)):
            if wp == 0.0:
                continue
            for dc, wc in ((0, 1 - fc), (1, fc)):
                if wc:
                    out += wp * wc * self.pre.row(ip + dp, ic + dc)[b]
        return out

    def __call__(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                 decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray:
        return np.array([self.one(int(p), int(c), int(d), int(k)) for p, c, d, k in zip(
            prefill_tokens, prefill_ctx, decode_seqs, decode_kv_sum, strict=True)])

    def check(self, samples: int = 500, seed: int = 0) -> tuple[float, float]:
        """(median, largest) relative error against the model on random steps."""
        rng = np.random.default_rng(seed)
        b = rng.integers(0, self.max_seqs + 1, samples)
        p = np.where(rng.random(samples) < 0.5, 0, rng.integers(1, int(self.pre.p[-1]) + 1,
                                                               samples))
        c = rng.integers(0, int(self.pre.c[-1]) + 1, samples) * (p > 0)
        kv = b * rng.integers(1, int(self.kvm[-1]) + 1, samples)
        model = np.asarray(self.step(p, c, b, kv), np.float64)
        model *= np.where(p > 0, self.scale[0], self.scale[1])
        err = np.abs(self(p, c, b, kv) - model) / model
        return float(np.median(err)), float(err.max())


def _locate(grid: list[float], x: float) -> tuple[int, float]:
    """Index of the grid cell holding ``x`` (clamped) and the fraction across it."""
    i = bisect_right(grid, x) - 1
    i = min(max(i, 0), len(grid) - 2)
    lo, hi = grid[i], grid[i + 1]
    return i, min(max((x - lo) / (hi - lo), 0.0), 1.0)


def _lerp(grid: list[float], values: list[float], x: float) -> float:
    i, f = _locate(grid, x)
    return values[i] * (1 - f) + values[i + 1] * f
