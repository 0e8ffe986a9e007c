"""Map a pure function over many inputs: the engine behind jobs of many ranks and fleets of jobs.

One API, two backends:

* ``local`` (default, nothing to install): a process pool on this machine
  (``concurrent.futures.ProcessPoolExecutor`` with the ``spawn`` start method, so a worker never
  inherits the driver's memory or threads), ``workers`` processes, each task handed out as a
  worker frees up. Workers die with the process that started them (:func:`tie_to_parent`: the
  kernel's parent-death signal on Linux, and a thread watching the parent's pid), so a driver
  killed with SIGKILL leaves no worker (nor, once they are gone, multiprocessing's resource
  tracker) behind;
* ``ray`` (``pip install rightsize[ray]``): one Ray task per input, on a running cluster
  (``address``: ``"auto"`` or ``HOST:PORT``), each with ``memory_bytes`` of memory requested
  (or its own, ``item_memory_bytes``) so the scheduler never packs more tasks on a node than
  its memory holds; a request is capped at the largest node's memory (more could never be
  scheduled and would wait forever).

:func:`task_budget_bytes` says how much memory one task may take on either backend (what a
caller sizes its inputs' reads by).

``fn`` must be a module-level function (it is pickled by reference) taking one item and
returning something picklable and small: a summary, never a trace's events. A task that raises
yields a :class:`Failed` with the error in one line instead of stopping the map; the caller
decides whether that input is a bad row or a fatal error. Results come back in completion
order as ``(index, result)``; :func:`map_ordered` restores input order.

The driver holds only the results: inputs are paths or small keys, never frames.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rightsize.errors import RightsizeError

T = TypeVar("T")
R = TypeVar("R")
ENGINES = ("local", "ray")


@dataclass(frozen=True, slots=True)
class Failed:
    """A task that raised: its input's index, the error's type and its message in one line
    (and, when it ran in this process, the exception itself: a caller may raise it again)."""

    index: int
    error: str
    message: str
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.error}: {self.message}"


@dataclass(frozen=True, slots=True)
class EngineOptions:
    engine: str = "local"
    workers: int | None = None  # local: processes (default: CPUs, at most the inputs)
    address: str | None = None  # ray: "auto" or HOST:PORT (None: start or join as ray.init does)
    memory_bytes: int | None = None  # ray: memory requested per task (a trace's budget)
    item_memory_bytes: tuple[int, ...] | None = None  # ray: per input, instead of memory_bytes


PARENT_POLL_S = 0.5  # how often a worker looks for its parent when the kernel cannot tell it
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


def tie_to_parent(parent_pid: int) -> None:
    """Make this process exit when ``parent_pid`` (the process that started it) dies: the
    kernel's parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; it fires when the
    parent *thread* that started this process ends, so start workers from a thread that lives
    as long as they should), and a daemon thread that polls the parent's pid every
    :data:`PARENT_POLL_S` (any POSIX: an orphan is re-parented) in case the first is missing.
    A process pool's ``initializer``; serve's workers call it too."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


# The share of the memory available when a local map starts that its workers may take
# together (the rest: the driver, the page cache, whatever else runs on the machine).
LOCAL_MEMORY_FRACTION = 0.6


def default_workers(items: int) -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(items, cpus or 1))


def task_budget_bytes(options: EngineOptions, items: int) -> int:
    """Memory one task may use: local, :data:`LOCAL_MEMORY_FRACTION` of the memory available
    now shared by the workers that run at once; Ray, the smallest node's ``memory`` resource
    (a task is never given more than one node has)."""
    if options.engine == "ray":
        return min(_ray_node_memory(options))
    import psutil

    workers = options.workers or default_workers(items)
    return int(psutil.virtual_memory().available * LOCAL_MEMORY_FRACTION / max(1, workers))


