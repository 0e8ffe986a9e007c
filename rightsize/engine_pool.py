"""The engine's persistent mode: worker processes that stay, take one task at a time, live and
die with their parent, and stop a task that runs too long or is no longer wanted.

:func:`rightsize.engine.map_unordered` starts a pool for one map and ends it; a server needs
workers that stay between requests (the analysis stack imported once), take tasks as they come,
and can be stopped one task at a time. :class:`WorkerPool` is that: up to ``workers`` spawned
processes (``spawn``: polars is not fork-safe), each with its own pipe, recycled after
``tasks_per_worker`` tasks so memory a long-lived process accumulated is given back.

Every task runs under :class:`Limits`: a deadline (``wall_s``: past it the parent kills the
worker) and a CPU-time limit (``cpu_s``: the worker's ``RLIMIT_CPU`` set for this task, so the
kernel stops a task whose CPU time runs away even if nothing else is watching); and it can be
cancelled (:meth:`WorkerPool.cancel` kills its worker; a task still waiting for a slot or for its
worker to start never runs). The outcome is the task's result, or a
:class:`~rightsize.engine.Failed` whose ``error`` says why: :data:`WALL_LIMIT`,
:data:`CPU_LIMIT`, :data:`CANCELLED`, :data:`DIED` (killed, out of memory: the message says
how, ``killed by SIGKILL``), or the exception
the task raised. A worker that dies fails only its own task. Workers die with the parent
(:func:`rightsize.engine.tie_to_parent`: the kernel's parent-death signal, tied to the thread
that started the child, which here is the pool's own spawner thread) and cap their address
space at ``memory_bytes`` (``RLIMIT_AS``, after the initializer's imports); ``nice`` lowers
their scheduling priority (a server keeps its own ahead of its analyses on the same cores).

:meth:`WorkerPool.run` blocks: call it from a thread of your own (one per task in flight).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import resource
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rightsize.engine import Failed, tie_to_parent

WALL_LIMIT = "WallTimeLimit"
CPU_LIMIT = "CpuTimeLimit"
CANCELLED = "Cancelled"
DIED = "WorkerDied"
STOP_WAIT_S = 5.0  # after terminate() or at close, how long a worker may take to exit
READY_WAIT_S = 300.0  # how long a new worker may take to start (imports), before its tasks


@dataclass(frozen=True, slots=True)
class Limits:
    wall_s: float | None = None  # the task's deadline, from when the worker takes it
    cpu_s: float | None = None  # CPU seconds (all the worker's threads) the task may use


@dataclass(eq=False)  # identity: workers sit in sets
class _Worker:
    process: Any  # multiprocessing.Process (spawn context)
    conn: Any  # the parent's end of the pipe
    tasks: int = 0
    key: str | None = None  # the task it runs
    cancelled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def alive(self) -> bool:
        return bool(self.process.is_alive())

    def death(self) -> str:
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"


class WorkerPool:
    """Persistent workers running one task each at a time (see the module docstring)."""

    def __init__(self, workers: int, *, memory_bytes: int | None = None,
                 tasks_per_worker: int = 20, initializer: Callable[[], None] | None = None,
                 env: dict[str, str] | None = None, nice: int = 0) -> None:
        self.workers = workers
        self.nice = nice
        self.memory_bytes = memory_bytes
        self.tasks_per_worker = tasks_per_worker
        self.initializer = initializer
        self.env = dict(env or {})
        self._context = multiprocessing.get_context("spawn")
        # The parent-death signal fires when the *thread* that started a child ends: children
        # are started from this one thread, which lives as long as the pool.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-spawner")
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._busy: dict[str, _Worker] = {}
        self._waiting: set[str] = set()  # tasks expected or in run(), not yet on a worker
        self._dropped: set[str] = set()  # of those, the ones cancelled
        self._slots = threading.BoundedSemaphore(workers)
        self._closed = False

    # -- tasks -----------------------------------------------------------------------------

    def run(self, key: str, fn: Callable[[Any], Any], item: Any,
            limits: Limits = Limits()) -> Any:
        """``fn(item)`` in a worker, under ``limits``; its result, or a :class:`Failed`.
        Blocks while ``workers`` tasks are running. ``key`` names the task for
        :meth:`cancel` (one task per key at a time)."""
        self.expect(key)
        try:
            with self._slots:
                worker = self._take(key)
                if worker is None:
                    return Failed(0, CANCELLED, "cancelled before it started")
                try:
                    return self._run_on(worker, fn, item, limits)
                finally:
                    self._give_back(key, worker)
        finally:
            with self._lock:
                self._waiting.discard(key)
                self._dropped.discard(key)

    def expect(self, key: str) -> None:
        """Say that task ``key`` is about to be run (before :meth:`run`'s thread starts):
        from now on :meth:`cancel` stops it, even before a worker takes it."""
        with self._lock:
            self._waiting.add(key)

    def cancel(self, key: str) -> bool:
        """Stop the task ``key`` now: its worker is killed, or a task still waiting for a slot
        or a worker never starts; whether there was such a task."""
        with self._lock:
            worker = self._busy.get(key)
            if worker is None:
                if key not in self._waiting:
                    return False
                self._dropped.add(key)
                return True
            worker.cancelled = True
        with contextlib.suppress(OSError):
            worker.process.kill()
        return True

    def running(self) -> list[str]:
        with self._lock:
            return list(self._busy)

    def _run_on(self, worker: _Worker, fn: Callable[[Any], Any], item: Any,
                limits: Limits) -> Any:
        try:
            worker.conn.send((fn, item, limits.cpu_s))
        except (OSError, ValueError):  # it died before it could take the task
            return self._ended(worker, limits)
        worker.tasks += 1
        deadline = None if limits.wall_s is None else time.monotonic() + limits.wall_s
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready = worker.conn.poll(wait)
            except (EOFError, OSError):
                ready = True
            if not ready:  # past the deadline
                with contextlib.suppress(OSError):
                    worker.process.kill()
                worker.process.join(STOP_WAIT_S)
                return Failed(0, WALL_LIMIT, f"over its time limit of {limits.wall_s:g} s")
            try:
                answer = worker.conn.recv()
            except (EOFError, OSError):
                return self._ended(worker, limits)
            return answer

    def _ended(self, worker: _Worker, limits: Limits) -> Failed:
        """Why a worker's pipe ended before it answered."""
        worker.process.join(STOP_WAIT_S)
        if worker.cancelled:
            return Failed(0, CANCELLED, "cancelled")
        if worker.process.exitcode == -signal.SIGXCPU:
            return Failed(0, CPU_LIMIT, f"over its CPU time limit of {limits.cpu_s:g} s")
        return Failed(0, DIED, worker.death())

    # -- workers ---------------------------------------------------------------------------

    def _take(self, key: str) -> _Worker | None:
        """An idle or new worker, marked busy with ``key``; None when ``key`` was cancelled
        meanwhile (a worker that was found goes back idle)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            if key in self._dropped:
                return None
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    break
                _reap(worker)
            else:
                worker = None
        if worker is None:
            worker = self._spawner.submit(self._spawn).result()
            _wait_ready(worker)  # the task's limits start when the worker can take it
        with self._lock:
            if key not in self._dropped:
                worker.key, worker.cancelled = key, False
                self._busy[key] = worker
                return worker
            if worker.alive() and not self._closed:  # cancelled while the worker started
                self._idle.append(worker)
                return None
        _reap(worker)
        return None

    def _spawn(self) -> _Worker:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=worker_main, name="rightsize-engine-worker", daemon=True,
            args=(theirs, os.getpid(), self.memory_bytes, self.initializer, self.env,
                  self.tasks_per_worker, self.nice))
        process.start()
        theirs.close()  # only the child holds its end: its death reads as EOF here
        return _Worker(process, ours)

    def _give_back(self, key: str, worker: _Worker) -> None:
        with self._lock:
            self._busy.pop(key, None)
            worker.key = None
            keep = (not self._closed and worker.alive() and not worker.cancelled
                    and worker.tasks < self.tasks_per_worker)
            if keep:
                self._idle.append(worker)
        if not keep:
            _reap(worker)

    def pids(self) -> list[int]:
        """The worker processes' pids."""
        with self._lock:
            workers = [*self._idle, *self._busy.values()]
        return [w.process.pid for w in workers if w.process.pid]

    def close(self) -> None:
        """Stop every worker (tasks in progress end as :data:`DIED`), then the spawner."""
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._busy.values()]
            self._idle = []
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.process.terminate()
        for worker in workers:
            _reap(worker)
        self._spawner.shutdown(wait=True)


