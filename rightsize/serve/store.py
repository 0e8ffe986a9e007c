"""The run index: one SQLite file in the data directory, plus a directory per run.

Input: uploads recorded by the upload handler, status changes from the job runner. Output:
rows as plain dicts (the ``GET /api/runs`` items). A *run* is the analysis of one set of input
files; it has *uploads*, one per request that sent those files, each with its own id, file
names and labels (the first upload has the run's id). Deleting an upload removes the run only
when no upload of it is left, in one transaction, as a repeat upload finds or creates its run in
one: a delete and a repeat upload never leave an id that answers 404. The index survives
restarts; a run's ``analysis.json`` and ``report.html`` sit in ``runs/<id>/`` beside it, and its
inputs are content-addressed blobs (``blobs/<sha256[:2]>/<sha256>``) shared between runs, with
what each inflates to (a repeat upload is recognised by its hash and not inflated again).

Only the server process opens it (the workers send their results over a pipe); every call
opens its own short connection. The journal is a rollback journal (``journal_mode=DELETE``,
``synchronous=FULL``), not WAL: WAL keeps a memory-mapped ``-shm`` file that a full disk can
leave cut short (every reader then fails with "disk I/O error"), while a rollback journal that
cannot be written only fails that one write ("database or disk is full") and leaves the file
as it was; reads need no free space at all. :meth:`Store.check` runs ``PRAGMA integrity_check``
at start-up.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from rightsize.errors import RightsizeError

T = TypeVar("T")
RUN_ID = re.compile(r"^[0-9a-f]{16}$")
STATUSES = ("queued", "running", "done", "failed")
ACTIVE = ("queued", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,        -- unix seconds
    status TEXT NOT NULL,            -- queued, running, done, failed
    error TEXT,                      -- the one-line error of a failed run
    files TEXT NOT NULL,             -- JSON list of {name, sha256, bytes}, upload order
    input_key TEXT NOT NULL,         -- sha256 of the ordered hashes: same inputs, same key
    started_at REAL,
    finished_at REAL,
    analysis_s REAL,                 -- wall seconds the worker spent in analyze + render
    verdict TEXT,                    -- diagnosis.bound
    sizing TEXT,                     -- sizing.verdict
    device TEXT,                     -- the primary device's name, or "CPU"
    step_ms REAL                     -- steps.mean_ms
);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at);
CREATE INDEX IF NOT EXISTS runs_input_key ON runs (input_key);
-- A run has uploads: each POST of files is one, with its own names and labels. The first
-- upload of a run has the run's id; a repeat upload of the same files gets its own id.
CREATE TABLE IF NOT EXISTS uploads (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    files TEXT NOT NULL,             -- JSON list of {name, sha256, bytes}, as this upload named
    team TEXT,
    project TEXT
);
CREATE INDEX IF NOT EXISTS uploads_run ON uploads (run_id);
CREATE INDEX IF NOT EXISTS uploads_created ON uploads (created_at);
-- What each stored blob inflates to (gzip) or its size: a file uploaded again is recognised
-- by its hash and never inflated twice.
CREATE TABLE IF NOT EXISTS blobs (
    sha256 TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL,
    inflated_bytes INTEGER NOT NULL
);
"""
# Columns added since the first index: (name, SQL type), added to an older index at start-up.
_ADDED = (
    ("team", "TEXT"),                # the run's first upload's labels (its fleet row's)
    ("project", "TEXT"),
    ("fleet_key", "TEXT"),           # the run's row in the fleet table (serve/fleet.py), once
                                     # written
    ("recorded_at", "REAL"),         # unix seconds: the trace's first event on its wall clock
    ("input_bytes", "INTEGER"),      # what the readers parse (gzip inflated): sizes the limits
)
_COLUMNS = ("id", "created_at", "status", "error", "files", "input_key", "started_at",
            "finished_at", "analysis_s", "verdict", "sizing", "device", "step_ms", "team",
            "project")
# An upload as the API shows it: the upload's id, time, names and labels; its run's state.
_VIEW = ("u.id", "u.created_at", "r.status", "r.error", "u.files", "r.input_key",
         "r.started_at", "r.finished_at", "r.analysis_s", "r.verdict", "r.sizing", "r.device",
         "r.step_ms", "u.team", "u.project", "r.id")
