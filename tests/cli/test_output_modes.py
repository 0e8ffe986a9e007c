"""Outputs are readable by others as any file the user writes: 0666 & ~umask (0644 under the
usual umask 022), not mkstemp's 0600."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.tracebuilder import two_step_trace


def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    trace = two_step_trace().write(tmp_path / "t.json")
    old = os.umask(0o022)
    try:
        res = subprocess.run([sys.executable, "-m", "rightsize", "analyze", str(trace),
                              "--format", "json", "-o", str(tmp_path / "a.json")],
                             cwd=tmp_path, capture_output=True, text=True, check=False)
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a.report.html").stat().st_mode & 0o777 == 0o644
