"""The engine's persistent worker mode (issue 36: serve's workers on the engine; issue 40, 1: a
CPU-time limit, a deadline and cancellation per task): real spawned processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from rightsize.engine import Failed
from rightsize.engine_pool import CANCELLED, CPU_LIMIT, DIED, WALL_LIMIT, Limits, WorkerPool


def square(x: int) -> int:
    return x * x


def boom(x: int) -> int:
    raise ValueError(f"bad input {x}\nsecond line")


def sleep_then(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def spin(seconds: float) -> int:
    """Burn CPU (one thread) for ``seconds`` of wall time."""
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
    return n


def allocate(nbytes: int) -> int:
    return len(bytearray(nbytes))


@pytest.fixture
def pool() -> WorkerPool:
    p = WorkerPool(2, tasks_per_worker=5)
    yield p
    p.close()


def test_results_and_errors_come_back_and_workers_are_reused(pool: WorkerPool) -> None:
    assert pool.run("a", square, 7) == 49
    first = pool.pids()
    assert pool.run("b", square, 8) == 64
    assert pool.pids() == first  # the same process took the second task
    failed = pool.run("c", boom, 3)
    assert failed == Failed(0, "ValueError", "bad input 3 second line")
    assert pool.run("d", square, 2) == 4  # a task that raised leaves its worker usable


def test_a_task_past_its_deadline_is_stopped_and_only_it_fails(pool: WorkerPool) -> None:
    start = time.monotonic()
    out = pool.run("slow", sleep_then, 30, Limits(wall_s=1.0))
    assert isinstance(out, Failed) and out.error == WALL_LIMIT
    assert out.message == "over its time limit of 1 s"
    assert time.monotonic() - start < 10
    assert pool.run("next", square, 3) == 9


def test_a_task_past_its_cpu_limit_is_stopped_by_the_kernel(pool: WorkerPool) -> None:
    """RLIMIT_CPU: the worker gets SIGXCPU after one CPU second, with no deadline set."""
    out = pool.run("spin", spin, 60, Limits(cpu_s=1.0))
    assert isinstance(out, Failed) and (out.error, out.message) == \
        (CPU_LIMIT, "over its CPU time limit of 1 s")
    assert pool.run("next", spin, 0.2, Limits(cpu_s=5.0)) > 0  # the next task has its own


def test_a_running_task_is_cancelled(pool: WorkerPool) -> None:
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(pool.run("x", sleep_then, 30)))
    thread.start()
    deadline = time.monotonic() + 30
    while "x" not in pool.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the worker has the task
    assert pool.cancel("x") and not pool.cancel("nothing")
    thread.join(timeout=20)
    assert results == [Failed(0, CANCELLED, "cancelled")]


def touch(path: str) -> str:
    Path(path).write_text("ran")
    return "ran"


def test_a_task_cancelled_before_a_worker_takes_it_never_runs(tmp_path: Path) -> None:
    """Issue 40, 1: DELETE of a run whose worker was still starting (or whose task waited for a
    slot) found nothing to stop, and the analysis then ran in full."""
    pool = WorkerPool(1, tasks_per_worker=5)
    try:
        pool.expect("early")  # announced, not yet in run(): the server's order
        assert pool.cancel("early") and not pool.cancel("never-announced")
        marker = tmp_path / "early"
        assert pool.run("early", touch, str(marker)) == \
            Failed(0, CANCELLED, "cancelled before it started")
        assert not marker.exists() and pool.pids() == []  # no worker was even started
        results: dict[str, object] = {}
        holder = threading.Thread(target=lambda: results.update(a=pool.run("a", sleep_then, 30)))
        holder.start()
        deadline = time.monotonic() + 60
        while "a" not in pool.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        marker = tmp_path / "waiting"
        waiting = threading.Thread(target=lambda: results.update(b=pool.run("b", touch,
                                                                             str(marker))))
        waiting.start()
        time.sleep(0.3)  # b waits for the one slot
        assert pool.cancel("b") and pool.cancel("a")
        holder.join(timeout=20)
        waiting.join(timeout=20)
        assert results == {"a": Failed(0, CANCELLED, "cancelled"),
                           "b": Failed(0, CANCELLED, "cancelled before it started")}
        assert not marker.exists()
        assert pool.run("c", square, 5) == 25  # a task after them runs
    finally:
        pool.close()


def test_one_worker_killed_fails_only_its_own_task(pool: WorkerPool) -> None:
    results: dict[str, object] = {}

    def run(key: str, seconds: float) -> None:
        results[key] = pool.run(key, sleep_then, seconds)

    threads = [threading.Thread(target=run, args=("a", 3.0)),
               threading.Thread(target=run, args=("b", 30.0))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(pool.running()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    victim = pool._busy["b"].process.pid
    os.kill(victim, signal.SIGKILL)
    for t in threads:
        t.join(timeout=30)
    assert results["a"] == "slept"
    assert results["b"] == Failed(0, DIED, "killed by SIGKILL")


def test_a_worker_holds_its_memory_limit() -> None:
    pool = WorkerPool(1, memory_bytes=1 << 30)
    try:
        out = pool.run("big", allocate, 2 << 30)
        assert isinstance(out, Failed) and out.error == "MemoryError"
        assert pool.run("small", allocate, 1 << 20) == 1 << 20
    finally:
        pool.close()


DRIVER = """
import sys, time
from rightsize.engine_pool import WorkerPool
from tests.test_engine_pool import sleep_then
import threading
pool = WorkerPool(2)
for key in ("a", "b"):
    threading.Thread(target=pool.run, args=(key, sleep_then, 600), daemon=True).start()
while len(pool.pids()) < 2:
    time.sleep(0.05)
print(" ".join(map(str, pool.pids())), flush=True)
time.sleep(600)
"""


def test_workers_die_with_a_parent_killed_with_sigkill(tmp_path: Path) -> None:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE,
                              text=True, cwd=Path(__file__).parents[1])
    try:
        assert driver.stdout is not None
        pids = [int(p) for p in driver.stdout.readline().split()]
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
        driver.kill()
        driver.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        driver.kill()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