_VIEW_FROM = f"SELECT {', '.join(_VIEW)} FROM uploads u JOIN runs r ON r.id = u.run_id"


class IndexDamaged(RightsizeError):
    """The index failed ``PRAGMA integrity_check``."""


class Store:
    """The SQLite index of runs under ``data_dir``."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._connect() as db:
                db.execute("PRAGMA journal_mode=DELETE")  # leaves WAL if an older server did
                db.executescript(_SCHEMA)
                have = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
                for name, kind in _ADDED:
                    if name not in have:
                        db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
                self._migrate(db)
        except sqlite3.OperationalError:
            raise  # locked, read-only, a full disk: not damage
        except sqlite3.DatabaseError as exc:
            raise self._damaged(str(exc)) from None

    def _damaged(self, why: str) -> IndexDamaged:
        return IndexDamaged(f"the run index {self.db_path} is damaged ({why}); restore it "
                            "from a backup or move it away to start a new one")

    def check(self) -> None:
        """``PRAGMA integrity_check``; :class:`IndexDamaged` with its first finding if not ok."""
        try:
            with self._connect() as db:
                rows = db.execute("PRAGMA integrity_check").fetchall()
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._damaged(str(exc)) from None
        if [r[0] for r in rows] != ["ok"]:
            raise self._damaged(f"integrity_check: {rows[0][0]}")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.db_path, timeout=30)
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA temp_store=MEMORY")  # sorts never need disk space
        try:
            with db:  # commit on success, roll back on error
                yield db
        finally:
            db.close()

    def _migrate(self, db: sqlite3.Connection) -> None:
        """An index from before uploads: each run is its own first upload."""
        db.execute("INSERT INTO uploads (id, run_id, created_at, files, team, project) "
                   "SELECT id, id, created_at, files, team, project FROM runs WHERE id NOT IN "
                   "(SELECT run_id FROM uploads)")

    def create(self, files: list[dict[str, Any]], input_key: str, team: str | None = None,
               project: str | None = None) -> str:
        """A new run of ``files`` with its first upload (same id); the id."""
        return self.record(files, input_key, team, project, reuse=False)[0]

    def record(self, files: list[dict[str, Any]], input_key: str, team: str | None = None,
               project: str | None = None, input_bytes: int | None = None,
               inflated: dict[str, int] | None = None,
               reuse: bool = True) -> tuple[str, str, bool]:
        """One upload of ``files``, in one transaction: a new run (the upload has its id), or,
        with ``reuse``, another upload of the newest run of the same inputs that did not fail.
        ``inflated``: sha256 -> what the blob inflates to. Returns (upload id, run id, whether
        the run already existed)."""
        now = time.time()
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # the lookup and the insert see the same index
            run = db.execute("SELECT id FROM runs WHERE input_key = ? AND status != 'failed' "
                             "ORDER BY created_at DESC LIMIT 1",
                             (input_key,)).fetchone() if reuse else None
            upload_id = secrets.token_hex(8)
            run_id = run[0] if run else upload_id
            if run is None:
                db.execute("INSERT INTO runs (id, created_at, status, files, input_key, team, "
                           "project, input_bytes) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)",
                           (run_id, now, json.dumps(files), input_key, team, project,
                            input_bytes))
            db.execute("INSERT INTO uploads (id, run_id, created_at, files, team, project) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       (upload_id, run_id, now, json.dumps(files), team, project))
            for f in files:
                if inflated and f["sha256"] in inflated:
                    db.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?)",
                               (f["sha256"], f["bytes"], inflated[f["sha256"]]))
        return upload_id, run_id, run is not None

    def get(self, upload_id: str) -> dict[str, Any] | None:
        """An upload as the API shows it (``id``: the upload's, ``run``: its run's); a run's
        own id answers too, as its oldest upload (links made from run ids stay valid)."""
        if not RUN_ID.match(upload_id):
            return None
        with self._connect() as db:
            row = db.execute(f"{_VIEW_FROM} WHERE u.id = ?", (upload_id,)).fetchone() or \
                db.execute(f"{_VIEW_FROM} WHERE u.run_id = ? ORDER BY u.created_at, u.id "
                           "LIMIT 1", (upload_id,)).fetchone()
        return _view(row) if row else None

    def upload(self, upload_id: str) -> dict[str, Any] | None:
        """The upload of exactly this id (no run fallback: what DELETE removes)."""
        if not RUN_ID.match(upload_id):
            return None
        with self._connect() as db:
            row = db.execute(f"{_VIEW_FROM} WHERE u.id = ?", (upload_id,)).fetchone()
        return _view(row) if row else None

    def run(self, run_id: str) -> dict[str, Any] | None:
        """A run (the analysis of one set of inputs) by its own id."""
        if not RUN_ID.match(run_id):
            return None
        with self._connect() as db:
            row = db.execute(f"SELECT {', '.join(_COLUMNS)}, input_bytes FROM runs WHERE "
                             "id = ?", (run_id,)).fetchone()
        return {**_row(row[:-1]), "input_bytes": row[-1]} if row else None

    def find_reusable(self, input_key: str) -> dict[str, Any] | None:
        """The newest run of the same inputs that did not fail (its analysis can be reused)."""
        with self._connect() as db:
            row = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE input_key = ? "
                             "AND status != 'failed' ORDER BY created_at DESC LIMIT 1",
                             (input_key,)).fetchone()
        return _row(row) if row else None

    def runs(self, query: str | None = None, limit: int = 500, before: str | None = None,
             status: str | None = None) -> list[dict[str, Any]]:
        """Uploads newest first, as the API shows them; ``query`` matches file names,
        verdict, device, status or id; ``before`` (an upload id) starts after that upload
        (keyset pagination: a page stays right while new uploads arrive); ``status`` keeps
        one status."""
        sql = f"{_VIEW_FROM} WHERE 1"
        args: list[Any] = []
        if query:
            like = f"%{query.lower()}%"
            sql += (" AND (lower(u.files) LIKE ? OR lower(coalesce(r.verdict, '')) LIKE ? OR "
                    "lower(coalesce(r.device, '')) LIKE ? OR r.status LIKE ? OR u.id LIKE ?)")
            args += [like] * 5
        if status:
            sql += " AND r.status = ?"
            args.append(status)
        if before:
            sql += (" AND (u.created_at, u.id) < (SELECT created_at, id FROM uploads "
                    "WHERE id = ?)")
            args.append(before)
        sql += " ORDER BY u.created_at DESC, u.id DESC LIMIT ?"
        with self._connect() as db:
            rows = db.execute(sql, [*args, limit]).fetchall()
        return [_view(r) for r in rows]

    def count_active(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT count(*) FROM runs WHERE status IN ('queued', "
                                  "'running')").fetchone()[0])

    def active_ids(self) -> list[str]:
        with self._connect() as db:
            rows = db.execute("SELECT id FROM runs WHERE status IN ('queued', 'running') "
                              "ORDER BY created_at").fetchall()
        return [r[0] for r in rows]

    def mark_running(self, run_id: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status = 'running', started_at = ? WHERE id = ?",
                       (time.time(), run_id))

    def requeue(self, run_id: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status = 'queued', started_at = NULL WHERE id = ?",
                       (run_id,))

    def finish(self, run_id: str, summary: dict[str, Any], fleet_key: str | None = None,
               finished_at: float | None = None) -> None:
        """Record a worker's result: ``summary`` has ``error`` (failed) or the verdict keys;
        ``fleet_key`` the key of its fleet row when that is written."""
        error = summary.get("error")
        with self._connect() as db:
            db.execute("UPDATE runs SET status = ?, error = ?, finished_at = ?, analysis_s = ?, "
                       "verdict = ?, sizing = ?, device = ?, step_ms = ?, fleet_key = ?, "
                       "recorded_at = ? WHERE id = ?",
                       ("failed" if error else "done", error, finished_at or time.time(),
                        summary.get("analysis_s"), summary.get("verdict"),
                        summary.get("sizing"), summary.get("device"), summary.get("step_ms"),
                        fleet_key, summary.get("recorded_at"), run_id))

    # -- the fleet table's bookkeeping (serve/fleet.py) -------------------------------------

    def finished_runs(self) -> list[dict[str, Any]]:
        """Every done or failed run, oldest first, with its ``fleet_key`` and ``recorded_at``."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {', '.join(_COLUMNS)}, fleet_key, recorded_at FROM runs "
                              "WHERE status IN ('done', 'failed') ORDER BY created_at, id"
                              ).fetchall()
        return [{**_row(r[:-2]), "fleet_key": r[-2], "recorded_at": r[-1]} for r in rows]

    def set_fleet_key(self, run_id: str, key: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET fleet_key = ? WHERE id = ?", (key, run_id))

    def fleet_key(self, run_id: str) -> str | None:
        with self._connect() as db:
            row = db.execute("SELECT fleet_key FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def fleet_links(self) -> dict[str, tuple[str, str]]:
        """Fleet key -> (run id, status) of the run its row links to: the newest done run of
        those files, else the newest failed one."""
        with self._connect() as db:
            rows = db.execute("SELECT fleet_key, id, status FROM runs WHERE fleet_key IS NOT "
                              "NULL AND status IN ('done', 'failed') ORDER BY "
                              "status = 'done', created_at, id").fetchall()
        return {key: (run_id, status) for key, run_id, status in rows}  # the last one wins

    def delete(self, upload_id: str) -> tuple[dict[str, Any], bool] | None:
        """Remove one upload, in one transaction, and its run when no upload of it is left:
        (the run, whether the run was removed too), or None for no such upload."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            found = db.execute("SELECT run_id FROM uploads WHERE id = ?",
                               (upload_id,)).fetchone()
            if found is None:
                return None
            row = db.execute(f"SELECT {', '.join(_COLUMNS)}, fleet_key FROM runs WHERE id = ?",
                             (found[0],)).fetchone()
            db.execute("DELETE FROM uploads WHERE id = ?", (upload_id,))
            left = db.execute("SELECT count(*) FROM uploads WHERE run_id = ?",
                              (found[0],)).fetchone()[0]
            if not left:
                db.execute("DELETE FROM runs WHERE id = ?", (found[0],))
        run = {**_row(row[:-1]), "fleet_key": row[-1]} if row else {"id": found[0], "files": []}
        return run, not left

    def blob_in_use(self, sha256: str) -> bool:
        with self._connect() as db:
            return db.execute("SELECT 1 FROM runs WHERE files LIKE ? LIMIT 1",
                              (f'%"{sha256}"%',)).fetchone() is not None

    def forget_blob(self, sha256: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM blobs WHERE sha256 = ?", (sha256,))

    def inflated_bytes(self, sha256: str) -> int | None:
        """What a stored blob inflates to (its size when not gzip), when checked before."""
        with self._connect() as db:
            row = db.execute("SELECT inflated_bytes FROM blobs WHERE sha256 = ?",
                             (sha256,)).fetchone()
        return int(row[0]) if row else None

    def blobs_in_use(self) -> set[str]:
        """Every blob hash some run's files name (start-up: the rest are orphans)."""
        with self._connect() as db:
            rows = db.execute("SELECT files FROM runs").fetchall()
        return {f["sha256"] for (files,) in rows for f in json.loads(files)}


class Index:
    """The store, called from the event loop: one thread runs every call in turn. A write is
    synced to disk (``synchronous=FULL``), which can take hundreds of ms on a busy disk, and a
    read that meets a writer's lock waits in C: on the event loop either would hold every
    other request (``/healthz`` answered in 350 ms while a run was recorded). One thread
    also orders the calls: a delete and an upload of the same files see each other whole."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rightsize-index")

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._thread.shutdown(wait=True)


def _view(row: tuple[Any, ...]) -> dict[str, Any]:
    item = _row(row[:-1])
    item["run"] = row[-1]
    return item


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    item = dict(zip(_COLUMNS, row, strict=True))
    item["files"] = json.loads(item["files"])
    return item


def blob_path(blobs_dir: Path, sha256: str) -> Path:
    """Where the content with this hash is stored: never derived from a client's file name."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return blobs_dir / sha256[:2] / sha256