def workers_within(task_bytes: int, items: int) -> int:
    """Local workers for tasks of ``task_bytes`` each: one per CPU (at most one per item), no
    more than :data:`LOCAL_MEMORY_FRACTION` of the memory available now holds."""
    import psutil

    fit = int(psutil.virtual_memory().available * LOCAL_MEMORY_FRACTION) // max(1, task_bytes)
    return max(1, min(default_workers(items), fit))


def map_unordered(fn: Callable[[T], R], items: Sequence[T],
                  options: EngineOptions = EngineOptions()) -> Iterator[tuple[int, R | Failed]]:
    """``(index, fn(items[index]) or Failed)`` as each task finishes."""
    if options.engine not in ENGINES:
        raise RightsizeError(f"unknown engine {options.engine!r}: use one of {', '.join(ENGINES)}")
    if not items:
        return iter(())
    if options.engine == "ray":
        return _ray(fn, items, options)
    return _local(fn, items, options.workers or default_workers(len(items)))


def map_ordered(fn: Callable[[T], R], items: Sequence[T],
                options: EngineOptions = EngineOptions()) -> list[R | Failed]:
    """The results in input order."""
    out: list[Any] = [None] * len(items)
    for i, r in map_unordered(fn, items, options):
        out[i] = r
    return out


def _call(fn: Callable[[T], R], index: int, item: T, here: bool = False) -> R | Failed:
    """Run one task, turning its exception into a :class:`Failed` (runs in the worker;
    ``here``: in this process, the Failed keeps the exception)."""
    try:
        return fn(item)
    except Exception as exc:  # noqa: BLE001 - every input's failure becomes its own row
        return Failed(index, type(exc).__name__, " ".join(str(exc).split()) or "no message",
                      exc if here else None)


def _local(fn: Callable[[T], R], items: Sequence[T],
           workers: int) -> Iterator[tuple[int, R | Failed]]:
    """A pool of ``workers`` processes. A worker that dies (killed, out of memory) breaks the
    pool and every task it held: those are run again each in a pool of its own, so only the
    input that kills its worker fails; the tasks not yet started go on in a fresh shared pool."""
    if workers == 1:  # no pool: the same process, same results, none of the start-up
        for i, item in enumerate(items):
            yield i, _call(fn, i, item, here=True)
        return
    todo = list(range(len(items)))  # not started yet: in a shared pool
    suspects: list[int] = []  # in flight when a pool broke: each in a pool of its own
    while todo or suspects:
        rounds = [([i], True) for i in suspects] + ([(todo, False)] if todo else [])
        todo, suspects = [], []
        for batch, alone in rounds:
            for i, result in _pool(fn, items, batch, 1 if alone else workers):
                if result is _UNSTARTED:
                    todo.append(i)
                elif result is not _BROKEN:
                    yield i, result
                elif alone:
                    yield i, Failed(i, "WorkerDied", "its worker process died (killed, or "
                                    "out of memory) while analyzing this input")
                else:
                    suspects.append(i)


_BROKEN: Any = object()  # in flight in a pool that broke
_UNSTARTED: Any = object()  # never handed to a pool that broke before its turn


def _pool(fn: Callable[[T], R], items: Sequence[T], indices: list[int],
          workers: int) -> Iterator[tuple[int, Any]]:
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(indices)), mp_context=ctx,
                             initializer=tie_to_parent, initargs=(os.getpid(),)) as pool:
        pending: dict[Future[Any], int] = {}
        queue = iter(indices)

        unstarted: list[int] = []

        def submit(n: int) -> None:
            for _ in range(n):
                i = next(queue, None)
                if i is None:
                    return
                if unstarted:  # the pool is broken: the rest waits for the next one
                    unstarted.append(i)
                    continue
                try:
                    pending[pool.submit(_call, fn, i, items[i])] = i
                except BrokenProcessPool:
                    unstarted.append(i)

        submit(2 * workers)  # a little ahead of the workers, never the whole list at once
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                try:
                    yield i, fut.result()
                except BrokenProcessPool:
                    yield i, _BROKEN
            submit(len(done))
        for i in [*unstarted, *queue]:
            yield i, _UNSTARTED


