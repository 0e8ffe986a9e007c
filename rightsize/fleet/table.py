"""The fleet table on disk: a Parquet dataset, one row per job, partitioned by recorded day.

Layout of a table folder (default ``./rightsize-fleet/``)::

    FLEET.json                          what this folder is, and its schema_version
    table/day=YYYY-MM-DD/*.parquet      the rows (Hive partitioning: DuckDB and polars read it)
    documents/ab/<key>.json.gz          each job's analysis document
    reports/<key>.html                  job pages rendered for the fleet report (a cache)
    cache/files.parquet                 digests of files already read (rightsize.fleet.keys)

Writes are whole or absent: every file is written to a hidden ``.*.tmp`` name, flushed to disk
and renamed into place, so a scan killed at any instant leaves only whole files and temporary
ones that the next scan sweeps. A row's file is renamed into place only after its document is;
a job is "done" exactly when its key is in a row file, so a resumed scan redoes only what no
row file holds (no gap) and never a key one holds (no duplicate). One writer at a time: a scan
holds an exclusive lock on ``.lock`` (released by the kernel when the process dies, however).

Small files are merged per day (:meth:`FleetTable.compact`) through a journal: the merged file
is renamed in, then the parts it replaces are removed; a scan that dies between the two leaves
the journal, and the next one finishes the removal. Readers drop a key seen twice (the latest
scan wins), so even that instant reads right. :meth:`FleetTable.replace` writes rows whose keys
may be there already (``fleet metrics``: a workload over the same window again) and merges
the days that then hold a key twice, so the old row is gone, not only hidden.

Schema versions: rows of every version read as the current one
(:func:`rightsize.fleet.schema.compatible`). The first writer of a newer rightsize migrates an
older table: each day's files are merged into one file of the current columns (the journaled
merge above), then ``FLEET.json`` says the new version; a migration killed midway is finished
by the next writer, and reads right at any instant.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from rightsize.errors import RightsizeError
from rightsize.fleet.schema import SCHEMA, SCHEMA_VERSION, compatible, frame

MARK = "FLEET.json"
FORMAT = "rightsize-fleet"
ROWS_DIR = "table"
DOCS_DIR = "documents"
REPORTS_DIR = "reports"
COMPACT_AT_FILES = 16  # a day with this many row files is merged into one


class TableError(RightsizeError):
    """A table folder that cannot be used (not a table, newer, locked by another scan)."""


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_bytes_atomic(data: bytes, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    df.write_parquet(tmp, compression="zstd", statistics=True)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class FleetTable:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows_dir = root / ROWS_DIR
        self._lock_fd: int | None = None
        self._seq = 0

    # --- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path, create: bool) -> FleetTable:
        """The table at ``root``; ``create`` makes it when the folder is absent or empty.
        A folder holding anything else is never written into."""
        mark = root / MARK
        if mark.is_file():
            cls._check_mark(mark)
            return cls(root)
        if root.exists() and not root.is_dir():
            raise TableError(f"{root}: not a folder (a fleet table is a folder)")
        if not create:
            if root.is_dir() and any(root.iterdir()):
                raise TableError(f"{root} is not a fleet table (no {MARK})")
            raise TableError(f"{root}: no fleet table here; make one with: "
                             f"rightsize fleet scan PATH... --table {root}")
        if root.is_dir() and any(root.iterdir()):
            raise TableError(f"{root} is not empty and not a fleet table (no {MARK}): "
                             "pick another --table folder")
        root.mkdir(parents=True, exist_ok=True)
        _write_mark(mark, SCHEMA_VERSION)
        return cls(root)

    def version(self) -> int:
        """The schema version ``FLEET.json`` states (checked: never newer than this code)."""
        return self._check_mark(self.root / MARK)

    @staticmethod
    def _check_mark(mark: Path) -> int:
        try:
            data = json.loads(mark.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise TableError(f"{mark}: not a readable fleet table mark ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TableError(f"{mark}: not a rightsize fleet table")
        version = data.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise TableError(f"{mark.parent}: fleet table schema_version {version} is newer than "
                             f"this rightsize reads ({SCHEMA_VERSION}): upgrade rightsize")
        return version

    # --- the writer's lock and recovery ------------------------------------------------------
    @contextlib.contextmanager
    def writer(self) -> Iterator[FleetTable]:
        """Hold the one-writer lock, finish what a killed scan left, then yield."""
        import fcntl

        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise TableError(f"{self.root}: another scan (pid {holder}) is writing this "
                                 "table; wait for it to finish") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        try:
            self.recover()
            if (self.root / MARK).is_file() and self.version() < SCHEMA_VERSION:
                self.migrate()
            yield self
        finally:
            self._lock_fd = None
            os.close(fd)  # releases the lock

    def recover(self) -> int:
        """Finish interrupted merges and sweep temporary files; returns the files removed."""
        removed = 0
        for journal in sorted(self.rows_dir.glob("day=*/.compact-*.json")):
            try:
                plan = json.loads(journal.read_text("utf-8"))
            except (OSError, ValueError):
                plan = {}
            if (journal.parent / str(plan.get("output", ""))).is_file():
                for name in plan.get("inputs", []):
                    with contextlib.suppress(FileNotFoundError):
                        (journal.parent / name).unlink()
                        removed += 1
            journal.unlink()
            removed += 1
        for sub in (self.rows_dir, self.root / DOCS_DIR, self.root / "cache",
                    self.root / REPORTS_DIR):
            if sub.is_dir():
                for tmp in sub.rglob(".*.tmp"):
                    with contextlib.suppress(FileNotFoundError):
                        tmp.unlink()
                        removed += 1
        return removed

    # --- writing ---------------------------------------------------------------------------
    def document_path(self, key: str) -> Path:
        return self.root / DOCS_DIR / key[:2] / f"{key}.json.gz"

    def write_document(self, key: str, data: bytes) -> str:
        """Store a job's gzipped document; returns its path relative to the table."""
        path = self.document_path(key)
        write_bytes_atomic(data, path)
        return path.relative_to(self.root).as_posix()

    def append(self, rows: list[dict[str, Any]]) -> list[Path]:
        """Write ``rows`` as one new file per recorded day (each whole or absent)."""
        if not rows:
            return []
        df = frame(rows)
        written = []
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        for (day,), part in df.group_by(pl.col("recorded_at").dt.date(), maintain_order=True):
            self._seq += 1
            path = self.rows_dir / f"day={day}" / f"part-{stamp}-{os.getpid()}-{self._seq}.parquet"
            write_parquet_atomic(part, path)
            written.append(path)
        return written

    def replace(self, rows: list[dict[str, Any]]) -> list[Path]:
        """:meth:`append` rows whose keys the table may hold already, then merge the days that
        hold such a key twice: the new row replaces the old one on disk (each step whole)."""
        written = self.append(rows)
        if not written:
            return written
        keys = [str(r["key"]) for r in rows]
        twice = (self.raw().filter(pl.col("key").is_in(keys)).group_by("key").len()
                 .filter(pl.col("len") > 1).select("key").collect()["key"].to_list())
        if twice:
            days = (self.raw().filter(pl.col("key").is_in(twice))
                    .select(pl.col("recorded_at").dt.date().unique()).collect())
            self.compact(days={str(d) for d in days["recorded_at"]})
        return written

    def migrate(self) -> int:
        """Rewrite an older table's rows as the current columns, day by day (journaled), then
        mark it the current version; returns the days rewritten. Needs the writer's lock."""
        days = self.compact(days={d.name.removeprefix("day=") for d in self.rows_dir.glob("day=*")})
        _write_mark(self.root / MARK, SCHEMA_VERSION)
        return days

    def compact(self, at_files: int = COMPACT_AT_FILES, days: set[str] | None = None) -> int:
        """Merge each day holding ``at_files`` or more files (and each of ``days``, whatever
        its files) into one; returns days merged."""
        merged = 0
        for day in sorted(self.rows_dir.glob("day=*")):
            parts = sorted(day.glob("*.parquet"))
            if not parts or (len(parts) < at_files
                             and (days is None or day.name.removeprefix("day=") not in days)):
                continue
            rows = latest(_scan(parts)).collect()
            name = f"compact-{time.time_ns()}-{os.getpid()}.parquet"
            tmp = _tmp(day / name)
            rows.write_parquet(tmp, compression="zstd", statistics=True)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            journal = day / f".compact-{name}.json"
            write_bytes_atomic(json.dumps({"output": name, "inputs": [p.name for p in parts]})
                               .encode(), journal)
            os.replace(tmp, day / name)
            _fsync_dir(day)
            for p in parts:
                p.unlink()
            journal.unlink()
            merged += 1
        return merged

    # --- reading ---------------------------------------------------------------------------
    def files(self) -> list[Path]:
        return sorted(self.rows_dir.glob("day=*/*.parquet"))

    def raw(self) -> pl.LazyFrame:
        """Every row of every file, as stored (a key may appear twice only mid-merge)."""
        files = self.files()
        if not files:
            return pl.LazyFrame(schema=SCHEMA)
        return _scan(files)

    def rows(self) -> pl.LazyFrame:
        """One row per key (the latest scan's)."""
        return latest(self.raw())

    def rows_of(self, files: list[Path]) -> pl.LazyFrame:
        """One row per key of these row files alone."""
        return latest(_scan(files)) if files else pl.LazyFrame(schema=SCHEMA)

    def known(self) -> dict[str, str]:
        """key -> status of every job in the table."""
        df = self.raw().select("key", "status", "scanned_at").collect()
        df = df.sort("scanned_at").unique("key", keep="last")
        return dict(zip(df["key"].to_list(), df["status"].to_list(), strict=True))


def _write_mark(mark: Path, version: int) -> None:
    write_bytes_atomic(json.dumps({"format": FORMAT, "schema_version": version},
                                  indent=2).encode() + b"\n", mark)


def _scan(files: list[Path]) -> pl.LazyFrame:
    """Row files of any schema version, read as the current one (a column an older version
    lacks is null, then :func:`~rightsize.fleet.schema.compatible` fills what it implies)."""
    return compatible(pl.scan_parquet(files, schema=SCHEMA, hive_partitioning=False,
                                      missing_columns="insert", extra_columns="ignore"))


def latest(rows: pl.LazyFrame) -> pl.LazyFrame:
    """One row per key, the latest ``scanned_at``'s."""
    return rows.sort("scanned_at").unique("key", keep="last", maintain_order=True)
