"""`rightsize run` never harms the job (issue 12): a long recording is cut, not exported, on
SIGTERM (job gone in < 2 s); the job's signal dispositions come back; the job dies with
rightsize; an interrupted run says so; nothing of rightsize's goes into the job's streams."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rightsize.rundir import read_manifest

pytest.importorskip("torch")

TRAIN_FOREVER = """
import sys, time, torch
m = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(8, 64)
i = 0
start = None
while True:
    opt.zero_grad(); m(x).sum().backward(); opt.step()
    i += 1
    if i == 2:
        start = time.monotonic()
    if start is not None and time.monotonic() - start > {record_s} and i > 0:
        print("ready", flush=True)
        start = None
"""


def _start(tmp_path: Path, record_s: float) -> subprocess.Popen[str]:
    (tmp_path / "forever.py").write_text(TRAIN_FOREVER.format(record_s=record_s))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rightsize", "run", "--out", "run", "--no-report",
         "--no-gpu-samples", "--active", "1000000", "forever.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _job_pid(run: Path) -> int:
    for _ in range(100):
        recs = [p for p in (run / "procs").glob("*.json")]
        if recs:
            return json.loads(recs[0].read_text())["pid"]
        time.sleep(0.05)
    raise AssertionError("no process record")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1].startswith("Z")  # a zombie has ended
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, limit_s: float) -> float:
    start = time.monotonic()
    while not _gone(pid):
        if time.monotonic() - start > limit_s:
            return float("inf")
        time.sleep(0.01)
    return time.monotonic() - start


@pytest.mark.slow
def test_sigterm_while_recording_cuts_the_trace_fast(tmp_path: Path) -> None:
    proc = _start(tmp_path, record_s=4.0)  # past flush_on_signal_s: the window is cut
    pid = _job_pid(tmp_path / "run")
    os.kill(proc.pid, signal.SIGTERM)
    assert _wait_gone(pid, 10) < 2.0
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    manifest = read_manifest(tmp_path / "run")
    assert manifest["exit"]["signal"] == "SIGTERM"
    (rec,) = manifest["collectors"]["profiler"]["processes"]
    assert rec["state"] == "cut"
    assert any(n.startswith("trace cut by SIGTERM after ") for n in rec["notes"])
    assert "rightsize: profiler" not in stderr


@pytest.mark.slow
def test_job_dies_with_rightsize_and_the_run_says_interrupted(tmp_path: Path) -> None:
    proc = _start(tmp_path, record_s=0.5)
    run = tmp_path / "run"
    pid = _job_pid(run)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert _wait_gone(pid, 10) < 5.0  # PR_SET_PDEATHSIG: SIGTERM to the orphan
    assert read_manifest(run)["status"] == "running"
    res = subprocess.run([sys.executable, "-m", "rightsize", "analyze", str(run), "--format",
                          "json", "--no-report"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, check=False)
    # With a trace (a short window flushed on the way out) a note; without one, the error says so
    assert (f"rightsize: note: {run}: the run was interrupted" in res.stderr
            or res.stderr == f"rightsize: error: {run}: run directory without traces: the run "
                             "was interrupted (rightsize was killed) before a trace was written\n")


DISPOSITIONS = """
import signal, torch
m = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for _ in range(8):
    opt.zero_grad(); m(torch.randn(2, 4)).sum().backward(); opt.step()
print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
      signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


@pytest.mark.parametrize("flags", [[], ["--on-demand"]], ids=["run", "on-demand"])
def test_job_signal_dispositions_are_restored(tmp_path: Path, flags: list[str]) -> None:
    (tmp_path / "d.py").write_text(DISPOSITIONS)
    res = subprocess.run(
        [sys.executable, "-m", "rightsize", "run", "--out", "run", "--no-report",
         "--no-gpu-samples", "--wait", "0", "--warmup", "0", "--active", "2", *flags, "d.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "True True"


def test_busy_out_does_not_suggest_force(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    (tmp_path / "x.py").write_text("")
    res = subprocess.run([sys.executable, "-m", "rightsize", "run", "--out", "run", "x.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1 and "--force" not in res.stderr