def _ray(fn: Callable[[T], R], items: Sequence[T],
         options: EngineOptions) -> Iterator[tuple[int, R | Failed]]:
    ray = _ray_init(options)
    largest = max(_ray_node_memory(options))
    remote = ray.remote(_call)

    def submit(i: int, item: T) -> Any:
        wanted = options.item_memory_bytes[i] if options.item_memory_bytes is not None \
            else options.memory_bytes
        task = remote.options(memory=min(int(wanted), largest)) if wanted else remote
        return task.remote(fn, i, item)

    refs = {submit(i, item): i for i, item in enumerate(items)}
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        for ref in done:
            i = refs.pop(ref)
            try:
                yield i, ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a task the cluster lost (node died, OOM)
                yield i, Failed(i, type(exc).__name__, " ".join(str(exc).split())[:500])


def _ray_init(options: EngineOptions) -> Any:
    try:
        import ray
    except ImportError:
        raise RightsizeError("the Ray engine needs Ray: pip install 'rightsize[ray]'") from None
    if not ray.is_initialized():
        _check_reachable(options.address)
        local = options.address is None and not os.environ.get("RAY_ADDRESS")
        try:
            with _quiet_token_notice():
                ray.init(address=options.address, ignore_reinit_error=True, log_to_driver=False,
                         **(_private_local_ray(ray) if local else {}))
        except ConnectionError as exc:
            raise RightsizeError(f"cannot join the Ray cluster at {options.address or 'auto'}: "
                                 f"{' '.join(str(exc).split())[:300]}") from None
    return ray


def _private_local_ray(ray: Any) -> dict[str, Any]:
    """A local Ray that leaves nothing behind: its sessions, logs and sockets in a temporary
    folder of its own (not /tmp/ray), its auth token there too (Ray's default for a new local
    cluster writes one to ``~/.ray/auth_token``, which later ``ray start`` clusters pick up and
    their drivers then fail with InvalidAuthToken). Ray reads the token's path from the
    environment, so it is set for as long as this cluster runs; at exit the cluster stops,
    the folder goes and the variable is restored."""
    import atexit
    import secrets
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
    token = os.path.join(folder, "auth_token")  # short path: Ray's socket names must fit
    with open(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
        fh.write(secrets.token_hex(32))
    before = os.environ.get("RAY_AUTH_TOKEN_PATH")
    os.environ["RAY_AUTH_TOKEN_PATH"] = token

    def clean_up() -> None:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
        else:
            os.environ["RAY_AUTH_TOKEN_PATH"] = before

    atexit.register(clean_up)  # runs before Ray's own exit hook (registered earlier)
    return {"_temp_dir": folder, "include_dashboard": False}


@contextlib.contextmanager
def _quiet_token_notice() -> Iterator[None]:
    """Ray warns on every new local cluster that token auth is on and how to opt out; for
    the private cluster above that is noise, so its logger is held at errors while it starts."""
    import logging

    log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _check_reachable(address: str | None) -> None:
    """A ``HOST:PORT`` that nothing answers at is one line now (``ray.init`` would retry for
    minutes)."""
    import socket

    if address is None or address == "auto" or ":" not in address:
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except (OSError, ValueError) as exc:
        raise RightsizeError(f"cannot join the Ray cluster at {address}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None


def _ray_node_memory(options: EngineOptions) -> list[int]:
    """The ``memory`` resource of each live node of the cluster (bytes)."""
    ray = _ray_init(options)
    sizes = [int(n.get("Resources", {}).get("memory", 0)) for n in ray.nodes() if n.get("Alive")]
    sizes = [s for s in sizes if s > 0]
    if not sizes:
        raise RightsizeError("the Ray cluster has no live node with memory to run tasks on")
    return sizes
