"""The analyses: runs of the index handed to the engine's persistent workers, each within its
limits, and their outcome recorded.

Input: run ids (new uploads, and on start-up the runs a stopped server left queued or
running). Output: status changes in the index. The workers are the engine's
(:class:`rightsize.engine_pool.WorkerPool`): up to ``workers`` spawned processes that die with
the server, each under ``--worker-memory-mb``, recycled after ``TASKS_PER_WORKER`` runs. A
worker that dies (killed, out of memory, a crash) fails its own run with one line and only that
run. Each analysis runs under a deadline and a CPU-time limit (:func:`limits_for`:
``--max-analysis-s``, by default sized from the bytes the readers parse); a run past either
fails with that reason, a failure is final (never queued again at a restart), and a run whose
last upload is deleted while it is analyzed is cancelled (its worker stopped).

A finished run's row goes into the data directory's fleet table (:mod:`.fleet`) before the
index records the run as finished; after it, a run uploaded as a job's capture is checked
against the job's previous capture (:mod:`.following`, on a thread).

Start-up reconciles the index with the disk: a queued or running run whose ``analysis.json``
was written completely (a server killed after its worker finished) is adopted as done, not
analyzed again; the others are queued again. A run's result that cannot be recorded (the
index's disk is full) is retried until it can, so no run stays ``running`` for ever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rightsize.engine import Failed
from rightsize.engine_pool import CANCELLED, CPU_LIMIT, DIED, WALL_LIMIT, Limits, WorkerPool
from rightsize.serve.config import ServeConfig
from rightsize.serve.store import Index, Store, blob_path
from rightsize.serve.worker import (
    ANALYSIS_JSON,
    REPORT_HTML,
    TASKS_PER_WORKER,
    analyze_task,
    init_worker,
    summarize,
)
from rightsize.traces.limits import usable_cpus

if TYPE_CHECKING:
    from rightsize.serve.fleet import ServeFleet

log = logging.getLogger("rightsize.serve")
RECORD_RETRY_S = 2.0  # how often a result the index refused (disk full) is tried again
# The default time limit of an analysis: a floor for start-up and the report, then a rate far
# below what the readers manage (the 69.8 MB Kineto trace of the load test: about 10 s).
BASE_ANALYSIS_S = 60.0
ANALYSIS_S_PER_MB = 1.0
# Analyses run below the server's scheduling priority: on a machine with as many busy workers
# as cores, the event loop still gets a core when a request arrives (/healthz within 100 ms).
WORKER_NICE = 10


def limits_for(config: ServeConfig, input_bytes: int | None) -> Limits:
    """The run's deadline (``--max-analysis-s``, else sized from the bytes the readers parse)
    and its CPU limit (that deadline on every CPU the worker's threads may use)."""
    wall = config.max_analysis_s
    if wall is None:
        wall = BASE_ANALYSIS_S + ANALYSIS_S_PER_MB * (input_bytes or 0) / 1e6
    return Limits(wall_s=round(wall, 1), cpu_s=round(wall * usable_cpus(), 1))


def failure(out: Failed, limits: Limits, input_bytes: int | None, fixed: bool) -> str:
    """The one-line error of a run whose task did not return a summary (``fixed``: the limit
    is --max-analysis-s, not sized from the input)."""
    sized = "" if fixed or input_bytes is None else \
        f", sized from its {input_bytes / 1e6:,.1f} MB"
    if out.error == WALL_LIMIT:
        return (f"the analysis ran past its time limit of {limits.wall_s:g} s "
                f"(--max-analysis-s{sized})")
    if out.error == CPU_LIMIT:
        return (f"the analysis used more than its {limits.cpu_s:g} s of CPU time "
                f"(--max-analysis-s{sized})")
    if out.error == DIED:
        return (f"the analysis worker died ({out.message}: out of memory, or stopped); "
                "try a smaller capture or raise --worker-memory-mb")
    if out.error == CANCELLED:
        return "cancelled: the run was deleted while it was analyzed"
    return f"internal error: {out}"


def _write_if_there(store: Store, run_id: str, write: Callable[[str], object]) -> bool:
    """``write(run_id)`` unless the run was deleted meanwhile; whether it was written."""
    if store.run(run_id) is None:
        return False
    write(run_id)
    return True


class JobRunner:
    """Runs analyses on the engine's workers and records their outcome in the index."""

    def __init__(self, config: ServeConfig, index: Index, fleet: ServeFleet | None = None,
                 on_finished: Callable[[str], None] | None = None) -> None:
        self.config = config
        # called on a thread once a run's outcome is recorded (following.py: its job's checks)
        self.on_finished = on_finished
        self.index = index  # the store, called off the event loop
        self.store = index.store
        self.fleet = fleet  # each finished run's row goes there before the index says finished
        self.pool = WorkerPool(config.workers, memory_bytes=config.worker_memory_bytes,
                               tasks_per_worker=TASKS_PER_WORKER, initializer=init_worker,
                               env={"RIGHTSIZE_CACHE_DIR": str(config.cache_dir)},
                               nice=WORKER_NICE)
        # pool.run blocks: one thread per analysis in flight
        self._threads = ThreadPoolExecutor(max_workers=config.workers,
                                           thread_name_prefix="rightsize-analysis")
        self._tasks: set[asyncio.Task[None]] = set()
        # One slot per worker: a run is "running" exactly while it holds one, and only this
        # process writes the index (workers need no SQLite, even under a tight memory cap).
        self._slots = asyncio.Semaphore(config.workers)
        self._active: set[str] = set()  # runs holding a slot (event loop only)
        self._cancelled: set[str] = set()  # of those, the ones deleted

    # -- start-up --------------------------------------------------------------------------

    def resume(self) -> tuple[int, int]:
        """Adopt the finished runs a previous server did not record, queue the rest again;
        (adopted, queued). Failed runs stay failed (a run past its limits is not retried)."""
        adopted = queued = 0
        for run_id in self.store.active_ids():
            summary = self._finished_on_disk(run_id)
            if summary is not None:
                self.store.finish(run_id, summary)
                adopted += 1
                continue
            self.store.requeue(run_id)
            self.submit(run_id)
            queued += 1
        if adopted or queued:
            log.info("start-up: %d finished runs adopted, %d queued again", adopted, queued)
        return adopted, queued

    def _finished_on_disk(self, run_id: str) -> dict[str, Any] | None:
        folder = self.config.runs_dir / run_id
        for leftover in folder.glob(".*.tmp"):  # a write cut short: never a result
            leftover.unlink(missing_ok=True)
        if not (folder / REPORT_HTML).is_file():
            return None
        try:
            doc = json.loads((folder / ANALYSIS_JSON).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return summarize(doc) if isinstance(doc, dict) else None

    # -- runs ------------------------------------------------------------------------------

    def submit(self, run_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._run(run_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self, run_id: str) -> bool:
        """Stop the analysis of ``run_id`` now (its run was deleted), wherever it is: on a
        worker, waiting for one to start, or about to be handed to the pool; whether one was
        running. Called on the event loop."""
        if run_id not in self._active:
            return False
        self._cancelled.add(run_id)
        self.pool.cancel(run_id)
        return True

    async def _run(self, run_id: str) -> None:
        async with self._slots:
            self._active.add(run_id)
            try:
                await self._run_in_slot(run_id)
            finally:
                self._active.discard(run_id)
                self._cancelled.discard(run_id)

    async def _run_in_slot(self, run_id: str) -> None:
        run = await self.index(self.store.run, run_id)
        if run is None or not await self._write(run_id, "mark it running",
                                                self.store.mark_running):
            return  # deleted while queued
        try:
            summary = await self._analyze(run)
        except Exception as exc:
            log.error("run %s: internal error", run_id, exc_info=exc)
            summary = {"error": f"internal error: {type(exc).__name__}: {exc}"}
        if await self.index(self.store.run, run_id) is None:
            log.info("run %s: deleted while it was analyzed", run_id)
            # what the stopped worker may have written after the DELETE removed the folder
            await asyncio.get_running_loop().run_in_executor(
                None, shutil.rmtree, self.config.runs_dir / run_id, True)
            return
        finished = time.time()
        key = None
        if self.fleet is not None:
            key = await asyncio.get_running_loop().run_in_executor(
                None, self.fleet.add_finished,
                {**run, "finished_at": finished, "analysis_s": summary.get("analysis_s"),
                 "recorded_at": summary.get("recorded_at")},
                summary)
        await self._write(run_id, "record its result",
                          lambda i: self.store.finish(i, summary, key, finished))
        log.info("run %s: %s", run_id, summary.get("error") or "done")
        if self.on_finished is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._followed, run_id)

    def _followed(self, run_id: str) -> None:
        assert self.on_finished is not None
        try:
            self.on_finished(run_id)
        except Exception as exc:  # noqa: BLE001 - the run is recorded; its check is not
            log.warning("run %s: its job's captures were not checked (%s: %s)", run_id,
                        type(exc).__name__, exc)

    async def _write(self, run_id: str, what: str, write: Callable[[str], object]) -> bool:
        """Write to the index, retrying while it cannot be written (a full disk): the run
        must never stay ``running`` once its worker is done. False: the run was deleted."""
        warned = False
        while True:
            try:
                return bool(await self.index(_write_if_there, self.store, run_id, write))
            except sqlite3.Error as exc:
                if not warned:
                    log.warning("run %s: cannot %s (%s); retrying every %g s", run_id, what,
                                exc, RECORD_RETRY_S)
                    warned = True
                await asyncio.sleep(RECORD_RETRY_S)

    async def _analyze(self, run: dict[str, Any]) -> dict[str, Any]:
        inputs = [(str(blob_path(self.config.blobs_dir, f["sha256"])), f["name"])
                  for f in run["files"]]
        limits = limits_for(self.config, run.get("input_bytes"))
        item = (str(self.config.runs_dir / run["id"]), inputs)
        if run["id"] in self._cancelled:  # deleted since it took its slot
            return {"error": failure(Failed(0, CANCELLED, "cancelled"), limits, None, True)}
        self.pool.expect(run["id"])  # from here pool.cancel stops it, before or on a worker
        out = await asyncio.get_running_loop().run_in_executor(
            self._threads, self.pool.run, run["id"], analyze_task, item, limits)
        if isinstance(out, Failed):
            log.warning("run %s: %s", run["id"], out)
            return {"error": failure(out, limits, run.get("input_bytes"),
                                     self.config.max_analysis_s is not None)}
        if not isinstance(out, dict):
            return {"error": "the analysis worker answered nonsense"}
        return out

    def pids(self) -> list[int]:
        """The worker processes' pids (for tests and the log)."""
        return self.pool.pids()

    async def close(self) -> None:
        """Stop: analyses in progress are stopped, not awaited; their runs stay queued or
        running in the index and start again with the next server (see :meth:`resume`)."""
        for task in list(self._tasks):
            task.cancel()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.pool.close)
        self._threads.shutdown(wait=False, cancel_futures=True)
