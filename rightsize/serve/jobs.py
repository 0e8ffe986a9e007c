"""The analysis pool: up to ``workers`` spawned processes fed from the run index.

Input: run ids (new uploads, and on start-up the runs a stopped server left queued or
running). Output: status changes in the index. Each worker is a process of its own with its
own pipe (:func:`rightsize.serve.worker.worker_main`), started with ``spawn`` (polars is not
fork-safe) and replaced after ``TASKS_PER_WORKER`` runs so memory a long-lived analysis
process accumulated is given back. A worker that dies (killed, out of memory, a crash) fails
its own run with one line and only that run: the others keep their workers. Workers die with
the server (see the worker module).

A finished run's row goes into the data directory's fleet table (:mod:`.fleet`) before the
index records the run as finished.

Start-up reconciles the index with the disk: a queued or running run whose ``analysis.json``
was written completely (a server killed after its worker finished) is adopted as done, not
analyzed again; the others are queued again. A run's result that cannot be recorded (the
index's disk is full) is retried until it can, so no run stays ``running`` for ever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rightsize.serve.config import ServeConfig
from rightsize.serve.store import Store, blob_path
from rightsize.serve.worker import (
    ANALYSIS_JSON,
    REPORT_HTML,
    TASKS_PER_WORKER,
    summarize,
    worker_main,
)

if TYPE_CHECKING:
    from rightsize.serve.fleet import ServeFleet

log = logging.getLogger("rightsize.serve")
RECORD_RETRY_S = 2.0  # how often a result the index refused (disk full) is tried again
STOP_WAIT_S = 5.0  # after terminate(), how long a worker may take before it is killed


class WorkerDied(Exception):
    """The worker process ended without answering."""


@dataclass(eq=False)  # identity: workers sit in a set
class _Worker:
    process: Any  # multiprocessing.Process (spawn context)
    conn: Any  # the server's end of the pipe
    tasks: int = 0

    def alive(self) -> bool:
        return bool(self.process.is_alive())

    def death(self) -> str:
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exited with status {code}"


class JobRunner:
    """Runs analyses in worker processes and records their outcome in the index."""

    def __init__(self, config: ServeConfig, store: Store,
                 fleet: ServeFleet | None = None) -> None:
        self.config = config
        self.store = store
        self.fleet = fleet  # each finished run's row goes there before the index says finished
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        # One slot per worker: a run is "running" exactly while it holds one, and only this
        # process writes the index (workers need no SQLite, even under a tight memory cap).
        self._slots = asyncio.Semaphore(config.workers)
        self._context = multiprocessing.get_context("spawn")

    # -- start-up --------------------------------------------------------------------------

    def resume(self) -> tuple[int, int]:
        """Adopt the finished runs a previous server did not record, queue the rest again;
        (adopted, queued)."""
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

    async def _run(self, run_id: str) -> None:
        async with self._slots:
            run = self.store.get(run_id)
            if run is None:
                return  # deleted while queued
            await self._write(run_id, "mark it running", self.store.mark_running)
            try:
                summary = await self._analyze(run)
            except Exception as exc:
                log.error("run %s: internal error", run_id, exc_info=exc)
                summary = {"error": f"internal error: {type(exc).__name__}: {exc}"}
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

    async def _write(self, run_id: str, what: str, write: Callable[[str], object]) -> None:
        """Write to the index, retrying while it cannot be written (a full disk): the run
        must never stay ``running`` once its worker is done."""
        warned = False
        while True:
            try:
                if self.store.get(run_id) is not None:  # not deleted meanwhile
                    write(run_id)
                return
            except sqlite3.Error as exc:
                if not warned:
                    log.warning("run %s: cannot %s (%s); retrying every %g s", run_id, what,
                                exc, RECORD_RETRY_S)
                    warned = True
                await asyncio.sleep(RECORD_RETRY_S)

    async def _analyze(self, run: dict[str, Any]) -> dict[str, Any]:
        inputs = [(str(blob_path(self.config.blobs_dir, f["sha256"])), f["name"])
                  for f in run["files"]]
        worker = self._take()
        loop = asyncio.get_running_loop()
        try:
            worker.conn.send((str(self.config.runs_dir / run["id"]), inputs))
            worker.tasks += 1
            summary: dict[str, Any] = await loop.run_in_executor(None, _receive, worker)
        except WorkerDied:
            why = worker.death()
            log.warning("run %s: its analysis worker %s", run["id"], why)
            return {"error": f"the analysis worker died ({why}: out of memory, or stopped); "
                             "try a smaller capture or raise --worker-memory-mb"}
        except (OSError, ValueError) as exc:  # the pipe broke while sending
            return {"error": f"the analysis worker failed: {exc}"}
        finally:
            self._give_back(worker)
        return summary

    # -- workers ---------------------------------------------------------------------------

    def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive():
                self._busy.add(worker)
                return worker
            _reap(worker)
        worker = self._spawn()
        self._busy.add(worker)
        return worker

    def _spawn(self) -> _Worker:
        # Started from the event loop's thread, which lives as long as the server: the
        # parent-death signal is tied to the thread that started the child.
        ours, theirs = self._context.Pipe()
        cache = str(self.config.cache_dir)
        process = self._context.Process(
            target=worker_main, name="rightsize-serve-worker", daemon=True,
            args=(theirs, os.getpid(), self.config.worker_memory_bytes, cache))
        process.start()
        theirs.close()  # only the child holds its end: its death reads as EOF here
        return _Worker(process, ours)

    def _give_back(self, worker: _Worker) -> None:
        self._busy.discard(worker)
        if worker.alive() and worker.tasks < TASKS_PER_WORKER:
            self._idle.append(worker)
        else:
            _reap(worker)

    def pids(self) -> list[int]:
        """The worker processes' pids (for tests and the log)."""
        return [w.process.pid for w in (*self._idle, *self._busy) if w.process.pid]

    async def close(self) -> None:
        """Stop: analyses in progress are stopped, not awaited; their runs stay queued or
        running in the index and start again with the next server (see :meth:`resume`)."""
        for task in list(self._tasks):
            task.cancel()
        workers = [*self._idle, *self._busy]
        self._idle, self._busy = [], set()
        for worker in workers:
            if worker.alive():
                worker.process.terminate()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _stop_all, workers)


def _receive(worker: _Worker) -> dict[str, Any]:
    """The worker's answer; :class:`WorkerDied` when its pipe ends first (it died)."""
    try:
        answer = worker.conn.recv()
    except (EOFError, OSError):
        worker.process.join(timeout=STOP_WAIT_S)
        raise WorkerDied from None
    if not isinstance(answer, dict):
        return {"error": "the analysis worker answered nonsense"}
    return answer


def _reap(worker: _Worker) -> None:
    worker.conn.close()
    worker.process.join(timeout=STOP_WAIT_S)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join(timeout=STOP_WAIT_S)


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.process.join(timeout=STOP_WAIT_S)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(timeout=STOP_WAIT_S)
        worker.conn.close()
