"""When ``--auto`` captures: once the job's step time is steady, then every ``--every`` or when
the step time drifted from the last capture's by more than ``--drift``.

Input: the step durations a process of the job publishes (``procs/<pid>.steps``: the last 256
steps, seconds, null for steps a capture recorded, whose time includes the profiler's). Output:
the reason to capture now, or None. Pure: the controller (:mod:`.controller`) reads the files
and keeps the history.

**Steady**: the last ``window`` steps all have a duration (none was profiled), and at least
``share`` of them lie within ``tolerance_pct`` of their median: a checkpoint, an evaluation or a
garbage collection now and then does not make a job unsteady, a warm-up or a change of pace
does. **Drift**: the steady median moved from the one recorded at the last capture by more than
``drift_pct`` of it (either way: faster is news too). Both compare the job's own step time,
measured without the profiler.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AutoPolicy:
    """The ``--auto`` settings (the CLI's defaults)."""

    window: int = 50  # steps judged for steadiness (at most 256: what the job publishes)
    tolerance_pct: float = 5.0  # a step within this much of the window's median is steady
    share: float = 0.9  # steady when this share of the window's steps is
    every_s: float | None = 1800.0  # capture again this long after the last capture (None: no)
    drift_pct: float | None = 10.0  # capture again when the steady median moved this much
    max_captures: int = 20
    max_bytes: int = 2 << 30  # the disk budget of captures/ (every capture, manual ones too)


@dataclass(frozen=True, slots=True)
class Pace:
    """The job's recent step time."""

    steps: int  # steps the job has made
    median_s: float | None  # over the window, None while the window is not full
    steady: bool
    within_pct: float | None  # share of the window within the tolerance, percent


@dataclass(frozen=True, slots=True)
class Last:
    """The previous automatic capture, as the policy needs it."""

    at_s: float  # time.monotonic() when it was asked for
    median_s: float | None  # the job's steady median step time then


def pace(step_s: Sequence[float | None], steps: int, policy: AutoPolicy) -> Pace:
    """How steady the last ``policy.window`` steps are."""
    window = list(step_s[-policy.window:])
    if len(window) < policy.window or any(d is None for d in window):
        return Pace(steps, None, False, None)
    durations = [float(d) for d in window if d is not None]
    median_s = statistics.median(durations)
    if median_s <= 0:
        return Pace(steps, None, False, None)
    near = sum(abs(d - median_s) <= median_s * policy.tolerance_pct / 100 for d in durations)
    share = near / len(durations)
    return Pace(steps, median_s, share >= policy.share, round(100 * share, 1))


def decide(now: Pace, last: Last | None, captures: int, used_bytes: int, now_s: float,
           policy: AutoPolicy) -> str | None:
    """The reason to capture now (``steady``, ``every``, ``drift``), or None."""
    if captures >= policy.max_captures or used_bytes >= policy.max_bytes:
        return None
    if last is None:
        return "steady" if now.steady else None
    if policy.every_s is not None and now_s - last.at_s >= policy.every_s:
        return "every"
    if (now.steady and policy.drift_pct is not None and last.median_s and now.median_s
            and abs(now.median_s - last.median_s) > last.median_s * policy.drift_pct / 100):
        return "drift"
    return None


def held_back(captures: int, used_bytes: int, policy: AutoPolicy) -> str | None:
    """Why ``--auto`` captures no more, once it does not (said once in the manifest)."""
    if captures >= policy.max_captures:
        return f"--max-captures {policy.max_captures} reached"
    if used_bytes >= policy.max_bytes:
        return (f"the captures use {used_bytes / 2**20:.0f} MiB, the disk budget "
                f"(--max-capture-mb) is {policy.max_bytes / 2**20:.0f} MiB")
    return None
