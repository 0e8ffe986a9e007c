"""Jobs followed over time: the captures a running job uploads (``rightsize run --on-demand
--upload``), each an upload labelled with its job, kept in order with a regression check each.

Input: an upload's job labels (``POST /api/runs?job=NAME&capture=ID&...``, checked by
:func:`job_labels`), the run index, each finished run's stored summary. Output: the tables
``job_uploads`` (an upload's job labels) and ``checks`` (each capture against the previous
finished capture of its job) in the index's SQLite file, read by ``/jobs`` and ``/jobs/<name>``.
The tables sit beside the run index's own (``uploads``, ``runs``) and join them by id: a deleted
upload leaves its job's history with it.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger("rightsize.serve")
MAX_LABEL_CHARS = 100
REASONS = ("trigger", "steady", "every", "drift")
_CAPTURE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS job_uploads (
    upload_id TEXT PRIMARY KEY,
    job TEXT NOT NULL,               -- the job's name (rightsize run --name)
    capture TEXT,                    -- the capture's id in its run directory
    reason TEXT,                     -- trigger, steady, every, drift
    ranks INTEGER,                   -- traces in the upload (the job's ranks)
    job_step_ms REAL,                -- the job's own median step before the capture, ms
    namespace TEXT,                  -- Kubernetes: where it ran (the metrics rows' namespace)
    workload TEXT,                   -- its pods' owner (the metrics rows' workload)
    pod TEXT
);
CREATE INDEX IF NOT EXISTS job_uploads_job ON job_uploads (job);
CREATE TABLE IF NOT EXISTS checks (
    upload_id TEXT PRIMARY KEY,      -- the capture checked
    job TEXT NOT NULL,
    previous TEXT,                   -- the upload it was checked against (null: the first)
    basis TEXT,                      -- job_step_ms (both had it) or step_ms (the analyses')
    a_ms REAL, b_ms REAL, change_pct REAL,
    flagged INTEGER NOT NULL,        -- 1: slower than the previous by more than the threshold
    threshold_pct REAL,
    attribution TEXT,                -- JSON: compare's top changes, when flagged
    checked_at REAL NOT NULL,
    webhook TEXT                     -- sent, failed: ..., or null (no webhook)
);
"""
_HISTORY = """
SELECT u.id, u.created_at, u.team, u.project, r.id, r.status, r.error, r.verdict, r.sizing,
       r.device, r.step_ms, j.capture, j.reason, j.ranks, j.job_step_ms, j.namespace,
       j.workload, j.pod, c.previous, c.basis, c.change_pct, c.flagged, c.attribution, c.webhook
FROM job_uploads j JOIN uploads u ON u.id = j.upload_id JOIN runs r ON r.id = u.run_id
LEFT JOIN checks c ON c.upload_id = j.upload_id
"""
_HISTORY_KEYS = ("id", "created_at", "team", "project", "run", "status", "error", "verdict",
                 "sizing", "device", "step_ms", "capture", "reason", "ranks", "job_step_ms",
                 "namespace", "workload", "pod", "previous", "basis", "change_pct", "flagged",
                 "attribution", "webhook")


