"""The per-job worker of a fleet scan: one job's inputs -> its row and its document.

Input: a :class:`Task` (the job's paths, its key and labels). Output: :class:`Result`: the row
(every column of :data:`rightsize.fleet.schema.COLUMNS` but ``document``, which the driver
fills when it stores the document) and the document gzipped. Runs in an engine worker
(:mod:`rightsize.engine`): it is a module-level function of picklable values and returns a
few kB, never frames. An input rightsize cannot read (a :class:`RightsizeError`) is a row with
status ``bad-input`` and the one-line reason; anything else raises, and the driver records the
job as ``failed``.

Recorded at: a run directory's ``started_at``; else the trace's first event when its clock is
the wall clock (Kineto's epoch timestamps, between 2000 and tomorrow); else the newest file's
modification time. ``recorded_at_source`` says which.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize import __version__
from rightsize.errors import RightsizeError
from rightsize.fleet.discover import Job
from rightsize.fleet.schema import (
    SCHEMA_VERSION,
    SHARES,
    SOURCE_TRACE,
    STATUS_BAD_INPUT,
    STATUS_OK,
    level,
)

if TYPE_CHECKING:
    from rightsize.analyzers.document import Document
    from rightsize.fleet.remote import RemoteJob

_EPOCH_MIN_NS = 946_684_800 * 10**9  # 2000-01-01: earlier "timestamps" are not wall-clock


@dataclass(frozen=True, slots=True)
class Task:
    key: str
    job: Job
    team: str | None = None
    project: str | None = None
    labels_source: str | None = None
    scanned_at: datetime | None = None
    remote: RemoteJob | None = None  # the job's files are object-store URLs (fleet/remote.py)


@dataclass(frozen=True, slots=True)
class Result:
    row: dict[str, Any]
    document: bytes | None  # the gzipped document JSON (None for a bad input)


def one_line(text: object, limit: int = 500) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def identity_row(*, key: str, job: str, kind: str, paths: list[str], files: int, size: int,
                 recorded_at: datetime, recorded_at_source: str, scanned_at: datetime,
                 status: str, reason: str | None = None, team: str | None = None,
                 project: str | None = None, labels_source: str | None = None
                 ) -> dict[str, Any]:
    """A row with its identity columns filled and every other column null: what a scan's
    rows and ``rightsize serve``'s rows of uploads (:mod:`rightsize.serve.fleet`) start from."""
    from rightsize.fleet.schema import COLUMNS

    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(key=key, job=job, kind=kind, source=SOURCE_TRACE, paths=paths, files=files,
               bytes=size,
               recorded_at=recorded_at, recorded_at_source=recorded_at_source,
               scanned_at=scanned_at, rightsize_version=__version__,
               schema_version=SCHEMA_VERSION, status=status, reason=reason, team=team,
               project=project, labels_source=labels_source, rules=[])
    return row


def base_row(task: Task, status: str, reason: str | None = None) -> dict[str, Any]:
    """The identity columns of a scanned job (every other column null)."""
    job = task.job
    size = 0
    if task.remote is not None:
        size = sum(task.remote.sizes)
    for f in job.files if task.remote is None else ():
        try:
            size += os.stat(f).st_size
        except OSError:
            pass
    recorded_at, source = _modified(task)
    return identity_row(key=task.key, job=job.name, kind=job.kind, paths=list(job.paths),
                        files=len(job.files), size=size, recorded_at=recorded_at,
                        recorded_at_source=source,
                        scanned_at=task.scanned_at or datetime.now(UTC), status=status,
                        reason=reason, team=task.team, project=task.project,
                        labels_source=task.labels_source)


def _modified(task: Task) -> tuple[datetime, str]:
    """The newest file's modification time (``mtime``); an object-store job's is the store's,
    or the scan's time when the store gives none (``scanned``)."""
    if task.remote is not None:
        if task.remote.mtime_ns is not None:
            return datetime.fromtimestamp(task.remote.mtime_ns / 1e9, UTC), "mtime"
        return task.scanned_at or datetime.now(UTC), "scanned"
    stamps = []
    for f in task.job.files:
        try:
            stamps.append(os.stat(f).st_mtime)
        except OSError:
            pass
    return datetime.fromtimestamp(max(stamps) if stamps else time.time(), UTC), "mtime"


