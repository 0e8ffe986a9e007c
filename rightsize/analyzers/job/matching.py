"""Collective calls matched across ranks: who arrived when, the wait and the transfer.

Input: the ranks' summaries (``summary.RankSummary``). Output: :class:`Matched`: one row per
(call, rank) with the rank's arrival and its wait, and one row per call with its arrivals'
spread, the last rank, the transfer time and the achieved bandwidths.

A call is keyed by its process group and sequence number where the trace records both (newer
torch: the ``Seq`` arg), by its process group and order where only the group is recorded, and
by its stream and order on that stream otherwise (traces without collective args: the DLRM
ranks). On one clock the ranks of a call end together; each one's kernel starts when it
arrives. So per call: ``wait`` of a rank = last arrival - its arrival; ``transfer`` = the
shortest kernel (the last rank's, which waited for nobody); ``late`` = last arrival - the
second-last one (what the last rank alone cost the call). A call whose ranks did not end
together (``consistent`` false: :data:`END_TOLERANCE_NS`) or disagree on its type is kept for
the totals but names no straggler. Bandwidths follow nccl-tests
(``names``): algbw = size / transfer, busbw = algbw x the collective's factor for the group's
size. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from rightsize.analyzers.job import names
from rightsize.analyzers.job.summary import RankSummary

# The ranks of a call end together on one clock (the DLRM ranks: within 7 us); ends further
# apart than this, and than half the transfer, mean the call did not finish as one (a send/
# receive pattern, clocks apart, calls matched wrongly): its arrivals say not who was waited for.
END_TOLERANCE_NS = 50_000
END_TOLERANCE_OF_TRANSFER = 0.5

BY_SEQ = "process group + sequence number"
BY_PG_ORDER = "process group + order"
BY_STREAM_ORDER = "order per stream"


@dataclass(frozen=True, slots=True)
class Matched:
    # one per (call, rank): key, rank, arrival_ns, dur_ns, lead-in and wait_ns (null where the
    # call is not consistent)
    rows: pl.DataFrame
    calls: pl.DataFrame  # one per call (see :func:`match`)
    matched_by: tuple[str, ...]  # the keys used, of BY_SEQ, BY_PG_ORDER, BY_STREAM_ORDER


def match(summaries: Sequence[RankSummary]) -> Matched:
    """Every collective call of the ranks, keyed and matched (see the module docstring)."""
    frames = [s.calls.with_columns(rank=pl.lit(s.rank, pl.Int64),
                                   world=pl.lit(s.world_size, pl.Int64))
              for s in summaries if s.calls.height]
    if not frames:
        empty = pl.DataFrame(schema={"key": pl.String(), "rank": pl.Int64()})
        return Matched(empty, empty, ())
    rows = pl.concat(frames, how="vertical")
    group = pl.coalesce(pl.lit("pg ") + pl.col("pg"), pl.lit("stream ") + pl.col("stream").cast(
        pl.String))
    order = pl.int_range(pl.len()).over("rank", "group")
    rows = rows.with_columns(group=group).with_columns(
        index=pl.coalesce(pl.col("seq"), order),
        by=pl.when(pl.col("seq").is_not_null()).then(pl.lit(BY_SEQ))
        .when(pl.col("pg").is_not_null()).then(pl.lit(BY_PG_ORDER))
        .otherwise(pl.lit(BY_STREAM_ORDER)))
    rows = rows.with_columns(key=pl.col("group") + pl.lit(" #") + pl.col("index").cast(pl.String),
                             end_ns=pl.col("arrival_ns") + pl.col("dur_ns"))
    calls = _per_call(rows)
    rows = rows.join(calls.select("key", "last_arrival_ns", "consistent"), on="key",
                     how="left") \
        .with_columns(wait_ns=pl.when(pl.col("consistent"))
                      .then(pl.col("last_arrival_ns") - pl.col("arrival_ns"))) \
        .drop("last_arrival_ns", "consistent")
    used = tuple(b for b in (BY_SEQ, BY_PG_ORDER, BY_STREAM_ORDER) if b in set(rows["by"]))
    return Matched(rows.sort("arrival_ns", "rank"), calls, used)


def _per_call(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per call key: arrivals, last rank, transfer, type, size and bandwidths."""
    ranked = rows.sort("arrival_ns", "rank", descending=[True, False])  # the last rank first
    calls = ranked.group_by("key").agg(
        n=pl.len(),
        group=pl.col("group").first(),
        first_ns=pl.col("arrival_ns").min(),
        last_arrival_ns=pl.col("arrival_ns").first(),
        second_ns=pl.col("arrival_ns").slice(1, 1).first(),
        last_rank=pl.col("rank").first(),
        transfer_ns=pl.col("dur_ns").min(),
        end_spread_ns=pl.col("end_ns").max() - pl.col("end_ns").min(),
        collective=pl.col("collective").mode().sort().first(),
        kinds=pl.col("collective").n_unique(),
        bytes=pl.col("bytes").max(),
        group_size=pl.coalesce(
            pl.col("group_size").max(),
            pl.col("pg_ranks").drop_nulls().first().str.count_matches(r"-?\d+").cast(pl.Int64),
            pl.col("world").max()),
        step=pl.col("step").mode().sort().first(),
        wait_total_ns=(pl.col("arrival_ns").max() - pl.col("arrival_ns")).sum(),
    ).with_columns(
        late_ns=(pl.col("last_arrival_ns") - pl.col("second_ns")).fill_null(0),
        skew_ns=pl.col("last_arrival_ns") - pl.col("first_ns"),
        algbw_gbs=pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns")),
        consistent=(pl.col("kinds") == 1) & (pl.col("end_spread_ns") <= pl.max_horizontal(
            pl.lit(END_TOLERANCE_NS), pl.col("transfer_ns") * END_TOLERANCE_OF_TRANSFER)),
    )
    pairs = calls.select("collective", "group_size").unique()
    factors = pairs.with_columns(factor=pl.Series(
        [names.bus_factor(k, n) if n is not None else None
         for k, n in pairs.iter_rows()], dtype=pl.Float64))
    return calls.join(factors, on=["collective", "group_size"], how="left", nulls_equal=True) \
        .with_columns(busbw_gbs=pl.col("algbw_gbs") * pl.col("factor")).sort("first_ns", "key")