def job_labels(params: Mapping[str, str]) -> dict[str, Any] | str:
    """An upload's job labels from its query parameters, checked; ``{}`` when it names no
    job; a one-line error otherwise."""
    text = {k: str(params.get(k, "")).strip() for k in
            ("job", "capture", "reason", "ranks", "job_step_ms", "namespace", "workload", "pod")}
    for name in ("job", "namespace", "workload", "pod"):
        if len(text[name]) > MAX_LABEL_CHARS or not text[name].isprintable():
            return f"{name} must be at most {MAX_LABEL_CHARS} printable characters"
    if not text["job"]:
        extra = [k for k in ("capture", "reason", "ranks", "job_step_ms") if text[k]]
        return f"{extra[0]} needs job" if extra else {}
    if text["capture"] and not _CAPTURE_ID.fullmatch(text["capture"]):
        return "capture must be letters, digits, '.', '_' or '-' (at most 64)"
    if text["reason"] and text["reason"] not in REASONS:
        return f"reason must be one of {', '.join(REASONS)}"
    ranks = _number(text["ranks"], int)
    if ranks == "bad" or (isinstance(ranks, int) and not 1 <= ranks <= 100_000):
        return "ranks must be a whole number from 1 to 100000"
    step = _number(text["job_step_ms"], float)
    if step == "bad" or (isinstance(step, float) and not (math.isfinite(step) and step > 0)):
        return "job_step_ms must be a positive number"
    return {"job": text["job"], "capture": text["capture"] or None,
            "reason": text["reason"] or None, "ranks": ranks, "job_step_ms": step,
            "namespace": text["namespace"] or None, "workload": text["workload"] or None,
            "pod": text["pod"] or None}


def _number(text: str, kind: type) -> Any:
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        return "bad"


