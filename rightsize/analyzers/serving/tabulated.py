"""A step model tabulated once for a simulation: step times by table lookup instead of a model
call per step.

The simulation asks for one step's time thousands of times, one at a time; the step model
answers arrays fast (``step_ms_vec``) but a single step slowly (~1 ms of numpy overhead). A
step's time splits into a decode part, a function of the decode sequences ``B`` and their mean
KV length, and a prefill part added to it, a function of the prefill tokens, their cached
context and ``B`` (the GEMMs see ``prefill + B`` rows). Both parts are evaluated on grids with
one vectorized call each, and a step is read back by interpolation:

- decode: every ``B`` from 0 to ``max_num_seqs`` exactly, times 28 mean KV lengths
  (geometric), linear in the KV length;
- prefill: 47 token counts (1 to 48 by doubling steps, then geometric from 64 to
  ``max_num_batched_tokens``) x 22
  contexts x 14 batches, trilinear; the prefill part is ``S(P, ctx, B, K) - S(0, 0, B, K)``.

:meth:`Tabulated.check` measures the largest relative error against the model on random
steps (the tests hold it under 1% for the shipped model); ``scale`` multiplies prefill and
decode steps by separate factors (the low and high ends of the model's range). Pure.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

import numpy as np

StepVec = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _grid(top: float, points: int, start: float = 1.0) -> np.ndarray:
    return np.unique(np.concatenate([[0.0], np.geomspace(start, max(top, start), points)]))


class Tabulated:
    """``__call__(prefill_tokens, prefill_ctx, decode_seqs, decode_kv_sum)`` like
    ``step_ms_vec`` (arrays, vectorized), and :meth:`one` for a single step (floats, no
    numpy: a few microseconds)."""

    def __init__(self, step: StepVec, max_seqs: int, max_tokens: int, max_kv: int,
                 scale: tuple[float, float] = (1.0, 1.0)) -> None:
        self.step = step
        self.scale = scale  # (prefill steps, decode steps)
        max_kv = max(max_kv, 2)
        self.b_dec = np.arange(max_seqs + 1, dtype=np.float64)
        self.kvm = _grid(max_kv, 27)
        bb, kk = np.meshgrid(self.b_dec, self.kvm, indexing="ij")
        zeros = np.zeros(bb.size, np.int64)
        dec = step(zeros, zeros, bb.ravel().astype(np.int64),
                   np.round(bb * kk).ravel().astype(np.int64))
        self.dec = np.asarray(dec, np.float64).reshape(bb.shape)
        # from 1 token: a prefill's first token carries the prefill overhead (a jump from 0)
        self.p = np.unique(np.concatenate([[1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48],
                                           np.geomspace(64, max(max_tokens, 64), 36)]))
        self.c = _grid(max_kv, 21, 16.0)
        self.b = _grid(max_seqs, 17)
        pp, cc, bq = np.meshgrid(self.p, self.c, self.b, indexing="ij")
        kv = np.round(bq * min(1024.0, max_kv)).ravel().astype(np.int64)
        b_int = bq.ravel().astype(np.int64)
        with_p = step(pp.ravel().astype(np.int64), cc.ravel().astype(np.int64), b_int, kv)
        without = step(np.zeros_like(b_int), np.zeros_like(b_int), b_int, kv)
        self.pre = (np.asarray(with_p, np.float64) - np.asarray(without, np.float64)
                    ).reshape(pp.shape)
        self._dec_rows = self.dec.tolist()
        self._kvm = self.kvm.tolist()
        self._p, self._c, self._b = self.p.tolist(), self.c.tolist(), self.b.tolist()
        self._pre = self.pre.tolist()
        self.max_seqs = max_seqs

    def scaled(self, prefill: float, decode: float) -> Tabulated:
        """The same tables, steps multiplied by these factors."""
        out = object.__new__(Tabulated)
        for name in ("step", "b_dec", "kvm", "dec", "p", "c", "b", "pre", "_dec_rows", "_kvm",
                     "_p", "_c", "_b", "_pre", "max_seqs"):
            setattr(out, name, getattr(self, name))
        out.scale = (prefill, decode)
        return out

    def one(self, p_tok: int, p_ctx: int, d_seqs: int, d_kv: int) -> float:
        """One step's time in ms."""
        if d_seqs > self.max_seqs:
            raise ValueError(f"{d_seqs} decode sequences: the table stops at {self.max_seqs}")
        row = self._dec_rows[d_seqs]
        ms = row[0] if d_seqs == 0 else _lerp(self._kvm, row, d_kv / d_seqs)
        if p_tok <= 0:
            return ms * self.scale[1]
        return (ms + self._prefill(float(p_tok), float(p_ctx), float(d_seqs))) * self.scale[0]

    def decodes(self, seqs: int, kv_sums: np.ndarray) -> np.ndarray:
        """Decode-only steps of ``seqs`` sequences (a row of the table), one per KV sum."""
        row = self.dec[seqs]
        if seqs == 0:
            return np.full(len(kv_sums), row[0] * self.scale[1])
        return np.interp(np.asarray(kv_sums, np.float64) / seqs, self.kvm, row) * self.scale[1]

    def _prefill(self, p: float, c: float, b: float) -> float:
        ip, fp = _locate(self._p, p)
        ic, fc = _locate(self._c, c)
        ib, fb = _locate(self._b, b)
        t = self._pre
        out = 0.0
        for dp, wp in ((0, 1 - fp), (1, fp)):
            if wp == 0.0:
                continue
            plane = t[ip + dp]
            for dc, wc in ((0, 1 - fc), (1, fc)):
                if wc == 0.0:
                    continue
                line = plane[ic + dc]
                out += wp * wc * (line[ib] * (1 - fb) + line[ib + 1] * fb)
        return out

    def __call__(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                 decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray:
        """Vectorized lookup: the same interpolation as :meth:`one`, for arrays."""
        p = np.asarray(prefill_tokens, np.float64)
        c = np.asarray(prefill_ctx, np.float64)
        b = np.asarray(decode_seqs, np.int64)
        if b.size and int(b.max()) > self.max_seqs:
            raise ValueError(f"{int(b.max())} decode sequences: the table stops at "
                             f"{self.max_seqs}")
        kvm = np.where(b > 0, np.asarray(decode_kv_sum, np.float64) / np.maximum(b, 1), 0.0)
        i, f = _locate_vec(self.kvm, kvm)
        dec = self.dec[b, i] * (1 - f) + self.dec[b, i + 1] * f
        dec = np.where(b > 0, dec, self.dec[0, 0])
        ip, fp = _locate_vec(self.p, p)
        ic, fc = _locate_vec(self.c, c)
        ib, fb = _locate_vec(self.b, b.astype(np.float64))
        pre = np.zeros_like(p)
        for dp, wp in ((0, 1 - fp), (1, fp)):
            for dc, wc in ((0, 1 - fc), (1, fc)):
                for db, wb in ((0, 1 - fb), (1, fb)):
                    pre += wp * wc * wb * self.pre[ip + dp, ic + dc, ib + db]
        return np.where(p > 0, (dec + pre) * self.scale[0], dec * self.scale[1])

    def check(self, samples: int = 2000, seed: int = 0) -> float:
        """Largest relative error against the model on random steps inside the tables."""
        rng = np.random.default_rng(seed)
        b = rng.integers(0, self.max_seqs + 1, samples)
        p = np.where(rng.random(samples) < 0.5, 0, rng.integers(1, int(self.p[-1]) + 1,
                                                               samples))
        c = rng.integers(0, int(self.c[-1]) + 1, samples) * (p > 0)
        kv = b * rng.integers(1, int(self.kvm[-1]) + 1, samples)
        model = np.asarray(self.step(p, c, b, kv), np.float64)
        model *= np.where(p > 0, self.scale[0], self.scale[1])
        ones = np.array([self.one(*map(int, x)) for x in zip(p, c, b, kv, strict=True)])
        return float(max(np.max(np.abs(self(p, c, b, kv) - model) / model),
                         np.max(np.abs(ones - model) / model)))


def _locate(grid: list[float], x: float) -> tuple[int, float]:
    """Index of the grid cell holding ``x`` (clamped) and the fraction across it."""
    i = bisect_right(grid, x) - 1
    i = min(max(i, 0), len(grid) - 2)
    lo, hi = grid[i], grid[i + 1]
    return i, min(max((x - lo) / (hi - lo), 0.0), 1.0)


def _locate_vec(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    lo, hi = grid[i], grid[i + 1]
    return i, np.clip((x - lo) / (hi - lo), 0.0, 1.0)


def _lerp(grid: list[float], values: list[float], x: float) -> float:
    i, f = _locate(grid, x)
    return values[i] * (1 - f) + values[i + 1] * f
