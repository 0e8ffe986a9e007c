"""Every ``next:`` command that ``run``, ``analyze`` and ``report`` print works when pasted.

The ``rightsize ...`` lines are run as printed (split as a shell would, no quoting needed for
these temporary paths) and must exit 0; an ``xdg-open``/``open`` line must name a file that
exists.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tracebuilder import two_step_trace

REPO = Path(__file__).resolve().parents[2]


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "rightsize", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=300)


def next_commands(output: str) -> list[list[str]]:
    """The commands after ``next:`` and on the indented lines that follow it."""
    found: list[list[str]] = []
    taking = False
    for raw in output.splitlines():
        line = raw.removeprefix("rightsize: ")
        if line.startswith("next: "):
            taking = True
            line = line.removeprefix("next: ")
        elif not (taking and line.startswith("      ")):
            taking = False
            continue
        found.append(shlex.split(line.strip()))
    return found


def check_pasted(output: str, cwd: Path) -> int:
    commands = next_commands(output)
    assert commands, output
    for argv in commands:
        if argv[0] in ("xdg-open", "open"):
            assert (cwd / argv[1]).is_file(), argv
            continue
        assert argv[0] == "rightsize", argv
        res = _cli(argv[1:], cwd)
        assert res.returncode == 0, (argv, res.stderr)
    return len(commands)


def test_analyze_and_report_next_commands_work(tmp_path: Path) -> None:
    trace = two_step_trace().write(tmp_path / "two.pt.trace.json")
    res = _cli(["analyze", str(trace)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert check_pasted(res.stderr, tmp_path) == 2
    res = _cli(["report", str(trace)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert check_pasted(res.stdout + res.stderr, tmp_path) == 1


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
def test_run_next_commands_work_twice(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    res = _cli(["run", "--out", str(tmp_path / "run"), "--no-gpu-samples",
                str(REPO / "samples" / "train_compute.py"), "--steps", "6"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "run" / "report.html").is_file()
    assert check_pasted(res.stderr, tmp_path) == 2  # analyze RUN --format text; report RUN
    assert check_pasted(res.stderr, tmp_path) == 2  # report RUN again: re-rendered in place


def test_run_dir_copy_reports_in_place(tmp_path: Path) -> None:
    runs = sorted(p for p in (REPO / "samples" / "runs").glob("*") if p.is_dir())
    if not runs:
        pytest.skip("no recorded sample runs under samples/runs")
    run = shutil.copytree(runs[0], tmp_path / "run")
    for _ in range(2):
        res = _cli(["report", str(run)], tmp_path)
        assert res.returncode == 0, res.stderr
        assert check_pasted(res.stdout + res.stderr, tmp_path) == 1


def test_run_without_a_trace_prints_no_command_that_would_fail(tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("print('hi')\n")  # never imports torch: no trace, no GPU samples here
    res = _cli(["run", "--out", str(tmp_path / "run"), "--no-gpu-samples", str(script)],
               tmp_path)
    assert res.returncode == 0, res.stderr
    assert next_commands(res.stderr) == []  # analyze/report of it would both fail
    assert "rightsize: nothing to analyze: no Python process of the job imported torch" \
        in res.stderr
