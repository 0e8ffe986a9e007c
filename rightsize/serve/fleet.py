"""The fleet view of everything uploaded: each finished run is a row of a fleet table kept in
the data directory, and ``/fleet`` is the fleet report over it.

Input: the run index (:class:`~rightsize.serve.store.Store`) and each finished run's stored
results (``runs/<id>/analysis.json``, its blobs). Output: rows of ``DATA/fleet/``, a fleet table
of schema v2 (:class:`rightsize.fleet.table.FleetTable`, the one ``fleet scan`` writes: rows from
the same builder, :func:`~rightsize.fleet.analyze.identity_row` and
:func:`~rightsize.fleet.analyze.document_columns`, appended by the same writer), and the fleet
report page (``rightsize.reports.fleet_text.FleetRenderer``) linking each job to its run.

A run's row is keyed by the content of its files (:func:`rightsize.fleet.keys.content_key`: one
uploaded trace has the key ``fleet scan`` gives the same file) and written once per key: the
server appends it when the run finishes, before the index says so, and at start-up (and before
each ``/fleet`` page) adds every finished run whose key the table lacks, from its stored
``analysis.json`` (runs analyzed before the table existed, a row whose write failed). A key
the table holds as not ok gets a new row when a later run of the same files succeeds (the
latest row of a key wins, as after ``fleet scan --retry-failed``). The server holds the
table's writer lock while it runs: a ``fleet scan`` into ``DATA/fleet`` waits for it to stop.

The page lists the keys some run in the index still has (a deleted run's row stays in the
table's history, its stored document copy is removed), and beside them every workload of cluster
metrics the table holds (source ``metrics``: written by ``rightsize fleet metrics --table
DATA/fleet`` while the server is stopped, since the server holds the table's one-writer lock).
Runs the server analyzed here have no team or project unless the upload named them (``POST
/api/runs?team=&project=``). A run uploaded as a job's capture (``?job=NAME``, what ``rightsize
run --on-demand --upload`` sends) is a row named by its job, one entity with the job's other
captures (the page shows the latest) and with the metrics rows of the Kubernetes workload the
upload names (``namespace``, ``workload``).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError
from rightsize.serve.config import ServeConfig
from rightsize.serve.store import Store, blob_path
from rightsize.serve.worker import ANALYSIS_JSON, NO_SPACE_ERROR

log = logging.getLogger("rightsize.serve")
FLEET_DIR = "fleet"
PAGE_TABLE_NAME = "uploads to this server"  # the page's "table" line: no server path shown
# A failed run's error that is the server's failure, not the input's (a ``failed`` row):
# what worker.py and jobs.py write for a crash, a dead worker, memory or disk.
SERVER_FAILURES = ("internal error", "the analysis worker", "out of memory in the analysis",
                   "cannot write the results", NO_SPACE_ERROR)
_TOMORROW_S = 86_400
# The compacted view the page reads, saved in the table's cache folder (issue 40, 7: a start
# reads one file, not one per day partition)
VIEW_ROWS = "cache/serve-view.parquet"
VIEW_FILES = "cache/serve-view.json"


def run_kind(files: list[dict[str, Any]], doc: dict[str, Any] | None) -> str:
    """``file`` (one file, keyed as ``fleet scan`` keys a file), ``ranks`` (traces the
    analysis read as the ranks of one job), or ``upload`` (files analyzed together: a trace
    with its ncu CSV or metrics log)."""
    if len(files) == 1:
        return "file"
    inputs = (doc or {}).get("inputs") or []
    if (doc or {}).get("job") and inputs and all(
            isinstance(i, dict) and "rank" in i for i in inputs):  # every input a trace
        return "ranks"
    return "upload"


def run_key(files: list[dict[str, Any]], doc: dict[str, Any] | None) -> str:
    from rightsize.fleet.keys import content_key

    return content_key(run_kind(files, doc), (f["sha256"] for f in files))


def _recorded(run: dict[str, Any], blobs: list[Path], failed: bool) -> tuple[datetime, str]:
    """When the run's job was recorded: the trace's first event on its wall clock as the worker
    found it (``trace``); for a run analyzed before the server recorded that, the first
    wall-clock event in its traces' heads (older Kineto traces carry epoch timestamps; newer
    ones a base time at the end); else the upload's time (``upload``). A failed run's day is
    always its upload's: a file that could not be analyzed says nothing the server trusts (200
    uploads of 60 bytes with 200 different timestamps made 200 day partitions, issue 40, 7)."""
    from rightsize.fleet.discover import first_wall_clock_us

    if failed:
        return datetime.fromtimestamp(run["created_at"], UTC), "upload"
    if run.get("recorded_at") is not None:
        return datetime.fromtimestamp(run["recorded_at"], UTC), "trace"
    firsts = [us for us in (first_wall_clock_us(b) for b in blobs) if us is not None]
    if firsts and min(firsts) <= (time.time() + _TOMORROW_S) * 1e6:
        return datetime.fromtimestamp(min(firsts) / 1e6, UTC), "trace"
    return datetime.fromtimestamp(run["created_at"], UTC), "upload"


def build_row(run: dict[str, Any], doc: dict[str, Any] | None, error: str | None,
              blobs_dir: Path, labels: tuple[str | None, str | None] = (None, None)
              ) -> dict[str, Any]:
    """The fleet row of a finished run: ``doc`` its analysis document when it is done, else
    ``error`` its one-line error (status ``bad-input``, or ``failed`` for the server's own
    failures: :data:`SERVER_FAILURES`)."""
    from rightsize.fleet.analyze import document_columns, identity_row, one_line
    from rightsize.fleet.schema import STATUS_BAD_INPUT, STATUS_FAILED, STATUS_OK

    files = run["files"]
    names = [str(f["name"]) for f in files]
    blobs = [blob_path(blobs_dir, f["sha256"]) for f in files]
    recorded_at, source = _recorded(run, [b for b in blobs if b.is_file()], doc is None)
    finished = run.get("finished_at")
    columns: dict[str, Any] = {}
    if doc is not None:
        from rightsize.analyzers.document import Document

        try:
            columns = document_columns(Document.from_json(doc))
            status, reason = STATUS_OK, None
        except (RightsizeError, ValueError, TypeError, KeyError) as exc:
            status, reason = STATUS_FAILED, one_line(f"the stored analysis cannot be read: {exc}")
    else:
        reason = one_line(error or "the analysis failed")
        status = STATUS_FAILED if reason.startswith(SERVER_FAILURES) else STATUS_BAD_INPUT
    team, project = labels
    row = identity_row(
        key=run_key(files, doc), job=" + ".join(names)[:300], kind=run_kind(files, doc),
        paths=[f"{run['id']}/{n}" for n in names], files=len(files),
        size=sum(int(f["bytes"]) for f in files), recorded_at=recorded_at,
        recorded_at_source=source,
        scanned_at=datetime.fromtimestamp(finished if finished else time.time(), UTC),
        status=status, reason=reason, team=team, project=project,
        labels_source="upload" if team or project else None)
    row.update(columns)
    row["analysis_s"] = run.get("analysis_s")
    return row


def job_identity(job: dict[str, Any]) -> dict[str, Any]:
    """The row of a job's capture is named by its job, and is one entity with the job's other
    captures and, when the upload named its Kubernetes workload, with that workload's metrics
    rows (:func:`rightsize.fleet.analyze.entity`, as ``fleet scan`` names a capture)."""
    from rightsize.fleet.analyze import entity

    return {"job": job["job"], "entity": entity(job["job"], job.get("namespace"),
                                                job.get("workload"))}


def _with_row(view: Any, row: dict[str, Any]) -> Any:
    """The compacted view with ``row`` in place of the older row of its key."""
    import polars as pl

    from rightsize.fleet.schema import frame
    from rightsize.fleet.table import latest

    return latest(pl.concat([view, frame([row]).select(view.columns)],
                            how="vertical_relaxed").lazy()).collect()


def load_view(table: Any) -> tuple[Any, int]:
    """The table's compacted view (one row per key, every day) and how many row files were
    read for it: the copy the server saved (:data:`VIEW_ROWS`, with the row files it covers in
    :data:`VIEW_FILES`) and the row files written since; every row file when there is no
    usable copy. A key in both is the latest row (:func:`rightsize.fleet.table.latest`)."""
    import polars as pl

    from rightsize.fleet.table import latest

    files = table.files()
    try:
        covered = set(json.loads((table.root / VIEW_FILES).read_text("utf-8"))["files"])
        saved = pl.read_parquet(table.root / VIEW_ROWS)
        if saved.schema != table.rows_of([]).collect_schema():
            raise ValueError("the saved view has other columns")
        new = [f for f in files if f.relative_to(table.root).as_posix() not in covered]
        if not new:
            return saved, 0
        both = pl.concat([saved.lazy(), table.rows_of(new)], how="vertical_relaxed")
        return latest(both).collect().select(saved.columns), len(new)
    except Exception:  # noqa: BLE001 - none saved, or unreadable, or another schema: scan
        return table.rows().collect(), len(files)


def save_view(table: Any, view: Any) -> None:
    """Save ``view`` as the copy :func:`load_view` reads: the rows, then the row files they
    cover (each file whole; a copy whose file list is older only makes a start read more)."""
    from rightsize.fleet.table import write_bytes_atomic, write_parquet_atomic

    write_parquet_atomic(view, table.root / VIEW_ROWS)
    files = [f.relative_to(table.root).as_posix() for f in table.files()]
    write_bytes_atomic(json.dumps({"files": files}).encode(), table.root / VIEW_FILES)


class ServeFleet:
    """The data directory's fleet table, written by this server alone (it holds the lock)."""

    def __init__(self, config: ServeConfig, store: Store,
                 job_of_run: Callable[[str], dict[str, Any] | None] | None = None) -> None:
        from rightsize.fleet.table import FleetTable, TableError

        self.config = config
        self.store = store
        self.job_of_run = job_of_run  # a run uploaded as a job's capture: its job labels
        self.table = FleetTable.open(config.data_dir / FLEET_DIR, create=True)
        self._stack = contextlib.ExitStack()
        try:
            self._stack.enter_context(self.table.writer())
        except TableError as exc:  # a fleet scan into it, or another server on this data
            raise TableError(f"{exc} (a fleet scan, or another rightsize serve on "
                             f"{config.data_dir})") from None
        # The page reads this compacted view: one row per key, across every day, kept in
        # memory and updated as rows are written (a scan of the table costs 0.6 ms per file:
        # 8,000 day partitions made each page 5 s, under the lock finishing runs wait on), and
        # kept on disk across restarts (VIEW_ROWS): a start reads it and the row files since.
        self._view, read = load_view(self.table)
        if self._view.height or read:
            log.info("start-up: fleet view of %d rows (%d row files read, the rest from %s)",
                     self._view.height, read, VIEW_ROWS)
        if read:
            save_view(self.table, self._view)
        # key -> status; only this process writes the table
        self._known = dict(zip(self._view["key"].to_list(), self._view["status"].to_list(),
                               strict=True))
        self._lock = threading.Lock()
        self._stopping = False

    def stop(self) -> None:
        """Ask a catch-up in progress to end after its current run (shutdown)."""
        self._stopping = True

    def close(self) -> None:
        """Release the table (after the last write)."""
        self._stopping = True
        with self._lock:
            with contextlib.suppress(Exception):  # a copy not saved: the next start scans
                save_view(self.table, self._view)
            self._stack.close()

    # -- rows ------------------------------------------------------------------------------

    def add(self, run: dict[str, Any], error: str | None) -> str:
        """Write the row of ``run`` (finished: ``error`` None when done) unless the table holds
        its key already; returns the key. Raises what the table's disk raises."""
        doc = None
        if error is None:
            doc = json.loads((self.config.runs_dir / run["id"] / ANALYSIS_JSON)
                             .read_text("utf-8"))
        row = build_row(run, doc, error, self.config.blobs_dir,
                        (run.get("team"), run.get("project")))
        job = self.job_of_run(run["id"]) if self.job_of_run is not None else None
        if job is not None:
            row.update(job_identity(job))
        key = str(row["key"])
        with self._lock:
            known = self._known.get(key)
            if doc is not None and not self.table.document_path(key).is_file():
                data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
                row["document"] = self.table.write_document(
                    key, gzip.compress(data, compresslevel=6, mtime=0))
            elif doc is not None:
                row["document"] = self.table.document_path(key).relative_to(
                    self.table.root).as_posix()
            if known is None or (known != "ok" and row["status"] == "ok"):
                self.table.append([row])
                self._known[key] = str(row["status"])
                self._view = _with_row(self._view, row)
                self.table.compact()
        return key

    def add_finished(self, run: dict[str, Any], summary: dict[str, Any]) -> str | None:
        """:meth:`add` for a run a worker just finished; None (logged) when the row could not
        be written: the next start or ``/fleet`` page adds it."""
        try:
            return self.add(run, summary.get("error"))
        except Exception as exc:  # noqa: BLE001 - the run's own result must still be recorded
            log.warning("run %s: its fleet row was not written (%s: %s); it is added at the "
                        "next start or /fleet page", run["id"], type(exc).__name__, exc)
            return None

    def catch_up(self) -> int:
        """Add every finished run whose key the table lacks; returns how many were added."""
        added = 0
        for run in self.store.finished_runs():
            if self._stopping:
                break
            if run["fleet_key"] is not None and run["fleet_key"] in self._known:
                continue
            try:
                key = self.add(run, run["error"] if run["status"] == "failed" else None)
            except (OSError, ValueError) as exc:  # results gone or damaged: no row, said once
                log.warning("run %s: no fleet row (%s)", run["id"], exc)
                continue
            self.store.set_fleet_key(run["id"], key)
            added += 1
        return added

    def forget(self, key: str) -> None:
        """A key no run has any more: its stored document and job page go (the row stays in
        the table's history; the page lists only keys of existing runs)."""
        from rightsize.fleet.table import REPORTS_DIR

        with self._lock:
            self.table.document_path(key).unlink(missing_ok=True)
            (self.table.root / REPORTS_DIR / f"{key}.html").unlink(missing_ok=True)

    # -- the page --------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Import what finishing a run and drawing ``/fleet`` use, and draw an empty page
        (its templates compiled), once before the server answers: an import or a template
        compiled later on a thread holds the interpreter for up to a few hundred ms (compiling
        is one C call) while the event loop waits for it."""
        from rightsize.analyzers.document import Document  # noqa: F401 - finishing a run
        from rightsize.fleet.analyze import document_columns  # noqa: F401
        from rightsize.fleet.discover import first_wall_clock_us  # noqa: F401
        from rightsize.fleet.keys import content_key  # noqa: F401
        from rightsize.fleet.report import Filters, build
        from rightsize.reports.fleet_text import FleetRenderer
        from rightsize.reports.renderer import Style, render_as

        render_as(FleetRenderer({}), build(self._view.head(0).lazy(), PAGE_TABLE_NAME,
                                           Filters()), "html", Style())

    def page(self, filters: Any) -> str:
        """The fleet report page of the runs in the index, filtered (``Filters``)."""
        import polars as pl

        from rightsize.fleet.report import build
        from rightsize.fleet.schema import SOURCE_METRICS
        from rightsize.reports.fleet_text import FleetRenderer
        from rightsize.reports.renderer import Style, render_as

        self.catch_up()
        links = self.store.fleet_links()
        with self._lock:
            view = self._view
        rows = view.lazy().filter(pl.col("key").is_in(list(links))
                                  | (pl.col("source") == SOURCE_METRICS))
        model = build(rows, PAGE_TABLE_NAME, filters)
        hrefs = {key: (f"/r/{run_id}" if status == "done" else f"/runs/{run_id}")
                 for key, (run_id, status) in links.items()}
        hrefs.update(_job_pages(view))
        return render_as(FleetRenderer(hrefs), model, "html", Style())


def _job_pages(view: Any) -> dict[str, str]:
    """A job's capture links to its job's page (``/jobs/NAME``: every capture over time, each
    linked to its report), not to the one report of its latest capture."""
    from urllib.parse import quote

    import polars as pl

    from rightsize.fleet.schema import SOURCE_METRICS

    captures = view.filter(pl.col("entity").is_not_null()
                           & (pl.col("source") != SOURCE_METRICS)).select("key", "job")
    return {key: f"/jobs/{quote(job, safe='')}" for key, job in captures.iter_rows()}
