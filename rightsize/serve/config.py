"""The server's settings: one frozen value built by the CLI and read by every module.

Limits are named data with the reason for each default; sizes are bytes.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
TOKEN_COOKIE = "rightsize_token"


@dataclass(frozen=True, slots=True)
class ServeConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None  # required on every request but /healthz when set
    # One file's cap, on the bytes received and, for gzip, on the bytes it decompresses to:
    # the readers parse the decompressed text, so that is what costs memory.
    max_upload_bytes: int = 2048 * MIB
    max_files_per_run: int = 8  # a trace, its ncu CSV, a metrics log, with room for ranks
    workers: int = 2  # analysis processes; each holds one trace's frames in memory
    worker_memory_bytes: int | None = None  # RLIMIT_AS per worker when set
    max_concurrent_uploads: int = 16  # open upload requests; beyond -> 503 + Retry-After
    max_queued_runs: int = 64  # queued + running analyses; beyond -> 503 + Retry-After
    retry_after_s: int = 5

    @property
    def db_path(self) -> Path:
        return self.data_dir / "runs.sqlite"

    @property
    def blobs_dir(self) -> Path:
        return self.data_dir / "blobs"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def tmp_dir(self) -> Path:
        return self.data_dir / "tmp"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def resolve_token(host: str, token: str | None) -> tuple[str | None, bool]:
    """The token the server requires, and whether it was generated here.

    Loopback binds need none unless one is given; any other bind address always has one.
    """
    if token:
        return token, False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(24), True
