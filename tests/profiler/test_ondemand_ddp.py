"""A 2-rank gloo torchrun job under ``rightsize run --on-demand``: one trigger, both ranks record
the same steps (agreed through torch.distributed's store), and the capture is one job."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from rightsize.rundir import trace_paths
from tests.profiler.ondemand_job import (
    captures,
    finish,
    listening,
    profiler_steps,
    rightsize,
    start_run,
    wait_for,
    write_job,
)

pytest.importorskip("torch")


@pytest.mark.slow  # the one end-to-end test of a multi-rank capture
def test_both_ranks_record_the_same_steps(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    write_job(tmp_path)
    env = dict(os.environ, TMPDIR=str(tmp_path))  # torchrun's torchelastic_* folder
    proc = start_run(tmp_path, "--", torchrun, "--nproc-per-node", "2", "job.py", "--ddp",
                     env=env)
    run = tmp_path / "run"
    wait_for(lambda: listening(run, processes=2), "both ranks to listen")
    res = rightsize("trigger", "run", "--steps", "4", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    finish(proc, tmp_path)
    (manifest,) = captures(run)
    cap = manifest["capture"]
    assert cap["agreed_by"] == "store" and cap["same_steps"] is True
    start = cap["start_step"]
    assert sorted((r["rank"], r["first_step"], r["recorded_steps"]) for r in cap["ranks"]) == \
        [(0, start, 4), (1, start, 4)]
    cap_dir = run / "captures" / cap["id"]
    traces = trace_paths(cap_dir)
    assert [t.name.split(".")[0] for t in traces] == ["rank0", "rank1"]
    for trace in traces:
        assert profiler_steps(trace) == [start, start + 1, start + 2, start + 3]
    job = json.loads((cap_dir / "analysis.json").read_text())["job"]
    assert (job["world_size"], job["rank_count"], job["backend"]) == (2, 2, "gloo")
    assert [r["steps"] for r in job["ranks"]] == [4, 4]
    assert "on 2 rank(s)" in res.stderr
