"""The analysis pool: a bounded set of spawned worker processes fed from the run index.

Input: run ids (new uploads, and on start-up the runs a stopped server left queued or
running). Output: status changes in the index. Workers are started with ``spawn`` (polars is
not fork-safe), at most ``workers`` at a time, each recycled after ``TASKS_PER_WORKER`` runs so
memory a long-lived analysis process accumulated is given back; a worker that dies (killed for
memory, a crash) fails its run with one line and the pool is rebuilt.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from rightsize.serve.config import ServeConfig
from rightsize.serve.store import Store, blob_path
from rightsize.serve.worker import analyze_run, init_worker

TASKS_PER_WORKER = 20
log = logging.getLogger("rightsize.serve")


class JobRunner:
    """Submits runs to the process pool and records their outcome."""

    def __init__(self, config: ServeConfig, store: Store) -> None:
        self.config = config
        self.store = store
        self._pool: ProcessPoolExecutor | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # One slot per worker: a run is "running" exactly while it holds one, and only this
        # process writes the index (workers need no SQLite, even under a tight memory cap).
        self._slots = asyncio.Semaphore(config.workers)

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.config.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_worker,
                initargs=(self.config.worker_memory_bytes,),
                max_tasks_per_child=TASKS_PER_WORKER,
            )
        return self._pool

    def resume(self) -> int:
        """Queue again the runs a previous server left unfinished; how many."""
        ids = self.store.active_ids()
        for run_id in ids:
            self.store.requeue(run_id)
            self.submit(run_id)
        return len(ids)

    def submit(self, run_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._run(run_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, run_id: str) -> None:
        async with self._slots:
            run = self.store.get(run_id)
            if run is None:
                return  # deleted while queued
            self.store.mark_running(run_id)
            summary = await self._analyze(run)
        if self.store.get(run_id) is not None:
            self.store.finish(run_id, summary)
        log.info("run %s: %s", run_id, summary.get("error") or "done")

    async def _analyze(self, run: dict[str, Any]) -> dict[str, Any]:
        inputs = [(str(blob_path(self.config.blobs_dir, f["sha256"])), f["name"])
                  for f in run["files"]]
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor(), analyze_run, str(self.config.runs_dir / run["id"]), inputs)
        except BrokenProcessPool:
            self._pool = None  # rebuilt on the next submit
            return {"error": "the analysis worker died (out of memory or crashed); "
                             "try a smaller capture or raise --worker-memory-mb"}
        except asyncio.CancelledError:
            raise  # shutting down: the run stays queued/running and resumes on restart
        except Exception as exc:  # noqa: BLE001 - the run must end failed, never stay running
            return {"error": f"internal error: {type(exc).__name__}: {exc}"}

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._pool is not None:
            # Analyses in progress are stopped, not awaited: their runs stay queued/running in
            # the index and start again with the next server (see resume).
            workers = list(getattr(self._pool, "_processes", {}).values())
            self._pool.shutdown(wait=False, cancel_futures=True)
            for process in workers:
                process.terminate()
            self._pool = None