def _wait_ready(worker: _Worker) -> None:
    """Wait for a new worker's "ready" (sent after its set-up); a worker that dies or hangs
    first is left to fail the task that follows (it reads as dead)."""
    with contextlib.suppress(EOFError, OSError):
        if worker.conn.poll(READY_WAIT_S):
            worker.conn.recv()
            return
    with contextlib.suppress(OSError):
        worker.process.kill()


def _reap(worker: _Worker) -> None:
    worker.conn.close()
    worker.process.join(timeout=STOP_WAIT_S)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join(timeout=STOP_WAIT_S)


# -- the worker process -------------------------------------------------------------------

def worker_main(conn: Any, parent_pid: int, memory_bytes: int | None,
                initializer: Callable[[], None] | None, env: dict[str, str],
                tasks: int, nice: int = 0) -> None:
    """A worker: tied to its parent, ``nice`` added to its scheduling priority, set up once,
    then ``tasks`` tasks at most, each under its CPU limit; returns (the process exits) when
    the pipe closes or the parent is gone."""
    tie_to_parent(parent_pid)
    if nice:
        os.nice(nice)
    os.environ.update(env)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU leaves no core file
    if initializer is not None:
        initializer()  # imports first: under a tight RLIMIT_AS they would fail misleadingly
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    conn.send("ready")
    for _ in range(tasks):
        try:
            fn, item, cpu_s = conn.recv()
        except (EOFError, OSError):
            return
        with _cpu_limit(cpu_s):
            result = _call(fn, item)
        conn.send(result)


@contextlib.contextmanager
def _cpu_limit(cpu_s: float | None) -> Any:
    """``RLIMIT_CPU`` at the CPU time used so far plus ``cpu_s`` (SIGXCPU, whose default action
    ends the process, past it), lifted again after the task."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if cpu_s is None:
        yield
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(usage.ru_utime + usage.ru_stime + cpu_s)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except Exception as exc:  # noqa: BLE001 - a task's failure is its own outcome
        return Failed(0, type(exc).__name__, " ".join(str(exc).split()) or "no message")
