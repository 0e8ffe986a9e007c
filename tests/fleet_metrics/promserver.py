"""A real Prometheus for the tests: Debian's ``prometheus`` and ``promtool`` on 127.0.0.1.

:func:`openmetrics` writes series as OpenMetrics text, :func:`backfill` turns it into TSDB
blocks with ``promtool tsdb create-blocks-from openmetrics``, and :func:`serve` starts
``prometheus`` on a free loopback port over those blocks (retention long enough for old
timestamps), waits until it is ready, and stops it by its PID. Tests skip, saying why, only
where the binaries are absent.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

READY_TIMEOUT_S = 90.0
Series = tuple[str, Mapping[str, str], Sequence[tuple[float, float]]]


def binaries() -> tuple[str, str]:
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    if not prom or not tool:
        pytest.skip("Debian's prometheus/promtool are not installed (./dev test installs them "
                    "as root: apt-get install prometheus)")
    return prom, tool


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def openmetrics(series: Iterable[Series], path: Path) -> Path:
    """Series grouped by metric name (OpenMetrics wants a family's samples together)."""
    by_name: dict[str, list[Series]] = {}
    for s in series:
        by_name.setdefault(s[0], []).append(s)
    with path.open("w") as fh:
        for name, items in by_name.items():
            fh.write(f"# TYPE {name} gauge\n")
            for _, labels, points in items:
                lab = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
                head = f"{name}{{{lab}}} " if lab else f"{name} "
                fh.writelines(f"{head}{v!r} {t:.3f}\n" for t, v in points
                              if math.isfinite(v))
        fh.write("# EOF\n")
    return path


def backfill(text_file: Path, data_dir: Path, timeout_s: float = 600) -> None:
    _, tool = binaries()
    data_dir.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([tool, "tsdb", "create-blocks-from", "openmetrics", "-q",
                          str(text_file), str(data_dir)], capture_output=True, text=True,
                         timeout=timeout_s, check=False)
    assert out.returncode == 0, out.stderr[-2000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(data_dir: Path, log: Path, extra: Sequence[str] = ()) -> Iterator[str]:
    """Prometheus over ``data_dir`` on 127.0.0.1 (``extra`` flags added); yields its URL."""
    prom, _ = binaries()
    config = data_dir.parent / f"{data_dir.name}.prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [prom, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
             "--storage.tsdb.retention.time=36500d", f"--web.listen-address=127.0.0.1:{port}",
             *(() if any(f.startswith("--query.max-samples=") for f in extra)
               else ("--query.max-samples=200000000",)), "--log.level=warn", *extra],
            stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}: "
                                     f"{log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready in {READY_TIMEOUT_S:g} s")
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
