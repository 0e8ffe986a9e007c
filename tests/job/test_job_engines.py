"""``rightsize analyze`` of many ranks on the engine: workers analyze the traces, the driver
reduces their parts, and the document is the one made in this process, on a local
pool and on a real two-node Ray cluster on 127.0.0.1 (tests/ray_cluster.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rightsize.engine import EngineOptions
from rightsize.pipeline import Options, analyze_document
from tests.conftest import REPO, cli, shared_path
from tests.job.steps_job import write_job


def test_the_pool_gives_the_in_process_document(tmp_path):
    d = write_job(tmp_path / "job", ranks=4, steps=6)
    whole = analyze_document([d]).to_json()
    assert analyze_document([d], run_on=EngineOptions(workers=2)).to_json() == whole
    assert [s["rank"] for s in whole["job"]["stragglers"]] == [3]
    windowed = Options(steps=(1, 3))
    assert analyze_document([d], windowed, run_on=EngineOptions(workers=2)).to_json() == \
        analyze_document([d], windowed).to_json()


@pytest.mark.shared
def test_the_pool_gives_the_in_process_document_on_the_dlrm_job():
    d = shared_path("traces", "ranks", "param-dlrm-8rank-v100")
    assert analyze_document([d], run_on=EngineOptions(workers=2)).to_json() == \
        analyze_document([d]).to_json()


def test_a_bad_rank_is_one_line_naming_it(tmp_path):
    d = write_job(tmp_path / "job", ranks=2, steps=2)
    (d / "rank1.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "ts": ')
    res = cli("analyze", d, "--workers", "2", "-q", "--no-report", cwd=tmp_path)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith(f"rightsize: error: {d / 'rank1.pt.trace.json'}: truncated")


def test_engine_options_are_checked(tmp_path):
    d = write_job(tmp_path / "job", ranks=2, steps=2)
    for args, why in ((["--ray-address", "auto"], "--ray-address needs --engine ray"),
                      (["--engine", "ray", "--workers", "2"], "--workers is for the local"),
                      (["--steps", "5-2"], "A-B with 0 <= A <= B"),
                      (["--steps", "x"], "say A-B"),
                      (["--memory-budget", "10M"], "less than 100 MB"),
                      (["--memory-budget", "lots"], "not a size")):
        res = cli("analyze", d, "-q", "--no-report", *args, cwd=tmp_path)
        assert res.returncode == 2 and why in res.stderr, (args, res.stderr)
    res = cli("analyze", d, "-q", "--no-report", "--steps", "8-9", cwd=tmp_path)
    assert res.returncode == 1 and "no step numbered 8-9 (--steps); its steps: 0-1" in res.stderr


def test_ray_and_local_engines_give_the_same_document(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'rightsize[ray]')")
    from tests.ray_cluster import LOOPBACK_ENV, cluster, ray_cli

    if not Path(ray_cli()).exists():
        pytest.skip("Ray's `ray` command is not installed beside this Python")

    d = write_job(tmp_path / "job", ranks=4, steps=6)
    common = ["--format", "json", "-q", "--no-report", "--steps", "1-4"]
    local = cli("analyze", d, *common, "--workers", "2", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    with cluster() as address:
        ray = cli("analyze", d, *common, "--engine", "ray", "--ray-address", address,
                  cwd=tmp_path, env=LOOPBACK_ENV, timeout=120)
        down = cli("analyze", d, "-q", "--no-report", "--engine", "ray", "--ray-address",
                   "127.0.0.1:1", cwd=tmp_path, env=LOOPBACK_ENV, timeout=120)
        # each task asks its own memory, capped at the largest node's (2 GB here): never a
        # request no node can grant (it would wait forever)
        memory = subprocess.run(
            [sys.executable, "-c", ASSIGNED, address], cwd=REPO, capture_output=True, text=True,
            env=dict(os.environ, **LOOPBACK_ENV), timeout=120, check=False)
    assert ray.returncode == 0, ray.stderr[-3000:]
    doc = json.loads(ray.stdout)
    assert doc == json.loads(local.stdout)
    assert doc["steps"]["names"] == [f"ProfilerStep#{s}" for s in (1, 2, 3, 4)]
    assert [s["rank"] for s in doc["job"]["stragglers"]] == [3]
    assert down.returncode == 1 and len(down.stderr.strip().splitlines()) == 1
    assert "cannot join the Ray cluster at 127.0.0.1:1" in down.stderr
    assert memory.stdout.strip().splitlines()[-1] == "[2000000000.0, 500000000.0, 0.0]", \
        memory.stderr[-2000:]


ASSIGNED = """
import sys
from rightsize.engine import EngineOptions, map_ordered
from tests.test_engine import assigned_memory
print(map_ordered(assigned_memory, [0, 1, 2], EngineOptions(
    engine="ray", address=sys.argv[1], item_memory_bytes=(10**10, 5 * 10**8, 0))))
"""
