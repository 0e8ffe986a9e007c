"""A CPU training job for the on-demand tests, and the helpers that drive it from outside.

The job trains a small MLP and sleeps ``SLEEP_S`` each step (so steps last about a tenth of a
second even on a loaded machine), steps ``SLOW_S`` instead once the file ``slow`` exists in
its working directory (the injected slowdown), and ends when the file ``stop`` exists. With
``--ddp`` it is a gloo DDP job whose ranks agree on stopping through an all-reduce.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rightsize.rundir import read_json_file

JOB = """\
import os, sys, time, torch
ddp = "--ddp" in sys.argv
if ddp:
    import torch.distributed as dist
    dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
if ddp:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 64), torch.randint(0, 8, (16,))
steps = 0
while True:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    steps += 1
    time.sleep({slow_s} if os.path.exists("slow") else {sleep_s})
    stop = os.path.exists("stop")
    if ddp:
        flag = torch.tensor([float(stop)])
        dist.all_reduce(flag)
        stop = flag.item() > 0
    if stop:
        break
print("steps", steps, flush=True)
if ddp:
    dist.destroy_process_group()
"""
SLEEP_S = 0.05
SLOW_S = 0.4


def write_job(where: Path, sleep_s: float = SLEEP_S, slow_s: float = SLOW_S) -> Path:
    script = where / "job.py"
    script.write_text(JOB.format(sleep_s=sleep_s, slow_s=slow_s))
    return script


def rightsize(*args: str, cwd: Path, timeout_s: float = 240,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rightsize", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def start_run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``rightsize run --on-demand --out run ARGS`` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "rightsize", "run", "--on-demand", "--out", "run",
         "--no-gpu-samples", *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)


def wait_for(predicate: Any, what: str, timeout_s: float = 180) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def listening(run: Path, processes: int = 1) -> list[dict[str, Any]]:
    """The published step counts of the listening processes, once ``processes`` have stepped."""
    found = [read_json_file(p) for p in sorted((run / "procs").glob("*.steps"))]
    found = [d for d in found if isinstance(d, dict) and d.get("steps", 0) > 0]
    return found if len(found) >= processes else []


def finish(proc: subprocess.Popen[str], cwd: Path, timeout_s: float = 180) -> tuple[str, str]:
    (cwd / "stop").write_text("")
    out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err
    return out, err


def captures(run: Path) -> list[dict[str, Any]]:
    """The manifests of the finished captures, oldest first."""
    out = []
    for path in sorted((run / "captures").glob("*/manifest.json")):
        manifest = json.loads(path.read_text())
        if manifest.get("status") == "done":
            out.append(manifest)
    return out


def profiler_steps(trace: Path) -> list[int]:
    """The ``ProfilerStep#N`` numbers of a trace, in order."""
    import gzip

    doc = json.loads(gzip.decompress(trace.read_bytes()))
    names = [e["name"] for e in doc["traceEvents"]
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    return sorted(int(n.split("#")[1]) for n in names)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIGHTSIZE_")}
    return env | {"PYTHONPATH": os.environ.get("PYTHONPATH", "")} | extra
