"""A fleet scan: paths -> jobs -> rows in the fleet table, only for what the table lacks.

Input: paths and globs (object-store URLs too, :mod:`.remote`), a
:class:`~rightsize.fleet.table.FleetTable`, :class:`ScanOptions`.
Output: :class:`ScanSummary`; the rows are in the table. Steps, under the table's writer lock:
find the jobs (:mod:`.discover`), key them by content (:mod:`.keys`, reading only files that
changed since the last scan), leave out keys the table holds, analyze the rest on the engine
(:mod:`rightsize.engine`, local processes or Ray) and append their rows in batches as results
arrive, each batch whole or absent. A job whose analysis raised or whose worker died is a row
too (``failed``, with the error in one line); a scan is never stopped by one input.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rightsize.engine import EngineOptions, Failed, map_unordered
from rightsize.fleet import labels as lab
from rightsize.fleet.analyze import Result, Task, analyze_job, base_row, one_line
from rightsize.fleet.discover import Job, group, group_files, walk
from rightsize.fleet.keys import Digests, FileCache, job_key
from rightsize.fleet.remote import RemoteJob, is_url
from rightsize.fleet.schema import STATUS_BAD_INPUT, STATUS_FAILED, STATUS_OK
from rightsize.fleet.table import FleetTable


@dataclass(frozen=True, slots=True)
class ScanOptions:
    engine: EngineOptions = field(default_factory=EngineOptions)
    rules: tuple[lab.Rule, ...] = ()
    retry_failed: bool = False  # analyze again the jobs whose row says ``failed``
    batch_rows: int = 64  # rows written together at most...
    batch_s: float = 2.0  # ...or after this long, whichever comes first
    max_download_bytes: int = 4096 * 1024 * 1024  # an object-store job's files, in a worker


@dataclass(frozen=True, slots=True)
class Progress:
    phase: str  # "finding" | "analyzing"
    done: int
    total: int
    bad: int
    elapsed_s: float

    @property
    def rate_per_s(self) -> float | None:
        return self.done / self.elapsed_s if self.done and self.elapsed_s > 0 else None

    @property
    def eta_s(self) -> float | None:
        rate = self.rate_per_s
        return (self.total - self.done) / rate if rate else None


@dataclass(slots=True)
class ScanSummary:
    jobs: int = 0  # jobs found
    known: int = 0  # already in the table: not analyzed again
    analyzed: int = 0
    ok: int = 0
    bad_input: int = 0
    failed: int = 0
    not_inputs: int = 0  # files under folders that are not inputs
    left_out: dict[str, int] = field(default_factory=dict)  # by why (discover.LEFT_OUT)
    files_read: int = 0  # files whose bytes were read to key them (the rest: cache)
    seconds: float = 0.0
    rows_written: int = 0
    first_errors: list[str] = field(default_factory=list)


def plan(table: FleetTable, paths: Sequence[str], options: ScanOptions,
         summary: ScanSummary, scanned_at: datetime) -> list[Task]:
    """The jobs under ``paths`` that the table lacks, as tasks (keys read, cache saved)."""
    cache = FileCache(table.root / "cache" / "files.parquet")
    urls = [p for p in paths if is_url(p)]
    runs, files, left_out = walk([p for p in paths if not is_url(p)])
    summary.not_inputs, summary.left_out = sum(left_out.values()), dict(left_out)
    jobs: list[tuple[Job, Digests, RemoteJob | None]] = [
        (job, cache, None) for job in group(runs, files, cache.probe)]
    remote_read = 0
    if urls:
        from rightsize.fleet import remote

        listed = remote.listing(urls)
        summary.not_inputs += listed.not_inputs
        if listed.not_inputs:
            summary.left_out["name"] = summary.left_out.get("name", 0) + listed.not_inputs
        every = [*listed.files, *(f for _, run_files in listed.runs for f in run_files)]
        store = remote.RemoteFiles(every, cache)
        remote_jobs = [remote.run_job(url, run_files) for url, run_files in listed.runs]
        remote_jobs += group_files([f.url for f in listed.files], store.probe)
        jobs += [(job, store, remote.remote_job(job, store.files, options.max_download_bytes))
                 for job in remote_jobs]
    known = table.known()
    tasks: list[Task] = []
    seen: set[str] = set()
    for job, digests, where in jobs:
        key = job_key(job, digests)
        if key in seen:
            continue  # the same content reached twice (a copy, a link): one job
        seen.add(key)
        status = known.get(key)
        if status is not None and not (options.retry_failed and status == STATUS_FAILED):
            summary.known += 1
            continue
        tasks.append(_task(key, job, options.rules, scanned_at, where))
    if urls:
        remote_read = store.read
    summary.jobs = len(seen)
    summary.files_read = cache.read + remote_read
    cache.save()
    return tasks


def _task(key: str, job: Job, rules: tuple[lab.Rule, ...], scanned_at: datetime,
          where: RemoteJob | None) -> Task:
    found = lab.match(job.paths[0], rules)
    if found is None:
        return Task(key, job, scanned_at=scanned_at, remote=where)
    return Task(key, job, found.team, found.project, found.source, scanned_at, where)


def scan(table: FleetTable, paths: Sequence[str], options: ScanOptions = ScanOptions(),
         progress: Callable[[Progress], None] | None = None) -> ScanSummary:
    start = time.monotonic()
    summary = ScanSummary()
    scanned_at = datetime.now(UTC)
    with table.writer():
        if progress:
            progress(Progress("finding", 0, 0, 0, 0.0))
        tasks = plan(table, paths, options, summary, scanned_at)
        pending: list[dict[str, Any]] = []
        last_flush = time.monotonic()
        analysis_start = time.monotonic()

        def flush() -> None:
            nonlocal pending, last_flush
            table.append(pending)
            summary.rows_written += len(pending)
            pending, last_flush = [], time.monotonic()

        try:
            for i, res in map_unordered(analyze_job, tasks, options.engine):
                row = _row(table, tasks[i], res)
                pending.append(row)
                _count(summary, row)
                if (len(pending) >= options.batch_rows
                        or time.monotonic() - last_flush >= options.batch_s):
                    flush()
                if progress:
                    progress(Progress("analyzing", summary.analyzed, len(tasks),
                                      summary.bad_input + summary.failed,
                                      time.monotonic() - analysis_start))
        except KeyboardInterrupt:
            flush()  # rows of finished jobs are whole: keep them, the rest is redone
            raise
        flush()
        table.compact()
    summary.seconds = time.monotonic() - start
    return summary


def _row(table: FleetTable, task: Task, res: Result | Failed) -> dict[str, Any]:
    if isinstance(res, Failed):
        return base_row(task, STATUS_FAILED, one_line(f"{res.error}: {res.message}"))
    row = res.row
    if res.document is not None:
        row["document"] = table.write_document(task.key, res.document)
    return row


def _count(summary: ScanSummary, row: dict[str, Any]) -> None:
    summary.analyzed += 1
    status = row["status"]
    if status == STATUS_OK:
        summary.ok += 1
        return
    if status == STATUS_BAD_INPUT:
        summary.bad_input += 1
    else:
        summary.failed += 1
    if len(summary.first_errors) < 5:
        where, reason = row["paths"][0], str(row["reason"])
        summary.first_errors.append(reason if where in reason else f"{where}: {reason}")
