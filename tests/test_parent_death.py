"""Engine workers die with their parent: a ``fleet scan`` or an ``analyze`` on local workers that
is killed with SIGKILL (no handler runs) leaves no process behind.

Before, the two pool workers (about 130 MB each) and multiprocessing's resource tracker ran on,
idle, indefinitely. Now each worker arms the kernel's parent-death signal and watches its
parent's pid (``engine.tie_to_parent``); the resource tracker exits once the last process that
holds its pipe is gone. Real subprocesses, real pools: several inputs that take seconds each.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.serve.serving import big_kineto

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


@pytest.fixture(scope="module")
def trace() -> bytes:
    """A trace that takes a second or more to analyze (90,000 events)."""
    return gzip.decompress(big_kineto(steps=3, kernels=10_000))


def _inputs(folder: Path, trace: bytes, n: int) -> Path:
    """``n`` copies of ``trace``, each with its own bytes (leading blanks): distinct jobs."""
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"job{i}.json").write_bytes(b" " * i + trace)
    return folder


def _survivors(args: list[str], cwd: Path, pool: int) -> list[str]:
    """Start ``rightsize ARGS``, wait until its pool is up (``pool`` processes under it),
    SIGKILL it, and return what of its process tree is still alive 5 s later."""
    proc = subprocess.Popen([sys.executable, "-m", "rightsize", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONWARNINGS="ignore"))
    parent = psutil.Process(proc.pid)
    kids: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        kids = parent.children(recursive=True)
        if len(kids) >= pool:
            break
        time.sleep(0.2)
    assert proc.poll() is None and len(kids) >= pool, "the pool never came up"
    time.sleep(1.0)  # the workers import the analysis stack and start on their inputs
    kids = parent.children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _, alive = psutil.wait_procs(kids, timeout=5)
    left = [f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in alive if p.is_running()]
    for p in alive:  # leave nothing behind, whatever the test says
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return left


def test_a_killed_fleet_scan_leaves_no_process(tmp_path, trace):
    folder = _inputs(tmp_path / "in" / "team", trace, 6)
    # 2 workers and the resource tracker
    assert _survivors(["fleet", "scan", str(folder), "--table", str(tmp_path / "t"),
                       "--workers", "2"], tmp_path, pool=3) == []


def test_a_killed_analyze_on_local_workers_leaves_no_process(tmp_path, trace):
    folder = _inputs(tmp_path / "ranks", trace, 4)
    assert _survivors(["analyze", str(folder), "--engine", "local", "--workers", "2", "-q",
                       "--no-report", "--format", "json"], tmp_path, pool=3) == []
