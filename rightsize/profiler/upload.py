"""Captures sent to a ``rightsize serve`` (``--upload URL``): queued on disk, sent by a thread.

Each finished capture becomes a queue entry ``<run_dir>/uploads/queue/<id>.json``: the server's
URL, the capture's trace files and the job's labels. A daemon thread of the ``rightsize run``
parent posts the oldest entry to ``URL/api/runs`` (multipart ``file`` fields streamed from
disk, the labels as query parameters, ``Authorization: Bearer $RIGHTSIZE_TOKEN`` when set) and
on an answer moves it to ``uploads/sent/<id>.json`` with the server's answer. A server that
cannot be reached, times out or answers 5xx, 408 or 429 is retried with exponential backoff
(1 s doubling to 60 s, ``Retry-After`` when it says more); any other 4xx is final:
``uploads/failed/<id>.json`` with the one-line error. The job never waits for any of it (it
is another process), and an entry leaves the queue only once the server has it, so captures
made while the server is down are sent when it is back; what is still queued when the run
ends (after ``wait_s``) stays on disk for ``rightsize upload RUN_DIR``.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError
from rightsize.rundir import read_json_file, trace_paths, write_json_atomic

UPLOADS_DIR = "uploads"
TOKEN_ENV = "RIGHTSIZE_TOKEN"
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
TIMEOUT_S = 60.0  # per connection attempt and per read of the answer
MAX_FILES = 8  # a rightsize serve takes at most 8 files per upload
_RETRY_STATUSES = (408, 429)


@dataclass(frozen=True, slots=True)
class Outcome:
    sent: bool  # the server has it (201, or 200 for the same files again)
    final: bool  # do not try again (sent, or refused for good)
    message: str  # the server's answer, or why it could not be reached
    retry_after_s: float | None = None


def check_url(url: str) -> str:
    """``http(s)://host[:port][/prefix]`` without a query; raises a one-line error otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise RightsizeError(f"--upload {url}: expected http(s)://HOST[:PORT] of a rightsize serve")
    return url.rstrip("/")


def enqueue(run_dir: Path, cap_dir: Path, url: str, labels: dict[str, Any]) -> Path:
    """Queue a finished capture for ``url``; returns the entry."""
    files = [str(p.resolve()) for p in trace_paths(cap_dir)]
    entry = {"id": cap_dir.name, "url": url, "files": files, "labels": labels,
             "queued_at": time.time(), "attempts": 0, "last_error": None}
    path = run_dir / UPLOADS_DIR / "queue" / f"{cap_dir.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, entry)
    return path


def queued(run_dir: Path) -> list[Path]:
    base = run_dir / UPLOADS_DIR / "queue"
    return sorted(base.glob("*.json")) if base.is_dir() else []


def send(entry: dict[str, Any], token: str | None) -> Outcome:
    """One attempt at posting ``entry``."""
    files = [Path(f) for f in entry.get("files") or [] if Path(f).is_file()]
    if not files:
        return Outcome(False, True, "no trace file of the capture is left to send")
    if len(files) > MAX_FILES:
        return Outcome(False, True, f"{len(files)} traces: a rightsize serve takes at most "
                                    f"{MAX_FILES} files per upload")
    parts = urllib.parse.urlsplit(entry["url"])
    query = urllib.parse.urlencode({k: str(v) for k, v in (entry.get("labels") or {}).items()
                                    if v is not None and str(v) != ""})
    path = f"{parts.path.rstrip('/')}/api/runs" + (f"?{query}" if query else "")
    boundary = f"rightsize-{uuid.uuid4().hex}"
    heads = [_part_head(boundary, f.name) for f in files]
    tail = f"--{boundary}--\r\n".encode()
    length = sum(len(h) + f.stat().st_size + 2 for h, f in zip(heads, files, strict=True))
    length += len(tail)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "", parts.port, timeout=TIMEOUT_S)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Content-Length", str(length))
        if token:
            conn.putheader("Authorization", f"Bearer {token}")
        conn.endheaders()
        for chunk in _body(heads, files, tail):
            conn.send(chunk)
        answer = conn.getresponse()
        body = answer.read(1 << 16).decode("utf-8", errors="replace")
        status = answer.status
        retry_after = answer.getheader("Retry-After")
    except (OSError, http.client.HTTPException) as exc:
        return Outcome(False, False, f"{entry['url']}: {exc.__class__.__name__}: {exc}")
    finally:
        conn.close()
    return _outcome(status, body, retry_after)


