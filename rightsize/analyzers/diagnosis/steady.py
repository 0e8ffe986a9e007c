"""Steady-state what-ifs: the time a rule's action removes, per step, without one-off steps.

Input: the per-step values (ms) of the measures a what-if removes, the step numbers and their
durations. Output: :class:`Steady` (the removable time of a steady-state step and the steps
left out) for ``advise._what_if``; :func:`series` builds the per-step values from a rank's
diagnosis and trace. Pure.

Why: a what-if removes a share of "the step". Averaged over every step, one one-off event
drives it: a ResNet-50 pinning what-if promised 11.7% (5.2-17.7%) from a single 40 ms
pageable copy in the first profiled step, when the copies of the other steps cost 2.2%. The
removable time is the measure less the one-off steps' excess (scaled by the steady-state steps'
mean over every step's, so a measure keeps its definition); a step is an outlier, named in the
what-if and left out, when its part is more than :data:`OUTLIER_FACTOR` times the median
step's part and :data:`OUTLIER_MIN_PCT` of the median step's duration above it, and only while
the outliers are at most :data:`MAX_OUTLIER_SHARE` of the steps (one at least, from three
steps): more of them is the job's pattern (an all-reduce every fourth step), not a one-off.
The step's duration ("now") stays the mean of all steps: the one-off still happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from rightsize.analyzers.document.diagnosis import Diagnosis
from rightsize.analyzers.metrics.per_step import exclusive_windows
from rightsize.analyzers.metrics.steps import Steps

OUTLIER_FACTOR = 3.0  # a step's part over this many times the median step's part...
OUTLIER_MIN_PCT = 2.0  # ...and this much of the median step's duration above it
MAX_OUTLIER_SHARE = 0.2  # outliers are at most this share of the steps (one from 3 steps)
MIN_STEPS = 3  # with fewer steps there is no median to stand out from
# The shares whose per-step time the diagnosis already holds (StepSplit.shares_ms).
SHARE_MEASURES = {"dataloader_pct": ("dataloader",), "communication_pct": ("communication",),
                  "memory_pct": ("memory",), "pcie_pct": ("pcie",),
                  "host_rest_pct": ("host", "idle")}


@dataclass(frozen=True, slots=True)
class Steady:
    """The removable time of a steady-state step and the steps left out as one-offs."""

    ms: float  # mean over the steps kept
    kept: np.ndarray  # bool per step
    outliers: tuple[int, ...] = ()  # their step numbers
    outlier_ms: tuple[float, ...] = ()
    median_ms: float = 0.0

    def words(self, what: str) -> str:
        """'; steady-state steps only: step 5 (42.0 ms) left out as a one-off of the pageable
        copies' cost (median 2.0 ms per step)', or '' without outliers."""
        if not self.outliers:
            return ""
        steps = ", ".join(f"{n} ({ms:.1f} ms)" for n, ms in zip(self.outliers, self.outlier_ms,
                                                                 strict=True))
        many = len(self.outliers) > 1
        return (f"; steady-state steps only: step{'s' if many else ''} {steps} left out as "
                f"{'one-offs' if many else 'a one-off'} of {what} (median "
                f"{self.median_ms:.1f} ms per step)")


def steady(values_ms: Sequence[float], numbers: Sequence[int],
           step_ms: Sequence[float]) -> Steady:
    """The steady-state part of ``values_ms`` (one value per step; see the module docstring)."""
    v = np.asarray(values_ms, dtype=float)
    n = len(v)
    kept = np.ones(n, dtype=bool)
    if n < MIN_STEPS:
        return Steady(float(v.mean()) if n else 0.0, kept)
    median = float(np.median(v))
    floor = OUTLIER_MIN_PCT / 100 * float(np.median(np.asarray(step_ms, dtype=float)))
    out = (v > OUTLIER_FACTOR * median) & (v - median > floor)
    if not out.any() or out.sum() > max(1, int(MAX_OUTLIER_SHARE * n)):
        return Steady(float(v.mean()), kept, median_ms=median)
    kept = ~out
    which = [int(i) for i in np.nonzero(out)[0]]
    return Steady(float(v[kept].mean()), kept, tuple(int(numbers[i]) for i in which),
                  tuple(float(v[i]) for i in which), median)


def series(diag: Diagnosis, steps: Steps, pinned: Mapping[str, np.ndarray],
           fp32: pl.DataFrame | None) -> dict[str, tuple[float, ...]]:
    """Per step (ms), the measures a what-if removes that can be cut at step boundaries: the
    diagnosis' shares, the pinned-copy model's parts (``pinned``: already per step) and the
    fp32 matrix kernels off tensor cores (``fp32``: their ``ts_ns``/``dur_ns``)."""
    out: dict[str, tuple[float, ...]] = {}
    if not diag.per_step:
        return out
    for measure, shares in SHARE_MEASURES.items():
        out[measure] = tuple(sum(s.shares_ms.get(k, 0.0) for k in shares)
                             for s in diag.per_step)
    out.update({k: tuple(float(x) for x in v) for k, v in pinned.items()})
    if fp32 is not None and fp32.height:
        out["fp32_step_pct"] = tuple(float(x) for x in summed_in_steps(fp32, steps))
    return out


def summed_in_steps(rows: pl.DataFrame, steps: Steps) -> np.ndarray:
    """ms of ``dur_ns`` summed per step, each row in the step its ``ts_ns`` falls in (as the
    measure sums kernel time, overlaps counted)."""
    lo, hi = exclusive_windows(steps)
    ts = rows["ts_ns"].to_numpy()
    which = np.searchsorted(lo, ts, side="right") - 1
    ok = (which >= 0) & (ts < hi[np.clip(which, 0, None)])
    return np.bincount(which[ok], rows["dur_ns"].to_numpy()[ok], minlength=len(lo)) / 1e6
