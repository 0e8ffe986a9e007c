"""One rank's compact summary: what the job reduce needs of it, and nothing of its events.

Input: one rank's :class:`~rightsize.analyzers.analysis.RankAnalysis` (its trace, steps,
primary device and diagnosis). Output: a :class:`RankSummary`: the rank's identity (rank, world
size, backend, process groups, host pid, device), per-step rows (start, duration and the
diagnosis' exclusive shares), per-call rows (``collectives.CALLS``) and per-kernel-class rows.
A summary is a few kB for a step of hundreds of collectives, pickles, and its frames are Arrow
tables: a worker process (or a cluster node) makes it from one trace and the driver reduces the
summaries of all ranks (``job.job``) without ever holding two traces. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from rightsize.analyzers.job import collectives

if TYPE_CHECKING:
    from rightsize.analyzers.analysis import RankAnalysis

STEPS: dict[str, pl.DataType] = {
    "step": pl.Int64(),  # N of ProfilerStep#N, else its position
    "start_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    # the diagnosis' exclusive shares of the step (ms; null without a diagnosis)
    "compute_ms": pl.Float64(), "memory_ms": pl.Float64(), "pcie_ms": pl.Float64(),
    "dataloader_ms": pl.Float64(), "communication_ms": pl.Float64(), "host_ms": pl.Float64(),
    "idle_ms": pl.Float64(),
}
SHARES = ("compute", "memory", "pcie", "dataloader", "communication", "host", "idle")


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One rank of a job, as the reduce sees it."""

    path: str
    rank: int | None
    world_size: int | None
    backend: str | None
    pid: str | None  # the host process that recorded the steps (None: no host events)
    hostname: str | None  # where the trace records one (a run directory's manifest)
    device: int | None  # the primary device's index on its host
    device_name: str | None
    visible_gpus: int  # GPUs the trace lists (deviceProperties)
    process_groups: tuple[tuple[str, tuple[int, ...]], ...]  # (name, member ranks) recorded
    steps: pl.DataFrame  # STEPS
    calls: pl.DataFrame  # collectives.CALLS
    kernel_ms: Mapping[str, float] = field(default_factory=dict)  # class -> ms over the steps

    @property
    def step_ms_mean(self) -> float | None:
        return float(self.steps["dur_ns"].mean()) / 1e6 if self.steps.height else None  # type: ignore[arg-type]


def summarize(rank: RankAnalysis, hostname: str | None = None) -> RankSummary:
    """The summary of one analyzed rank."""
    trace = rank.trace
    return RankSummary(
        path=trace.meta.path, rank=trace.meta.rank, world_size=trace.meta.world_size,
        backend=trace.meta.backend, pid=_pid(rank),
        hostname=hostname or _text(trace.meta.profiler.get("hostname")),
        device=rank.primary_device, device_name=_device_name(rank),
        visible_gpus=trace.devices.height,
        process_groups=_process_groups(trace.meta.profiler.get("pg_config")),
        steps=_steps(rank),
        calls=collectives.calls(trace, rank.steps, rank.primary_device),
        kernel_ms=_kernel_ms(rank),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _pid(rank: RankAnalysis) -> str | None:
    for df in (rank.trace.steps, rank.trace.cpu_ops):
        if df.height and df["pid"].null_count() < df.height:
            return str(df["pid"].drop_nulls().mode().sort()[0])
    return None


def _device_name(rank: RankAnalysis) -> str | None:
    if rank.primary_device is None:
        return None
    row = rank.trace.devices.filter(pl.col("device") == rank.primary_device)
    return row["name"][0] if row.height else None


def _steps(rank: RankAnalysis) -> pl.DataFrame:
    s = rank.steps
    if not s.count:
        return pl.DataFrame(schema=STEPS)
    numbers = [_step_number(n, i) for i, n in enumerate(s.names)]
    rows: dict[str, Any] = {"step": numbers, "start_ns": s.start_ns, "dur_ns": s.dur_ns}
    per_step = rank.diagnosis.per_step if rank.diagnosis is not None else ()
    for share in SHARES:
        rows[f"{share}_ms"] = [p.shares_ms.get(share) for p in per_step] \
            if len(per_step) == s.count else [None] * s.count
    return pl.DataFrame(rows, schema=STEPS)


def _step_number(name: str, index: int) -> int:
    tail = name.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else index


def _kernel_ms(rank: RankAnalysis) -> dict[str, float]:
    """Kernel time of the primary device by class (compute / memory / communication)."""
    work = rank.work
    if work is None or not work.height or "work" not in work.columns:
        return {}
    by = work.group_by("work").agg(pl.col("dur_ns").sum()).drop_nulls("work")
    return {str(k): float(v) / 1e6 for k, v in by.iter_rows()}


def _process_groups(config: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """distributedInfo.pg_config as (name, ranks) pairs, where the trace records it."""
    if not isinstance(config, list):
        return ()
    out = []
    for pg in config:
        if not isinstance(pg, dict) or not isinstance(pg.get("ranks"), list):
            continue
        ranks = tuple(r for r in pg["ranks"] if isinstance(r, int) and not isinstance(r, bool))
        out.append((str(pg.get("pg_name", "")), ranks))
    return tuple(out)