def analyze_job(task: Task) -> Result:
    """Analyze one job (see the module docstring)."""
    if task.remote is not None:
        return _analyze_remote(task)
    return _analyze(task, task.job)


def _analyze_remote(task: Task) -> Result:
    """An object-store job: its files downloaded to a temporary folder of this worker
    (removed after), analyzed there, the row and document naming the URLs."""
    from rightsize.fleet.remote import RemoteError, fetch, tmp_folder

    assert task.remote is not None
    start = time.perf_counter()
    with tmp_folder() as tmp:
        try:
            local, renames = fetch(task.job, task.remote, Path(tmp))
        except RemoteError as exc:
            row = base_row(task, STATUS_BAD_INPUT, one_line(exc))
            row["analysis_s"] = time.perf_counter() - start
            return Result(row, None)
        result = _analyze(task, local, renames)
    result.row["analysis_s"] = time.perf_counter() - start  # the download included
    return result


def _analyze(task: Task, job: Job, renames: list[tuple[str, str]] | None = None) -> Result:
    """Analyze ``job`` (the task's own, or its files downloaded: ``renames`` maps their local
    paths back to the URLs in what the row and the document say)."""
    from rightsize.fleet.remote import relabel
    from rightsize.pipeline import HERE, run

    start = time.perf_counter()
    try:  # in this worker: the scan maps jobs over the engine, a job's traces are read here
        result = run(list(job.paths), run_on=HERE)
        doc = result.document
        manifest = _manifest(job)
    except RightsizeError as exc:
        reason = relabel(str(exc), renames) if renames else str(exc)
        row = base_row(task, STATUS_BAD_INPUT, one_line(reason))
        row["analysis_s"] = time.perf_counter() - start
        return Result(row, None)
    row = base_row(task, STATUS_OK, task.job.note)
    if manifest is not None and task.labels_source is None:
        from rightsize.fleet.labels import from_manifest

        lab = from_manifest(manifest)
        row.update(team=lab.team, project=lab.project, labels_source=lab.source)
    row.update(_recorded(task, manifest, result.first_event_ns))
    if manifest is not None and isinstance(manifest.get("capture"), dict):
        row.update(capture_identity(manifest))
    row.update(document_columns(doc))
    if manifest is not None and row["gpus"]:
        duration = manifest.get("duration_s")
        if isinstance(duration, int | float) and duration > 0:
            row["run_gpu_hours"] = duration * row["gpus"] / 3600
    text = doc.dumps(indent=None)
    if renames:
        text = relabel(text, renames, json_text=True)
    data = gzip.compress(text.encode(), compresslevel=6, mtime=0)
    row["analysis_s"] = time.perf_counter() - start
    return Result(row, data)


def capture_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """A capture of an on-demand run (docs/captures.md) is a recording of its job: named by
    the job's labels, one entity with the job's other captures (and with the metrics rows of
    its Kubernetes workload when the labels name one)."""
    found, given = manifest.get("labels"), manifest.get("command")
    labels: dict[str, Any] = found if isinstance(found, dict) else {}
    command: dict[str, Any] = given if isinstance(given, dict) else {}
    name = str(labels.get("name") or command.get("name") or "job")
    return {"job": name, "entity": entity(name, labels.get("namespace"),
                                          labels.get("workload"))}


def entity(job: str, namespace: Any = None, workload: Any = None) -> str:
    """``workload:NAMESPACE/NAME`` when both are named (fleet metrics' default workload name,
    so the two meet), else ``job:NAME``."""
    if isinstance(namespace, str) and namespace and isinstance(workload, str) and workload:
        return f"workload:{namespace}/{workload}"
    return f"job:{job}"


def _manifest(job: Job) -> dict[str, Any] | None:
    if job.kind != "run":
        return None
    from rightsize.rundir import read_manifest

    return read_manifest(job.paths[0])


