"""Stragglers: the ranks the others wait for at the collectives, and what they did instead.

Input: the matched calls (``matching.Matched``) and the job's steps per rank. Output: the
:class:`~rightsize.analyzers.document.job.Straggler` nodes, the largest impact first.

A call's last rank is the one that arrived last by more than ``tie_ns``
(``thresholds.StragglerThresholds``); it alone made the call ``late`` (its arrival - the second-last's) longer. A rank is a straggler
when it is last at a clearly larger share of its calls than chance gives any rank
(``last_share_over_chance`` x 1/n for n ranks) or causes most of the job's lateness
(``dominant_late_share``), and the time it costs the job is not negligible
(``min_late_pct_of_step``). What it did instead: over the calls it was last at, its lead-in
(``collectives`` module: compute, copies, data loader, host, since the previous collective or
the step's start) minus the median lead-in of the other ranks of the same call; the part that
grew most is the cause. How much later than the median rank it started its steps is said too:
a delay that began before the profiled window shows there, not in any lead-in. Pure.
"""

from __future__ import annotations

import polars as pl

from rightsize.analyzers.document.job import Straggler
from rightsize.analyzers.job.collectives import LEAD_PARTS
from rightsize.analyzers.job.matching import Matched
from rightsize.analyzers.thresholds import STRAGGLERS as THRESHOLDS
from rightsize.analyzers.thresholds import StragglerThresholds

CAUSE_WORDS = {"compute": "GPU compute (kernels the others did not run as long)",
               "copy": "host-device copies", "dataloader": "its data loader (__next__ waits)",
               "host": "host work with its GPU idle (Python, launches, syncs)"}


def stragglers(matched: Matched, steps_per_rank: dict[int | None, int], step_ms: float | None,
               thresholds: StragglerThresholds = THRESHOLDS,
               step_starts: dict[int | None, list[int]] | None = None) -> tuple[Straggler, ...]:
    """The stragglers among the ranks of ``matched`` (see the module docstring);
    ``step_starts`` (each rank's step start times) says how late each began its steps."""
    calls = matched.calls
    if calls.height == 0 or "late_ns" not in calls.columns:
        return ()
    usable = calls.filter((pl.col("n") >= 2) & pl.col("consistent"))
    late = usable.filter(pl.col("late_ns") >= thresholds.tie_ns)
    rows = matched.rows.filter(pl.col("key").is_in(usable["key"].implode()))
    taken = rows.group_by("rank").agg(calls=pl.len())
    n_ranks = max(rows["rank"].n_unique(), 1)
    all_late = float(late["late_ns"].sum())
    out = []
    for rank, calls_in in taken.sort("rank").iter_rows():
        mine = late.filter(pl.col("last_rank") == rank)
        if mine.height < thresholds.min_last_calls:
            continue
        steps = max(steps_per_rank.get(rank, 1), 1)
        late_per_step = float(mine["late_ns"].sum()) / steps / 1e6
        pct = 100.0 * mine.height / calls_in
        dominant = float(mine["late_ns"].sum()) >= thresholds.dominant_late_share * all_late
        if pct < 100.0 * thresholds.last_share_over_chance / n_ranks and not dominant:
            continue
        if step_ms and 100.0 * late_per_step / step_ms < thresholds.min_late_pct_of_step:
            continue
        excess = _excess(rows, mine["key"], rank, steps)
        cause, cause_ms = _cause(excess, late_per_step, thresholds)
        by_type = _by_type(rows, mine, rank)
        started = _started_late_ms(step_starts or {}, rank)
        out.append(Straggler(
            rank=rank, last_calls=mine.height, calls=calls_in, last_pct=pct,
            late_ms_per_step=late_per_step, late_ms_mean=float(mine["late_ns"].mean()) / 1e6,  # type: ignore[arg-type]
            last_pct_by_type=by_type, cause=cause, cause_ms_per_step=cause_ms,
            excess_ms_per_step=excess, step_start_late_ms=started,
            text=_sentence(rank, pct, by_type, late_per_step, cause, cause_ms, started)))
    return tuple(sorted(out, key=lambda s: (-s.late_ms_per_step, s.rank)))


def _excess(rows: pl.DataFrame, keys: pl.Series, rank: int, steps: int) -> dict[str, float]:
    """Per lead-in part: the rank's time minus the median of the other ranks of each call,
    summed over ``keys`` and per step (ms)."""
    these = rows.filter(pl.col("key").is_in(keys.implode()))
    cols = [f"lead_{p}_ns" for p in LEAD_PARTS]
    others = these.filter(pl.col("rank") != rank).group_by("key").agg(
        [pl.col(c).median().alias(c) for c in cols])
    own = these.filter(pl.col("rank") == rank).select("key", *cols)
    diff = own.join(others, on="key", suffix="_median")
    return {p: float((diff[f"lead_{p}_ns"] - diff[f"lead_{p}_ns_median"]).sum()) / steps / 1e6
            for p in LEAD_PARTS}


def _started_late_ms(starts: dict[int | None, list[int]], rank: int) -> float | None:
    """How much later than the median rank ``rank`` started its steps (mean over the steps all
    ranks recorded, by position): a lateness that began before the profiled window."""
    mine = starts.get(rank)
    n = min((len(v) for v in starts.values()), default=0)
    if not mine or n == 0 or len(starts) < 2:
        return None
    diffs = []
    for i in range(n):
        others = sorted(v[i] for r, v in starts.items() if r != rank)
        mid = len(others) // 2
        median = others[mid] if len(others) % 2 else (others[mid - 1] + others[mid]) / 2
        diffs.append(mine[i] - median)
    return sum(diffs) / len(diffs) / 1e6


def _cause(excess: dict[str, float], late_ms: float,
           thresholds: StragglerThresholds) -> tuple[str, float | None]:
    part = max(excess, key=lambda p: excess[p])
    grew = excess[part]
    if grew <= 0 or grew < thresholds.min_explained * late_ms:
        return "unknown", None
    return part, grew


def _by_type(rows: pl.DataFrame, mine: pl.DataFrame, rank: int) -> dict[str, float]:
    took = rows.filter(pl.col("rank") == rank).group_by("collective").agg(n=pl.len())
    last = mine.group_by("collective").agg(k=pl.len())
    both = took.join(last, on="collective", how="left").fill_null(0).sort("collective")
    return {str(c): 100.0 * k / n for c, n, k in both.iter_rows() if n}


_TYPE_WORDS = {"allreduce": "all-reduces", "allgather": "all-gathers",
               "reducescatter": "reduce-scatters", "alltoall": "all-to-alls",
               "broadcast": "broadcasts", "reduce": "reduces", "sendrecv": "send/receives"}


def _sentence(rank: int, pct: float, by_type: dict[str, float], late_ms: float, cause: str,
              cause_ms: float | None, started_ms: float | None) -> str:
    worst = max(by_type.items(), key=lambda kv: (kv[1], kv[0]), default=None)
    kinds = f" ({worst[1]:.0f}% of {_TYPE_WORDS.get(worst[0], worst[0])})" \
        if worst is not None and len(by_type) > 1 else ""
    head = (f"rank {rank} arrives last at {pct:.0f}% of its collectives{kinds}, "
            f"{late_ms:.3g} ms per step after the others")
    if started_ms is not None and started_ms >= late_ms / 2:
        head += f"; its steps start {started_ms:.3g} ms after the median rank's"
    if cause == "unknown" or cause_ms is None:
        return head + "; its lead-in to those collectives was not longer than the others'"
    return head + f"; before them it spent {cause_ms:.3g} ms per step more than the median " \
                  f"rank on {CAUSE_WORDS[cause]}"
