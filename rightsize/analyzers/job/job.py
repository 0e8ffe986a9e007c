"""The reduce: the summaries of a job's ranks -> the document's ``job`` section.

Input: one :class:`~rightsize.analyzers.job.summary.RankSummary` per rank (made where each trace
was read) and the GPU catalog. Output: a :class:`~rightsize.analyzers.document.job.Job`: the
ranks and where they ran, each rank's steps, the collectives matched across ranks (arrivals,
waits, transfers, nccl-tests bandwidths against the link's peak), exposed communication and
overlap per collective type, the stragglers and what the job costs (ranks x price). Reads
summaries only, never a trace. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import mean

import polars as pl

from rightsize.analyzers.document.job import (
    CollectiveCall,
    CollectiveType,
    Job,
    JobCost,
    JobRank,
)
from rightsize.analyzers.job import fabric as fab
from rightsize.analyzers.job import fabric_check, matching
from rightsize.analyzers.job.stragglers import THRESHOLDS, stragglers
from rightsize.analyzers.job.summary import SHARES, RankSummary
from rightsize.analyzers.sizing.comm import CommModel, Layout, layout_for
from rightsize.catalog import Catalog, Gpu
from rightsize.errors import RightsizeError

CALLS_SHOWN = 200  # calls listed one by one in the document (the aggregates use all)


class JobError(RightsizeError):
    """Summaries that are not the ranks of one job."""


def check_job(summaries: Sequence[RankSummary]) -> None:
    """Refuse summaries that do not say they are ranks of one job (one line: the mismatch):
    distributedInfo with one world size and backend, distinct ranks, and a process group two
    ranks record (by name, with members in common) recorded alike."""
    first = summaries[0]
    seen: dict[int, str] = {}
    groups: dict[str, tuple[tuple[int, ...], str]] = {}
    for s in summaries:
        name = s.path.rsplit("/", 1)[-1]
        if s.rank is None or s.world_size is None:
            raise JobError(f"{name} carries no distributedInfo (rank, world size): it cannot be "
                           "placed in a job")
        if (s.world_size, s.backend) != (first.world_size, first.backend):
            raise JobError(f"{name} is of world size/backend {s.world_size}/{s.backend}, "
                           f"not {first.world_size}/{first.backend}: not ranks of one job")
        if s.rank in seen:
            raise JobError(f"{seen[s.rank]} and {name} are both rank {s.rank}")
        seen[s.rank] = name
        for pg, ranks in s.process_groups:
            known = groups.get(pg)
            if known is not None and set(known[0]) & set(ranks) and known[0] != ranks:
                raise JobError(f"{known[1]} and {name} record process group {pg!r} with "
                               f"different ranks ({list(known[0])} vs {list(ranks)})")
            groups.setdefault(pg, (ranks, name))


def job_of(summaries: Sequence[RankSummary], catalog: Catalog | None = None,
           provider: str | None = None, comm_model: CommModel | None = None) -> Job | None:
    """The job of ``summaries`` (None for fewer than two ranks)."""
    ranked = sorted((s for s in summaries if s.rank is not None), key=lambda s: s.rank or 0)
    if len(ranked) < 2:
        return None
    check_job(ranked)
    world = ranked[0].world_size
    notes: list[str] = []
    if world is not None and len(ranked) < world:
        notes.append(f"{len(ranked)} of {world} ranks' traces: arrivals, waits and stragglers "
                     "are among these ranks only")
    gpu = _gpu(ranked, catalog)
    nodes, per_node, basis, where = _nodes(ranked, world)
    fabric = fab.fabric_of(gpu, world or len(ranked), nodes)
    matched = matching.match(ranked)
    steps: dict[int | None, int] = {s.rank: s.steps.height for s in ranked}
    step_means = [m for m in (s.step_ms_mean for s in ranked) if m is not None]
    job_step = mean(step_means) if step_means else None
    notes += _call_notes(matched)
    layout = _layout(gpu, world or len(ranked), per_node)
    checks = fabric_check.checks(matched.calls, layout, world or len(ranked), comm_model)
    notes += fabric_check.slow_words(checks)
    per_rank = _per_rank(ranked, matched, where, steps)
    comm, wait, exposed = (_mean_of(per_rank, a) for a in
                           ("wait_plus_transfer", "wait_ms_per_step", "exposed_ms_per_step"))
    return Job(
        world_size=world, rank_count=len(ranked), backend=ranked[0].backend, nodes=nodes,
        gpus_per_node=per_node, nodes_basis=basis,
        device=gpu.name if gpu is not None else ranked[0].device_name, fabric=fabric.words,
        step_ms_mean=job_step,
        step_ms_spread=max(step_means) - min(step_means) if step_means else None,
        matched_by=matched.matched_by, calls_total=matched.calls.height,
        communication_ms_per_step=comm, wait_ms_per_step=wait, exposed_ms_per_step=exposed,
        overlap_pct=100.0 * (1 - exposed / comm) if comm and exposed is not None else None,
        ranks=tuple(r for r, _ in per_rank),
        stragglers=stragglers(matched, steps, job_step, THRESHOLDS,
                              {s.rank: s.steps["start_ns"].to_list() for s in ranked}),
        collectives=_by_type(matched, steps, len(ranked), fabric, layout, comm_model),
        calls=_calls(matched), collective_checks=checks,
        cost=_cost(gpu, world or len(ranked), job_step, catalog, provider),
        notes=tuple(notes),
    )


def _gpu(ranked: Sequence[RankSummary], catalog: Catalog | None) -> Gpu | None:
    name = Counter(s.device_name for s in ranked if s.device_name).most_common(1)
    if catalog is None or not name:
        return None
    match = catalog.match(name[0][0])
    return match.gpu


def _nodes(ranked: Sequence[RankSummary], world: int | None
           ) -> tuple[int | None, int | None, str, dict[int, str]]:
    """(nodes, GPUs per node, how that is known, rank -> node label)."""
    hosts = {s.rank: s.hostname for s in ranked if s.rank is not None}
    if all(hosts.values()):
        by = Counter(hosts.values())
        return (len(by), max(by.values()), "hostnames recorded",
                {r: str(h) for r, h in hosts.items()})
    if world is not None and len(ranked) < world:
        return None, None, (f"unknown: only {len(ranked)} of {world} ranks' traces, and they "
                            "record no hostname"), {}
    devices = [s.device for s in ranked]
    if any(d is None for d in devices):
        return None, None, "unknown: a rank has no GPU in its trace, and none records a host", {}
    uses = Counter(devices)
    pid_uses = Counter(s.pid for s in ranked if s.pid is not None)
    visible = min(s.visible_gpus for s in ranked)
    m = max(uses.values())
    if len(set(uses.values())) != 1 or max(pid_uses.values(), default=1) > m:
        return None, None, ("unknown: the ranks' device indices do not split into equal nodes "
                            f"({dict(sorted(uses.items()))}) and no hostname is recorded"), {}
    per_node = len(uses)
    if visible and per_node > visible:
        return None, None, "unknown: ranks use more device indices than a trace lists GPUs", {}
    order = sorted(ranked, key=lambda s: s.rank or 0)
    seen: Counter[int | None] = Counter()
    where = {}
    for s in order:  # the k-th rank on a device index is on node k (ranks fill nodes in order)
        where[s.rank or 0] = f"node {seen[s.device]}"
        seen[s.device] += 1
    basis = (f"inferred: {len(ranked)} ranks on {per_node} distinct device indices "
             f"({'each used once' if m == 1 else f'each used by {m} ranks'}), "
             f"{visible or 'unknown'} GPUs visible per trace, distinct host pids; no hostname "
             "recorded")
    return m, per_node, basis, where


def _call_notes(matched: matching.Matched) -> list[str]:
    calls = matched.calls
    if calls.height == 0:
        return ["no collective kernels (NCCL/RCCL) in the ranks' traces: nothing to match"]
    out = []
    apart = calls.filter(~pl.col("consistent"))
    if apart.height:
        out.append(f"{apart.height} of {calls.height} calls did not end together on all ranks "
                   f"(ends up to {int(apart['end_spread_ns'].max()) / 1e6:.3g} ms apart: "  # type: ignore[arg-type]
                   "send/receive patterns, clocks apart or calls matched wrongly): they count "
                   "in the totals but name no straggler")
    odd = calls.filter(pl.col("n") < pl.col("n").max())
    if odd.height:
        out.append(f"{odd.height} of {calls.height} calls were not found on every rank "
                   "(matched by order: a rank recorded fewer collectives)")
    mixed = calls.filter(pl.col("kinds") > 1)
    if mixed.height:
        out.append(f"{mixed.height} matched calls disagree on their collective type across "
                   "ranks: matching by order may be off")
    return out


def _per_rank(ranked: Sequence[RankSummary], matched: matching.Matched, where: dict[int, str],
              steps: dict[int | None, int]) -> list[tuple[JobRank, float | None]]:
    rows = matched.rows
    last = Counter(matched.calls.filter((pl.col("late_ns") >= THRESHOLDS.tie_ns)
                                        & pl.col("consistent"))["last_rank"].to_list()) \
        if matched.calls.height else Counter()
    out = []
    for s in ranked:
        n = max(steps.get(s.rank, 0), 1)
        mine = rows.filter(pl.col("rank") == s.rank) if rows.height else rows
        total = float(mine["dur_ns"].sum()) / n / 1e6 if mine.height else None
        wait = float(mine["wait_ns"].sum()) / n / 1e6 if mine.height else None
        exposed = float(mine["exposed_ns"].sum()) / n / 1e6 if mine.height else None
        shares = {k: _col_mean(s.steps, f"{k}_ms") for k in SHARES}
        out.append((JobRank(
            rank=s.rank, path=s.path, node=where.get(s.rank or 0), pid=s.pid, device=s.device,
            steps=s.steps.height, step_ms_mean=s.step_ms_mean,
            step_ms=tuple(float(v) / 1e6 for v in s.steps["dur_ns"].to_list()),
            shares_ms=shares, wait_ms_per_step=wait,
            transfer_ms_per_step=None if total is None or wait is None else total - wait,
            exposed_ms_per_step=exposed, last_calls=last.get(s.rank, 0)), total))
    return out


def _col_mean(df: pl.DataFrame, col: str) -> float | None:
    value = df[col].mean() if df.height and df[col].null_count() < df.height else None
    return float(value) if isinstance(value, int | float) else None


def _mean_of(per_rank: list[tuple[JobRank, float | None]], attr: str) -> float | None:
    values = [t if attr == "wait_plus_transfer" else getattr(r, attr) for r, t in per_rank]
    got = [v for v in values if v is not None]
    return mean(got) if got else None


def _layout(gpu: Gpu | None, ranks: int, per_node: int | None) -> Layout | None:
    """The job's ranks as the communication model sees them: ``per_node`` to a node where the
    traces say, else as full as the GPU's node allows; the network between nodes is the GPU's
    reference system's (the traces do not record it)."""
    return layout_for(gpu, ranks, per_node) if gpu is not None else None


