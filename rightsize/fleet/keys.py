"""Content keys of jobs, and the cache that spares a re-scan from reading unchanged files.

A file's digest is the SHA-256 of its bytes. A job's key is the SHA-256 of its kind and its
files' digests (a run directory's with each file's path inside it, since its manifest and traces
play different parts; a job of ranks or one file by content alone, so a copy of a trace elsewhere
is the same job). A changed byte is a new key, hence a new analysis; the same bytes never are.

:class:`FileCache` remembers, per file (by real path), the size, modification time and inode it
had when it was last read, with its digest and probe (:func:`rightsize.fleet.discover.probe`).
A file whose three still agree is not read again. Stored in the table's ``cache/files.parquet``,
written whole or not at all; losing it costs only reading the files again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import polars as pl

from rightsize.fleet.discover import Job, Probe, probe

CHUNK = 1 << 20
_CACHE_SCHEMA = {"path": pl.String, "size": pl.Int64, "mtime_ns": pl.Int64, "ino": pl.Int64,
                 "sha256": pl.String, "reader": pl.String, "problem": pl.String,
                 "rank": pl.Int64, "world_size": pl.Int64, "backend": pl.String,
                 "devices": pl.String, "start_us": pl.Float64}


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


class FileCache:
    """Digests and probes by real path, valid while size, mtime and inode are unchanged."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._rows: dict[str, dict[str, object]] = {}
        self.read = 0  # files whose bytes were read this time (not from the cache)
        if path is not None and path.is_file():
            try:
                cached = pl.read_parquet(path)
                if set(cached.columns) != set(_CACHE_SCHEMA):
                    cached = pl.DataFrame(schema=_CACHE_SCHEMA)  # another version's: read again
                for row in cached.iter_rows(named=True):
                    self._rows[str(row["path"])] = row
            except (OSError, pl.exceptions.PolarsError):
                self._rows = {}  # a damaged cache is only a slower scan

    def _entry(self, f: str | Path) -> dict[str, object]:
        real = os.path.realpath(f)
        try:
            st = os.stat(real)
        except OSError as exc:  # gone since it was found: its job's analysis says so
            return self._unreadable(real, exc, -1, 0, 0)
        row = self._rows.get(real)
        if row is not None and (row["size"], row["mtime_ns"], row["ino"]) == (
                st.st_size, st.st_mtime_ns, st.st_ino):
            return row
        self.read += 1
        try:
            digest = file_digest(real)
        except OSError as exc:
            return self._unreadable(real, exc, st.st_size, st.st_mtime_ns, st.st_ino)
        pr = probe(Path(real))
        row = {"path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino,
               "sha256": digest, "reader": pr.reader, "problem": pr.problem,
               "rank": pr.rank, "world_size": pr.world_size, "backend": pr.backend,
               "devices": pr.devices, "start_us": pr.start_us}
        self._rows[real] = row
        return row

    @staticmethod
    def _unreadable(real: str, exc: OSError, size: int, mtime_ns: int,
                    ino: int) -> dict[str, object]:
        """A file that cannot be read still gets a key (of its path and state, not cached), so
        its job becomes a bad-input row rather than stopping the scan."""
        state = f"unreadable\0{real}\0{size}\0{mtime_ns}\0{ino}".encode()
        return {"path": real, "size": size, "mtime_ns": mtime_ns, "ino": ino,
                "sha256": hashlib.sha256(state).hexdigest(), "reader": None,
                "problem": f"cannot read: {exc.strerror or exc}", "rank": None,
                "world_size": None, "backend": None, "devices": None, "start_us": None}

    def digest(self, f: str | Path) -> str:
        return str(self._entry(f)["sha256"])

    def get(self, key: str) -> dict[str, object] | None:
        """The cached row of ``key`` (an object-store URL: :mod:`rightsize.fleet.remote`
        decides whether it still holds)."""
        return self._rows.get(key)

    def put(self, row: dict[str, object]) -> None:
        self._rows[str(row["path"])] = row

    @staticmethod
    def row(path: str, size: int, mtime_ns: int, sha256: str, pr: Probe) -> dict[str, object]:
        """A cache row of a file other than a local one (its probe as read elsewhere)."""
        return {"path": path, "size": size, "mtime_ns": mtime_ns, "ino": 0, "sha256": sha256,
                "reader": pr.reader, "problem": pr.problem, "rank": pr.rank,
                "world_size": pr.world_size, "backend": pr.backend, "devices": pr.devices,
                "start_us": pr.start_us}

    def probe(self, f: str | Path) -> Probe:
        return probe_of_row(self._entry(f))

    def save(self) -> None:
        if self.path is None:
            return
        from rightsize.fleet.table import write_parquet_atomic

        frame = pl.DataFrame(list(self._rows.values()), schema=_CACHE_SCHEMA)
        write_parquet_atomic(frame, self.path)


def probe_of_row(row: dict[str, object]) -> Probe:
    """The :class:`Probe` a cache row holds."""

    def opt_int(k: str) -> int | None:
        v = row[k]
        return v if isinstance(v, int) else None

    def opt_str(k: str) -> str | None:
        v = row.get(k)
        return v if isinstance(v, str) else None

    start = row.get("start_us")
    return Probe(opt_str("reader"), opt_str("problem"), opt_int("rank"),
                 opt_int("world_size"), opt_str("backend"), opt_str("devices"),
                 start if isinstance(start, float) else None)


class Digests(Protocol):
    """What keys a job's files: :class:`FileCache` (local files), or
    :class:`rightsize.fleet.remote.RemoteFiles` (object-store URLs)."""

    def digest(self, f: str) -> str: ...


def job_key(job: Job, digest: Digests) -> str:
    """The job's content key (see the module docstring)."""
    h = hashlib.sha256(f"rightsize-fleet-job\0{job.kind}\0".encode())
    if job.kind == "run":
        root = job.paths[0]
        for f in sorted(job.files):
            h.update(f"{_inside(f, root)}\0{digest.digest(f)}\n".encode())
        return h.hexdigest()
    return content_key(job.kind, (digest.digest(f) for f in job.files))


def _inside(f: str, root: str) -> str:
    """``f``'s path inside the run directory ``root`` (a URL's: what follows ``root/``)."""
    if "://" in root and f.startswith(root.rstrip("/") + "/"):
        return f[len(root.rstrip("/")) + 1:]
    return os.path.relpath(f, root)


def content_key(kind: str, digests: Iterable[str]) -> str:
    """The key of a job of ``kind`` that is its files' content alone (not a run directory):
    the same files' SHA-256s, in any order, give the same key wherever they are found or
    uploaded (``rightsize serve`` keys its uploads this way)."""
    h = hashlib.sha256(f"rightsize-fleet-job\0{kind}\0".encode())
    for d in sorted(digests):
        h.update(f"{d}\n".encode())
    return h.hexdigest()
