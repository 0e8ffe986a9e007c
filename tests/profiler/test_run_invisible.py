"""``rightsize run`` leaves the job untouched: same dynamo graphs, same stdout and stderr.

A ``torch.compile``'d model (training with AdamW, and inference in the time window) runs once
plainly and once under ``rightsize run``; the job writes dynamo's graph-break count to a file.
The graph breaks must be equal (0), and the job's streams identical once the wrapper's own
``rightsize:`` lines are taken out of stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

JOB = """\
import sys, warnings, torch
from torch._dynamo.utils import counters
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
compiled = torch.compile(model, backend="eager")
x = torch.randn(16, 32)
train = sys.argv[2] == "train"
opt = torch.optim.AdamW(model.parameters()) if train else None
for i in range(int(sys.argv[3])):
    if train:
        loss = compiled(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    else:
        with torch.no_grad():
            loss = compiled(x).sum()
    print(f"step {i} loss {loss.item():.4f}", flush=True)
warnings.warn("the job's own warning")
with open(sys.argv[1], "w") as fh:
    fh.write(str(sum(counters["graph_break"].values())))
"""


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _job_stderr(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("rightsize:")]


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
@pytest.mark.parametrize(("mode", "steps", "flags"), [
    ("train", "8", []),
    ("infer", "40", ["--window-delay-s", "0", "--window-s", "0.2"]),
    ("train", "8", ["--on-demand"]),  # listening only: no trace, the same job
])
def test_compiled_job_is_unchanged_under_run(
    tmp_path: Path, mode: str, steps: str, flags: list[str]
) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    plain = _run([sys.executable, str(script), "plain.txt", mode, steps], tmp_path)
    assert plain.returncode == 0, plain.stderr
    wrapped = _run([sys.executable, "-m", "rightsize", "run", "--out", str(tmp_path / "run"),
                    "--no-report", "--no-gpu-samples", *flags,
                    str(script), "wrapped.txt", mode, steps], tmp_path)
    assert wrapped.returncode == 0, wrapped.stderr
    assert (tmp_path / "plain.txt").read_text() == "0"
    assert (tmp_path / "wrapped.txt").read_text() == "0"  # no graph break from the hooks
    assert wrapped.stdout == plain.stdout
    assert _job_stderr(wrapped.stderr) == _job_stderr(plain.stderr)
    assert "the job's own warning" in plain.stderr  # the job's own warnings still show
    traces = list((tmp_path / "run" / "traces").glob("*.pt.trace.json.gz"))
    assert len(traces) == (0 if "--on-demand" in flags else 1)  # and it was profiled