def _by_type(matched: matching.Matched, steps: dict[int | None, int], n_ranks: int,
             fabric: fab.Fabric, layout: Layout | None = None,
             model: CommModel | None = None) -> tuple[CollectiveType, ...]:
    calls, rows = matched.calls, matched.rows
    if calls.height == 0:
        return ()
    per_step = float(mean(max(v, 1) for v in steps.values()))
    latency = fabric_check.latency_us(calls)
    out = []
    for kind in sorted(set(calls["collective"].to_list())):
        c = calls.filter(pl.col("collective") == kind)
        r = rows.filter(pl.col("key").is_in(c["key"].implode()))
        time = float(r["dur_ns"].sum()) / n_ranks / per_step / 1e6
        wait = float(r["wait_ns"].sum()) / n_ranks / per_step / 1e6
        exposed = float(r["exposed_ns"].sum()) / n_ranks / per_step / 1e6
        sized = c.filter(pl.col("bytes").is_not_null() & (pl.col("transfer_ns") > 0))
        algbw = float(sized["bytes"].sum()) / float(sized["transfer_ns"].sum()) \
            if sized.height else None
        factor = sized["factor"].drop_nulls()
        busbw = algbw * float(factor.mean()) if algbw is not None and factor.len() else None  # type: ignore[arg-type]
        out.append(CollectiveType(
            collective=kind, calls=c.height,
            group_size=int(c["group_size"].max()) if c["group_size"].null_count() < c.height  # type: ignore[arg-type]
            else None,
            bytes_per_call=float(sized["bytes"].mean()) if sized.height else None,  # type: ignore[arg-type]
            time_ms_per_step=time, wait_ms_per_step=wait,
            transfer_ms_per_step=float(c["transfer_ns"].sum()) / per_step / 1e6,
            exposed_ms_per_step=exposed,
            overlap_pct=100.0 * (1 - exposed / time) if time > 0 else None,
            algbw_gbs=algbw, busbw_gbs=busbw, link_peak_gbs=fabric.peak_gbs,
            busbw_pct_of_peak=100.0 * busbw / fabric.peak_gbs
            if busbw is not None and fabric.peak_gbs else None,
            model_transfer_ms_per_step=fabric_check.expected_ms(c, layout, n_ranks, per_step,
                                                                model, latency)))
    return tuple(out)


