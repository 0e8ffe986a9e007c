"""A real ``rightsize serve`` on loopback for the tests: started in a subprocess on a free port,
waited for on /healthz, stopped (SIGTERM, then kill) at the end. Plus a stdlib HTTP client."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPResponse
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30
ANALYSIS_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


@dataclass
class Server:
    data_dir: Path
    args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[str] | None = None
    log: Path = Path()
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        # output to a file, not a pipe: worker processes inherit it and may outlive a kill
        self.log = self.data_dir.parent / f"{self.data_dir.name}-{self.port}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rightsize", "serve", "--port", str(self.port),
                 "--data-dir", str(self.data_dir), "--workers", "1", *self.args],
                stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log.read_text()}")
            try:
                if self.request("GET", "/healthz").status == 200:
                    return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError("server did not start")

    def stop(self) -> str:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        return self.log.read_text()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        conn = HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers={**self.headers, **(headers or {})})
            resp: HTTPResponse = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def upload(self, *files: tuple[str, bytes], headers: dict[str, str] | None = None) -> Reply:
        body, content_type = multipart(files)
        return self.request("POST", "/api/runs", body,
                            {"Content-Type": content_type, **(headers or {})})

    def wait(self, run_id: str, timeout_s: float = ANALYSIS_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.request("GET", f"/api/runs/{run_id}").json()
            if run["status"] in ("done", "failed"):
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {run_id} not finished after {timeout_s} s")


def multipart(files: tuple[tuple[str, bytes], ...], field_name: str = "file") -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, data in files:
        parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field_name}\"; "
                      f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                      .encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), \
        f"multipart/form-data; boundary={boundary}"


