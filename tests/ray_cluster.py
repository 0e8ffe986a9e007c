"""A real two-node Ray cluster on this machine, on 127.0.0.1 only, for the Ray engine's tests.

``ray start --head --node-ip-address 127.0.0.1`` and a second ``ray start --address
127.0.0.1:PORT``, each with one CPU and its own temporary directory, stopped at the end by the
PIDs of the processes that name those directories (and their children): never ``ray stop``,
which stops every Ray on the machine.

Loopback: Ray turns ``127.0.0.1`` into the machine's outward address (``resolve_ip_for_localhost``)
unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (then it keeps the loopback address), and that
setting also refuses to start a second node. So the head and every driver (:data:`LOOPBACK_ENV`)
run with it, and the second node starts through ``ray.scripts.scripts.main`` with the
loopback address kept as given. :func:`cluster` checks that both nodes registered as 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
START_TIMEOUT_S = 90
SECOND_NODE = (
    "import sys\n"
    "import ray._private.services as services\n"
    "services.resolve_ip_for_localhost = lambda host: host  # keep 127.0.0.1\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv = ['ray', *sys.argv[1:]]\n"
    "main()\n"
)


def ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def cluster(memory_bytes: int = 2_000_000_000) -> Iterator[str]:
    """Start the two nodes (``memory_bytes`` of Ray memory each); yield ``127.0.0.1:PORT``."""
    dirs = [tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp") for _ in range(2)]  # short: sockets
    port = free_port()
    env = {**os.environ, **LOOPBACK_ENV}
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "0",
              "--memory", str(memory_bytes), "--disable-usage-stats"]
    try:
        _start([ray_cli(), "start", "--head", "--port", str(port), "--include-dashboard",
                "false", "--temp-dir", dirs[0], *common], env)
        second = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        _start([sys.executable, "-c", SECOND_NODE, "start", "--address", f"127.0.0.1:{port}",
                "--temp-dir", dirs[1], *common], second)
        address = f"127.0.0.1:{port}"
        _check_nodes(address, env)
        yield address
    finally:
        stop(dirs)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def _start(cmd: list[str], env: dict[str, str]) -> None:
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S,
                         check=False, cwd="/tmp")
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed: {res.stderr[-2000:]}")


def _check_nodes(address: str, env: dict[str, str]) -> None:
    """Both nodes alive and registered on 127.0.0.1 (waits up to 30 s for the second)."""
    code = ("import json, ray\n"
            f"ray.init(address={address!r}, log_to_driver=False)\n"
            "print(json.dumps([n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']]))\n")
    deadline = time.monotonic() + 30
    while True:
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60, check=False, cwd="/tmp")
        nodes = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
        if nodes == '["127.0.0.1", "127.0.0.1"]':
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Ray nodes are {nodes or res.stderr[-1000:]}, not two on "
                               "127.0.0.1")
        time.sleep(1)


def stop(dirs: list[str]) -> None:
    """Terminate the processes started for ``dirs`` (by PID), then kill what is left."""
    procs: set[psutil.Process] = set()
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if any(d in cmd for d in dirs):
            procs.add(p)
    for p in list(procs):
        try:
            procs.update(p.children(recursive=True))
        except psutil.Error:
            pass
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(list(procs), timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