def _outcome(status: int, body: str, retry_after: str | None) -> Outcome:
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        doc = None
    message = (json.dumps(doc) if isinstance(doc, dict) else body.strip()[:300]) or f"HTTP {status}"
    if status in (200, 201):
        return Outcome(True, True, message)
    wait = float(retry_after) if retry_after and retry_after.isdigit() else None
    if status >= 500 or status in _RETRY_STATUSES:
        return Outcome(False, False, f"HTTP {status}: {message}", wait)
    return Outcome(False, True, f"HTTP {status}: {message}")


def _part_head(boundary: str, name: str) -> bytes:
    safe = name.replace('"', "_").replace("\r", "_").replace("\n", "_")
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{safe}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()


def _body(heads: list[bytes], files: list[Path], tail: bytes) -> Iterator[bytes]:
    for head, path in zip(heads, files, strict=True):
        yield head
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                yield chunk
        yield b"\r\n"
    yield tail


def settle(run_dir: Path, entry_path: Path, outcome: Outcome) -> None:
    """Record an attempt: sent or refused for good leaves the queue, else the entry counts it."""
    entry = read_json_file(entry_path) or {}
    entry["attempts"] = int(entry.get("attempts") or 0) + 1
    if outcome.final:
        folder = "sent" if outcome.sent else "failed"
        entry["answer" if outcome.sent else "error"] = outcome.message
        entry[f"{folder}_at"] = time.time()
        target = run_dir / UPLOADS_DIR / folder / entry_path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(target, entry)
        entry_path.unlink(missing_ok=True)
    else:
        entry["last_error"] = outcome.message
        write_json_atomic(entry_path, entry)


class Uploader:
    """The sending thread of one run (see the module docstring)."""

    def __init__(self, run_dir: Path, warn: Callable[[str], None],
                 token: str | None = None) -> None:
        self.run_dir = run_dir
        self._warn = warn
        self._token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._deadline_s: float | None = None
        self._thread = threading.Thread(target=self._loop, name="rightsize-upload", daemon=True)
        self.sent = 0
        self._said: set[str] = set()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """A capture was queued: try now rather than at the end of a backoff."""
        self._wake.set()

    def close(self, wait_s: float) -> int:
        """Give the queue ``wait_s`` more to empty; returns how many entries stay queued."""
        self._deadline_s = time.monotonic() + wait_s
        self._closing.set()
        self._wake.set()
        self._thread.join(wait_s + TIMEOUT_S + 1)
        return len(queued(self.run_dir))

    def _loop(self) -> None:
        backoff_s = FIRST_BACKOFF_S
        while True:
            entries = queued(self.run_dir)
            if self._closing.is_set() and (not entries or time.monotonic() >= (self._deadline_s or 0)):
                return
            if not entries:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            outcome = self._attempt(entries[0])
            if outcome is None or outcome.final:
                backoff_s = FIRST_BACKOFF_S
                continue
            wait_s = max(backoff_s, outcome.retry_after_s or 0.0)
            if self._closing.is_set():
                wait_s = min(wait_s, max((self._deadline_s or 0) - time.monotonic(), 0.0))
            self._wake.wait(wait_s)
            self._wake.clear()
            backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)

    def _attempt(self, path: Path) -> Outcome | None:
        entry = read_json_file(path)
        if not isinstance(entry, dict) or "url" not in entry:
            self._warn(f"upload queue entry {path} unreadable; left in place")
            path.rename(path.with_suffix(".unreadable"))
            return None
        outcome = send(entry, self._token)
        settle(self.run_dir, path, outcome)
        if outcome.sent:
            self.sent += 1
        elif outcome.final:
            self._warn(f"capture {entry.get('id')} not uploaded: {outcome.message}")
        elif outcome.message not in self._said:  # said once per distinct failure
            self._said.add(outcome.message)
            self._warn(f"upload of capture {entry.get('id')} will be retried: {outcome.message}")
        return outcome
