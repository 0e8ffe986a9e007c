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
    # An analysis' deadline (its CPU limit: this on every CPU); None: sized from the bytes the
    # readers parse (jobs.limits_for)
    max_analysis_s: float | None = None
    # CPU seconds the inflate check of one upload may take (gzipcheck.py); None: sized from
    # the cap (check_cpu_for)
    check_cpu_s: float | None = None
    max_concurrent_uploads: int = 16  # open upload requests; beyond -> 503 + Retry-After
    max_queued_runs: int = 64  # queued + running analyses; beyond -> 503 + Retry-After
    retry_after_s: int = 5
    # Free space an upload needs beyond twice its declared length: room for its run's
    # analysis.json and report.html too. 507 below it.
    min_free_bytes: int = 256 * MIB
    # Deadlines (guard.py): a request head must be complete within timeout_s; each timeout_s
    # window of a body must bring min_upload_bytes_per_s x timeout_s bytes (a slow link at
    # 16 KiB/s passes; one byte every few seconds does not); an idle keep-alive connection is
    # closed after timeout_s.
    timeout_s: float = 10.0
    min_upload_bytes_per_s: int = 16 * 1024
    # ... and each window of a response must be taken by the client at this rate (a client
    # reading a byte every few seconds held a whole 72 MB document in the server's buffers)
    min_read_bytes_per_s: int = 16 * 1024
    # Open connections beyond which a new one gets 503 at once: below the descriptor limit
    # (the CLI derives it from RLIMIT_NOFILE), so accept() never fails for lack of descriptors.
    max_connections: int = 1000
    backlog: int = 1024  # listen() backlog, which is also how many accept() takes at once
    grace_s: float = 10.0  # SIGTERM: how long open requests may take to finish
    # Proxy mode: peers whose X-Forwarded-Proto/For are believed, and the public URL the
    # proxy serves (its host and origin are accepted by the Host and CSRF checks).
    forwarded_allow_ips: str | None = None
    public_url: str | None = None
    # Jobs followed over time (following.py): a capture whose step is slower than its job's
    # previous capture by more than this is a regression (capture's own default, docs/captures.md),
    # and each regression is posted as JSON to the webhook when one is given.
    regression_pct: float = 10.0
    webhook_url: str | None = None

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
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


# The inflate check runs at several hundred MB/s (zlib, one core); its default budget leaves a
# tenfold margin over the cap's worth of inflating, and never less than CHECK_CPU_FLOOR_S.
CHECK_CPU_FLOOR_S = 10.0
CHECK_BYTES_PER_CPU_S = 32 * MIB


def check_cpu_for(config: ServeConfig) -> float:
    """CPU seconds one upload's inflate check may take."""
    if config.check_cpu_s is not None:
        return config.check_cpu_s
    return max(CHECK_CPU_FLOOR_S, config.max_upload_bytes / CHECK_BYTES_PER_CPU_S)


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


MIN_TOKEN_CHARS = 16


def check_token(token: str) -> str | None:
    """Why ``token`` is too weak to guard the server, or None when it will do."""
    if token != token.strip() or any(c.isspace() for c in token):
        return "a token must not contain white space"
    if len(token) < MIN_TOKEN_CHARS:
        return (f"a token needs at least {MIN_TOKEN_CHARS} characters (e.g. python -c "
                "'import secrets; print(secrets.token_urlsafe(24))')")
    if len(set(token)) < 6:
        return "a token needs at least 6 different characters"
    return None


def listen_backlog(nofile: int) -> int:
    """The listen() backlog under a descriptor limit of ``nofile``. asyncio accepts up to this
    many connections in one go, before any is looked at, so it is kept well under the limit."""
    return max(16, min(1024, nofile // 16))


def max_connections_for(nofile: int, reserve: int = 64, cap: int = 4096) -> int:
    """Connections to allow under a descriptor limit of ``nofile``: ``reserve`` descriptors
    stay for the index, the blobs being written, the workers' pipes and the logs, and two
    accept() bursts (:func:`listen_backlog`) for connections not yet refused."""
    return max(8, min(cap, nofile - reserve - 2 * listen_backlog(nofile)))


def resolve_token(host: str, token: str | None) -> tuple[str | None, bool]:
    """The token the server requires, and whether it was generated here.

    Loopback binds need none unless one is given; any other bind address always has one.
    """
    if token:
        return token, False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(24), True