class JobIndex:
    """The job tables in the run index's SQLite file (every call opens its own connection, as
    :class:`~rightsize.serve.store.Store` does, with the same journal settings)."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.db_path, timeout=30)
        db.execute("PRAGMA synchronous=FULL")
        try:
            with db:
                yield db
        finally:
            db.close()

    def add(self, upload_id: str, labels: dict[str, Any]) -> None:
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO job_uploads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (upload_id, labels["job"], labels["capture"], labels["reason"],
                        labels["ranks"], labels["job_step_ms"], labels["namespace"],
                        labels["workload"], labels["pod"]))

    def jobs(self) -> list[dict[str, Any]]:
        """Every job: its name, captures, the newest one's time, labels and check."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT j.job, count(*), max(u.created_at), "
                "sum(coalesce(c.flagged, 0)) FROM job_uploads j "
                "JOIN uploads u ON u.id = j.upload_id LEFT JOIN checks c ON "
                "c.upload_id = j.upload_id GROUP BY j.job ORDER BY max(u.created_at) DESC"
            ).fetchall()
        return [{"job": r[0], "captures": r[1], "latest_at": r[2], "regressions": r[3]}
                for r in rows]

    def history(self, job: str) -> list[dict[str, Any]]:
        """The job's captures, oldest first (upload time), with their run and check."""
        with self._connect() as db:
            rows = db.execute(f"{_HISTORY} WHERE j.job = ? ORDER BY u.created_at, u.id",
                              (job,)).fetchall()
        out = []
        for row in rows:
            item = dict(zip(_HISTORY_KEYS, row, strict=True))
            item["attribution"] = json.loads(item["attribution"]) if item["attribution"] else None
            item["flagged"] = bool(item["flagged"]) if item["flagged"] is not None else None
            out.append(item)
        return out

    def of_run(self, run_id: str) -> list[tuple[str, str]]:
        """(upload id, job) of each job upload of a run."""
        with self._connect() as db:
            return [(r[0], r[1]) for r in db.execute(
                "SELECT j.upload_id, j.job FROM job_uploads j JOIN uploads u ON "
                "u.id = j.upload_id WHERE u.run_id = ?", (run_id,)).fetchall()]

    def labels_of_run(self, run_id: str) -> dict[str, Any] | None:
        """The job labels of a run's first job upload (its fleet row's), or None."""
        with self._connect() as db:
            row = db.execute(
                "SELECT j.job, j.namespace, j.workload FROM job_uploads j JOIN uploads u ON "
                "u.id = j.upload_id WHERE u.run_id = ? ORDER BY u.created_at LIMIT 1",
                (run_id,)).fetchone()
        return {"job": row[0], "namespace": row[1], "workload": row[2]} if row else None

    def record_check(self, upload_id: str, job: str, check: dict[str, Any]) -> None:
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO checks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (upload_id, job, check.get("previous"), check.get("basis"),
                        check.get("a_ms"), check.get("b_ms"), check.get("change_pct"),
                        int(bool(check.get("flagged"))), check.get("threshold_pct"),
                        json.dumps(check["attribution"]) if check.get("attribution") else None,
                        time.time(), None))

    def set_webhook(self, upload_id: str, outcome: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE checks SET webhook = ? WHERE upload_id = ?", (outcome, upload_id))


class Follower:
    """Checks each finished capture of a job against the one before it and posts regressions
    to the webhook (on a thread: :meth:`finished` is called once a run is recorded)."""

    def __init__(self, db_path: Path, runs_dir: Path, threshold_pct: float,
                 webhook_url: str | None = None, base_url: str = "") -> None:
        import threading

        from rightsize.serve.webhook import Webhook

        self.index = JobIndex(db_path)
        self.runs_dir = runs_dir
        self.threshold_pct = threshold_pct
        self.base_url = base_url.rstrip("/")
        self.webhook = Webhook(webhook_url, self.index.set_webhook) if webhook_url else None
        self._lock = threading.Lock()  # one job's checks in order

    def close(self) -> None:
        if self.webhook is not None:
            self.webhook.close()

    def finished(self, run_id: str) -> None:
        """A run is recorded done or failed: check its job uploads, and the later captures of
        their jobs (whose previous capture may be this one, finished out of order). Called on
        a thread; what fails is logged (the run itself is recorded)."""
        try:
            for job in dict.fromkeys(job for _, job in self.index.of_run(run_id)):
                self.recheck(job)
        except Exception as exc:  # noqa: BLE001 - see above
            log.warning("run %s: its job's captures were not checked (%s: %s)", run_id,
                        type(exc).__name__, exc)

    def captures(self, job: str) -> list[dict[str, Any]]:
        """The job's captures, oldest first: each history item with its summary (what the
        job page shows: :func:`~rightsize.serve.regression.capture_summary`, its values null
        until its run is done and checked) and its links."""
        from rightsize.serve import regression

        out = []
        for item in self.index.history(job):
            summary = regression.read_summary(self.runs_dir / item["run"]) \
                if item["status"] == "done" else None
            out.append({**item, "summary": summary or regression.capture_summary({}),
                        "url": f"/r/{item['id']}" if item["status"] == "done"
                        else f"/runs/{item['id']}"})
        return out

    def catch_up(self) -> int:
        """Start-up: every job's captures checked (those a stopped server had not)."""
        jobs = [j["job"] for j in self.index.jobs()]
        for job in jobs:
            self.recheck(job)
        return len(jobs)

    def recheck(self, job: str) -> None:
        from rightsize.serve import regression

        with self._lock:
            history = self.index.history(job)
            for item in history:
                if item["status"] != "done":
                    continue
                regression.write_summary(self.runs_dir / item["run"])
                prev = regression.previous_done(history, item["id"])
                checked = item["flagged"] is not None  # a check row exists
                if checked and item["previous"] == (prev["id"] if prev else None):
                    continue  # checked against the same capture before
                result = regression.check(prev, item, self.runs_dir, self.threshold_pct)
                self.index.record_check(item["id"], job, result)
                if result["flagged"] and self.webhook is not None:
                    self.webhook.post(item["id"], self.payload(job, item, prev, result))

    def payload(self, job: str, item: dict[str, Any], prev: dict[str, Any] | None,
                result: dict[str, Any]) -> dict[str, Any]:
        from urllib.parse import quote

        return {"event": "regression", "job": job, "capture": item["capture"],
                "upload": item["id"], "run": item["run"],
                "previous": {"upload": prev["id"], "capture": prev["capture"]} if prev else None,
                "basis": result.get("basis"), "step_ms": [result.get("a_ms"), result.get("b_ms")],
                "change_pct": result.get("change_pct"), "threshold_pct": self.threshold_pct,
                "verdict": item["verdict"], "attribution": result.get("attribution") or [],
                "job_url": f"{self.base_url}/jobs/{quote(job, safe='')}",
                "report_url": f"{self.base_url}/r/{item['id']}"}
