"""``rightsize.step()`` / ``rightsize.profile()``, and the cheap ``import rightsize``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rightsize.rundir import read_manifest, trace_paths

SCRIPT = """
import torch, rightsize
m = torch.nn.Linear(8, 8)
for i in range(3):
    m(torch.randn(2, 8)).sum().backward()  # before the block: not recorded
with rightsize.profile("out") as run_dir:
    for i in range(3):
        m(torch.randn(2, 8)).sum().backward()
        rightsize.step()
print(run_dir)
"""


def test_import_rightsize_is_cheap() -> None:
    code = (
        "import sys, rightsize; rightsize.step(); "
        "print(sorted(m for m in ('torch', 'polars', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
def test_profile_block_outside_rightsize_run(tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text(SCRIPT)
    res = subprocess.run(
        [sys.executable, "block.py"], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "out"
    manifest = read_manifest(tmp_path / "out")
    assert manifest["collectors"]["profiler"]["status"] == "collected"
    assert manifest["collectors"]["profiler"]["step_detection"] == "manual"
    assert manifest["collectors"]["nvml"]["status"] == "missing"
    (trace,) = trace_paths(tmp_path / "out")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert sum(e.get("name") == "aten::linear" for e in events) == 3


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
def test_step_drives_the_schedule_under_rightsize_run(tmp_path: Path) -> None:
    loop = (
        "import torch, rightsize\nm = torch.nn.Linear(8, 8)\n"
        "for i in range(8):\n    m(torch.randn(2, 8)).sum().backward()\n    rightsize.step()\n"
    )
    (tmp_path / "loop.py").write_text(loop)
    res = subprocess.run(
        [sys.executable, "-m", "rightsize", "run", "--out", "run", "--no-report", "loop.py"],
        check=False, cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    prof = read_manifest(tmp_path / "run")["collectors"]["profiler"]
    assert prof["step_detection"] == "manual"
    (trace,) = trace_paths(tmp_path / "run")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
