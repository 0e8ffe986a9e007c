"""`fleet scan --engine ray` on a real local Ray cluster gives the table the local engine gives.

The cluster is started by this test with Ray's own CLI, ``ray start --head --block
--node-ip-address 127.0.0.1 --port <free>``, in its own process group, and stopped by that
process's PID (SIGTERM: ``--block`` stops the GCS and raylet it started; SIGKILL of the group if
it has not within 60 s). ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps Ray on the loopback
address: with it set to Ray's default on Linux, Ray replaces 127.0.0.1 by the machine's
routable address. Skips when Ray is not installed (``pip install 'rightsize[ray]'``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from rightsize.fleet.table import FleetTable
from tests.conftest import cli
from tests.fleet.jobs import bad_inputs, fleet, trace, write

pytest.importorskip("ray", reason="Ray is not installed (pip install 'rightsize[ray]')")

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp")  # short: Ray's socket paths
    ray = Path(sys.executable).with_name("ray")
    proc = subprocess.Popen(
        [str(ray), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
         "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", temp],
        env=dict(os.environ, **LOOPBACK_ENV), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"ray start exited: {proc.stderr.read()[-2000:]}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray head did not listen within 90 s"
                time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        shutil.rmtree(temp, ignore_errors=True)


COMPARED = ["key", "job", "kind", "paths", "status", "reason", "recorded_at", "gpu", "gpus",
            "steps", "step_ms", "bound", "confidence", "sizing_verdict", "recommended_gpu",
            "usd_per_1k_steps", "rules", "document"]


def test_ray_engine_gives_the_same_table_as_the_local_one(tmp_path, ray_address):
    fleet(tmp_path / "in", 6)
    bad_inputs(tmp_path / "in" / "bad")
    for r in (0, 1):
        write(tmp_path / "in" / "ranks" / f"rank{r}.json", trace(rank=r, world=2))
    local = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "local",
                "--workers", "2")
    assert local.returncode == 0, local.stderr
    res = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "ray", "--engine", "ray",
              "--ray-address", ray_address, env=LOOPBACK_ENV, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "10 jobs found, 0 already in the table, 10 analyzed" in res.stderr
    a = FleetTable(tmp_path / "local").rows().collect().select(COMPARED).sort("key")
    b = FleetTable(tmp_path / "ray").rows().collect().select(COMPARED).sort("key")
    assert a.height == 10 and a.equals(b)
    assert a["status"].value_counts().sort("status").rows() == [("bad-input", 3), ("ok", 7)]
    assert a.filter(pl.col("kind") == "ranks")["gpus"].to_list() == [2]
    # the same documents, byte for byte
    for doc in a["document"].drop_nulls():
        assert (tmp_path / "local" / doc).read_bytes() == (tmp_path / "ray" / doc).read_bytes()
    # a re-scan on Ray analyzes nothing
    again = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "ray", "--engine", "ray",
                "--ray-address", ray_address, env=LOOPBACK_ENV, timeout=600)
    assert "10 jobs found, 10 already in the table, 0 analyzed" in again.stderr


def test_ray_address_needs_the_ray_engine(tmp_path):
    fleet(tmp_path / "in", 1)
    res = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "t", "--ray-address",
              "127.0.0.1:1")
    assert res.returncode == 2 and "--ray-address needs --engine ray" in res.stderr