def _calls(matched: matching.Matched) -> tuple[CollectiveCall, ...]:
    calls = matched.calls.head(CALLS_SHOWN)
    if calls.height == 0:
        return ()
    rows = matched.rows.filter(pl.col("key").is_in(calls["key"].implode())).sort("rank")
    by_key: dict[str, list[tuple[int, int]]] = {}
    for key, rank, arrival in rows.select("key", "rank", "arrival_ns").iter_rows():
        by_key.setdefault(key, []).append((rank, arrival))
    out = []
    for c in calls.iter_rows(named=True):
        members = by_key.get(c["key"], [])
        tie = c["late_ns"] < THRESHOLDS.tie_ns or not c["consistent"]
        out.append(CollectiveCall(
            key=c["key"], collective=c["collective"], step=c["step"],
            ranks=tuple(r for r, _ in members),
            arrival_ms=tuple((a - c["first_ns"]) / 1e6 for _, a in members),
            last_rank=None if tie else c["last_rank"], late_ms=c["late_ns"] / 1e6,
            skew_ms=c["skew_ns"] / 1e6, transfer_ms=c["transfer_ns"] / 1e6,
            wait_ms_mean=c["wait_total_ns"] / c["n"] / 1e6, bytes=c["bytes"],
            algbw_gbs=c["algbw_gbs"], busbw_gbs=c["busbw_gbs"]))
    return tuple(out)


def _cost(gpu: Gpu | None, gpus: int, step_ms: float | None, catalog: Catalog | None,
          provider: str | None) -> JobCost | None:
    """All the job's GPUs at the catalog's price (ranks x price per GPU-hour)."""
    if gpu is None or catalog is None:
        return None
    price = catalog.price(gpu.name, provider)
    if price is None:
        return None
    per_hour = price.usd_per_gpu_hour * gpus
    per_step = per_hour * step_ms / 3.6e6 if step_ms is not None else None
    return JobCost(gpu=gpu.name, gpus=gpus, usd_per_gpu_hour=price.usd_per_gpu_hour,
                   usd_per_hour=per_hour, usd_per_step=per_step,
                   usd_per_1k_steps=per_step * 1000 if per_step is not None else None,
                   price_provider=price.provider, price_date_seen=price.date_seen)
