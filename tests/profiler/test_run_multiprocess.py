"""``rightsize run`` reaches every process of a job: torchrun ranks, spawned DataLoader workers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rightsize.rundir import read_manifest, trace_paths

DDP = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for i in range(7):
    opt.zero_grad(); m(torch.randn(4, 16)).sum().backward(); opt.step()
dist.destroy_process_group()
"""

SPAWN_LOADER = """
import time, torch
from torch.utils.data import DataLoader, Dataset
class Slow(Dataset):
    def __len__(self): return 48
    def __getitem__(self, i):
        time.sleep(0.01); return torch.randn(16)
if __name__ == "__main__":
    m = torch.nn.Linear(16, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for x in DataLoader(Slow(), batch_size=8, num_workers=2, multiprocessing_context="spawn"):
        opt.zero_grad(); m(x).sum().backward(); opt.step()
"""


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rightsize", "run", "--out", "run", "--no-report", *args]
    # torchrun leaves a torchelastic_* folder in $TMPDIR: keep it in the test's own directory
    env = dict(os.environ, TMPDIR=str(cwd))
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
def test_torchrun_gives_one_trace_per_rank_and_skips_the_launcher(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    (tmp_path / "ddp.py").write_text(DDP)
    res = run(["--", torchrun, "--nproc-per-node", "2", "ddp.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    manifest = read_manifest(tmp_path / "run")
    assert manifest["command"]["kind"] == "command" and manifest["command"]["name"] == "ddp"
    procs = manifest["collectors"]["profiler"]["processes"]
    launcher = [p for p in procs if p["skipped"]]
    ranks = sorted((p["rank"], p["step_detection"]) for p in procs if not p["skipped"])
    assert ranks == [(0, "optimizer"), (1, "optimizer")]
    assert [p["skipped"] for p in launcher] == ["launcher process (torchrun)"]
    names = [t.name.split(".")[0] for t in trace_paths(tmp_path / "run")]
    assert names == ["rank0", "rank1"]


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
def test_spawned_dataloader_workers_are_not_profiled(tmp_path: Path) -> None:
    (tmp_path / "loader.py").write_text(SPAWN_LOADER)
    res = run(["--sample-interval-s", "0.02", "loader.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    prof = read_manifest(tmp_path / "run")["collectors"]["profiler"]
    assert prof["dataloader_workers_seen"] == 2
    assert [p["step_detection"] for p in prof["processes"]] == ["optimizer"]
    assert len(trace_paths(tmp_path / "run")) == 1
