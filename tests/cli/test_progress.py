"""Progress lines on a pipe or log: none for short work, then one every ten seconds."""

from __future__ import annotations

import io

import pytest

from rightsize.cli import output


def test_progress_in_a_log_is_sparse(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    err = io.StringIO()
    monkeypatch.setattr(output.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(output.sys, "stderr", err)  # not a terminal
    progress = output.Progress()
    for step in range(300):  # 30 s of updates, ten a second
        clock[0] = 1000.0 + step / 10
        progress(f"reading {step}")
    # quiet for the first 2 s, then at 2 s, 12 s and 22 s
    assert err.getvalue().splitlines() == ["reading 20", "reading 120", "reading 220"]


def test_progress_on_a_terminal_is_one_line_rewritten(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    err = Tty()
    monkeypatch.setattr(output.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(output.sys, "stderr", err)
    progress = output.Progress()
    for step in range(30):  # 3 s, ten updates a second: one every 0.5 s is drawn
        clock[0] = 1000.0 + step / 10
        progress(f"reading {step}")
    progress.done()
    drawn = [p for p in err.getvalue().split("\r\033[K") if p]
    assert drawn == ["reading 0", "reading 5", "reading 10", "reading 15", "reading 20",
                     "reading 25"]