def _recorded(task: Task, manifest: dict[str, Any] | None,
              first_event_ns: int | None) -> dict[str, Any]:
    started = manifest.get("started_at") if manifest else None
    if isinstance(started, str):
        try:
            at = datetime.fromisoformat(started)
            return {"recorded_at": at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC),
                    "recorded_at_source": "manifest"}
        except ValueError:
            pass
    first = wall_clock_start(first_event_ns)
    if first is not None:
        return {"recorded_at": first, "recorded_at_source": "trace"}
    at, source = _modified(task)
    return {"recorded_at": at, "recorded_at_source": source}


def wall_clock_start(first: int | None) -> datetime | None:
    """The traces' first event (``pipeline.Result.first_event_ns``) when their clock is the
    wall clock (epoch timestamps, between 2000 and tomorrow), else None (``rightsize serve``
    records it too)."""
    if first is not None and _EPOCH_MIN_NS <= first <= (time.time() + 86400) * 1e9:
        return datetime.fromtimestamp(first / 1e9, UTC)
    return None


def document_columns(doc: Document) -> dict[str, Any]:
    """The row's hardware, step, verdict, sizing and rule columns from a document."""
    dev = doc.primary_device
    dg = doc.diagnosis
    if doc.job is not None:
        gpus = doc.job.world_size or doc.job.rank_count
        nodes = doc.job.nodes
    else:
        gpus = 1 if dev is not None else 0
        nodes = 1
    out: dict[str, Any] = {
        "device": str(dg.device) if dg is not None else ("gpu" if dev is not None else None),
        "gpu_reported": dev.name if dev is not None else None,
        "gpus": gpus, "nodes": nodes,
        "steps": doc.steps.count, "step_ms": doc.steps.mean_ms,
        "bound": str(dg.bound) if dg is not None and dg.bound is not None else None,
        "confidence": dg.confidence if dg is not None else None,
        "confidence_level": level(dg.confidence) if dg is not None else None,
        "gpu_util_pct": doc.metrics.gpu_util_pct,
        "sm_efficiency_pct": doc.metrics.sm_efficiency_pct,
        "peak_memory_bytes": doc.metrics.peak_memory_bytes,
        "precision": doc.precision.workload if doc.precision is not None else None,
        "rules": [_rule(r) for r in doc.recommendations],
    }
    for s in SHARES:
        out[f"{s}_pct"] = dg.shares_pct.get(s) if dg is not None else None
    sz = doc.sizing
    out["gpu"] = (sz.current if sz is not None else None) or out["gpu_reported"]
    if sz is None:
        out["sizing_reason"] = "no sizing: nothing measured to project"
        return out
    cur = sz.candidate(sz.current, 1) if sz.current else None
    rec = sz.candidate(sz.recommended, sz.recommended_gpus) if sz.recommended else None
    out.update(
        sizing_verdict=str(sz.verdict) if sz.verdict is not None else None,
        recommended_gpu=sz.recommended,
        recommended_gpus=sz.recommended_gpus if sz.recommended else None,
        recommended=f"{sz.recommended_gpus} x {sz.recommended}" if sz.recommended else None,
        sizing_reason=one_line(sz.reason, 1000),
        objective=str(sz.objective) if sz.objective is not None else None,
        savings_pct=sz.savings_pct,
        usd_per_gpu_hour=(cur.usd_per_hour / (cur.gpus * (cur.ranks or 1))
                          if cur is not None and cur.usd_per_hour is not None else None),
        usd_per_1k_steps=cur.usd_per_1k_steps if cur is not None else None,
        recommended_step_ms=rec.projected_step_ms if rec is not None else None,
        recommended_usd_per_1k_steps=rec.usd_per_1k_steps if rec is not None else None,
    )
    return out


def _rule(r: Any) -> dict[str, Any]:
    w = r.what_if
    return {"id": r.id, "title": r.title,
            "step_ms": w.step_ms if w is not None else None,
            "step_ms_low": w.step_ms_low if w is not None else None,
            "step_ms_high": w.step_ms_high if w is not None else None}


def read_document(path: Path) -> dict[str, Any]:
    """A stored document's JSON (``documents/ab/<key>.json.gz``)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data
