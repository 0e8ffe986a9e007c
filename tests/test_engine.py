"""The local engine: results by index, failures as rows, a dead worker as a row."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from rightsize.engine import EngineOptions, Failed, map_ordered, map_unordered
from rightsize.errors import RightsizeError
from tests.conftest import SAMPLES, cli


def square(x: int) -> int:
    if x == 3:
        raise ValueError("three\nis bad")
    return x * x


def die(x: int) -> int:
    if x == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


@pytest.mark.parametrize("workers", [1, 2])
def test_results_in_order_and_failures_as_rows(workers):
    out = map_ordered(square, list(range(6)), EngineOptions(workers=workers))
    assert out[:3] == [0, 1, 4] and out[4:] == [16, 25]
    assert out[3] == Failed(3, "ValueError", "three is bad")
    assert sorted(i for i, _ in map_unordered(square, [5, 6], EngineOptions(workers=2))) == [0, 1]


def test_a_killed_worker_is_a_failed_row_not_a_stopped_map():
    out = map_ordered(die, [0, 1, 2, 3], EngineOptions(workers=2))
    # the pool breaks with the worker; the others are run again, only input 1 fails
    assert out[0] == 0 and out[2:] == [2, 3]
    assert isinstance(out[1], Failed) and out[1].error == "WorkerDied"


def test_unknown_engine_and_empty_input():
    with pytest.raises(RightsizeError, match="unknown engine 'spark'"):
        map_ordered(square, [1], EngineOptions(engine="spark"))
    assert map_ordered(square, []) == []


def test_tasks_not_started_when_a_pool_breaks_run_in_a_fresh_one():
    # 2 workers take 4 tasks ahead; input 1 kills its worker while inputs 4.. wait their turn
    out = map_ordered(die, list(range(9)), EngineOptions(workers=2))
    assert [r for i, r in enumerate(out) if i != 1] == [0, 2, 3, 4, 5, 6, 7, 8]
    assert isinstance(out[1], Failed) and out[1].error == "WorkerDied"


def assigned_memory(x: int) -> float:
    """The memory Ray gave the task that runs this (bytes)."""
    import ray

    return float(ray.get_runtime_context().get_assigned_resources().get("memory", 0.0))


@pytest.mark.slow  # a local Ray starts and stops: about 20 s on the 2-core VM
def test_a_local_ray_keeps_its_state_out_of_home(tmp_path):
    """``--engine ray`` without an address starts a local Ray: its sessions and auth token go
    to a folder of its own, removed at exit, and nothing to HOME (Ray's default writes
    ``~/.ray/auth_token``, which a later ``ray start`` cluster picks up while its drivers,
    joining by address, do not: InvalidAuthToken)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'rightsize[ray]')")
    home = tmp_path / "home"
    home.mkdir()
    before = set(Path("/tmp").glob("rs-ray-*"))
    res = cli("analyze", SAMPLES / "runs" / "train_dataloader-cpu", "--engine", "ray",
              "--no-report", "--format", "json", "-q", cwd=tmp_path, timeout=300,
              env={"HOME": str(home)})
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["diagnosis"]["bound"] == "dataloader"
    assert list(home.rglob("*")) == []
    assert set(Path("/tmp").glob("rs-ray-*")) == before  # the private folder went at exit
    assert "Token authentication" not in res.stderr
