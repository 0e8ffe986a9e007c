"""The scan's progress: jobs done, rate and ETA on a terminal, one line rewritten; nothing on a
pipe. Drawn exactly from a :class:`Progress`, and seen on a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time

import pytest

from rightsize.cli import fleet_scan
from rightsize.fleet.scan import Progress
from tests.conftest import REPO
from tests.fleet.jobs import fleet


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line(monkeypatch: pytest.MonkeyPatch) -> None:
    err = Tty()
    monkeypatch.setattr(fleet_scan.sys, "stderr", err)
    clock = [100.0]
    monkeypatch.setattr(fleet_scan.time, "monotonic", lambda: clock[0])
    show = fleet_scan.ScanProgress(True)
    show(Progress("finding", 0, 0, 0, 0.0))
    clock[0] += 1
    show(Progress("analyzing", 30, 120, 2, 12.0))  # 2.5 jobs/s: 9,000 an hour, 36 s to go
    clock[0] += 0.1
    show(Progress("analyzing", 31, 120, 2, 12.1))  # within 0.25 s: not drawn
    clock[0] += 1
    show(Progress("analyzing", 120, 120, 2, 4000.0))
    show.done()
    drawn = [p for p in err.getvalue().split("\r\033[K") if p]
    assert drawn == ["fleet scan: finding jobs and reading what changed...",
                     "fleet scan: 30/120 jobs · 9,000 jobs/h · ETA 36s · 2 bad",
                     "fleet scan: 120/120 jobs · 108 jobs/h · ETA 0s · 2 bad"]
    assert fleet_scan.duration(3725) == "1h 02m" and fleet_scan.duration(75) == "1m 15s"


def test_no_progress_on_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(fleet_scan.sys, "stderr", err)
    show = fleet_scan.ScanProgress(True)
    show(Progress("analyzing", 1, 2, 0, 1.0))
    show.done()
    assert err.getvalue() == ""


def test_progress_on_a_real_terminal(tmp_path):
    fleet(tmp_path / "in", 4)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "rightsize", "fleet", "scan",
                             str(tmp_path / "in"), "--table", str(tmp_path / "t"),
                             "--workers", "1", "--batch-rows", "1"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=follower,
                            stdin=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the scan ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = seen.decode()
    assert "fleet scan: finding jobs and reading what changed..." in text
    assert "fleet scan: 4/4 jobs · " in text and " jobs/h · ETA 0s" in text
    assert "\r\033[K" in text  # rewritten in place
    assert "4 jobs found, 0 already in the table, 4 analyzed" in text
