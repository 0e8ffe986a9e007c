"""The JSON API's routes: upload, list, read and delete runs (docs/serve.md, "HTTP API").

Input: the :class:`~rightsize.serve.app.Server` state and the request. Output: JSON responses;
errors are ``{"error": one line}``. An upload is a run's upload: the same files uploaded again
(in the same order) are another upload of the same run, with its own id, names and labels;
``DELETE`` removes one upload, the run (its analysis cancelled when running, its results and
the blobs nothing else uses) only with the last one. A stored analysis document is streamed
from disk as it stands (:mod:`.documents`), never parsed here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import sqlite3
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from rightsize.serve import documents, upload
from rightsize.serve.following import job_labels
from rightsize.serve.store import RUN_ID, blob_path
from rightsize.serve.worker import ANALYSIS_JSON

if TYPE_CHECKING:
    from rightsize.serve.app import Server

log = logging.getLogger("rightsize.serve")
SLACK_BYTES = 1024 * 1024  # multipart headers and boundaries around the files
PAGE_RUNS = 100  # runs per page of GET /api/runs and /runs, unless ?limit= says
MAX_PAGE_RUNS = 500
MAX_LABEL_CHARS = 100  # an upload's team or project label
RUN_KEYS = ("files", "created_at", "started_at", "finished_at", "analysis_s", "verdict",
            "sizing", "device", "step_ms", "team", "project", "run")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def create_run(server: Server, request: Request) -> Response:
    cfg = server.config
    if server.uploads >= cfg.max_concurrent_uploads:
        return server.busy(f"{cfg.max_concurrent_uploads} uploads are in progress")
    store, index = server.store, server.index
    if await index(store.count_active) >= cfg.max_queued_runs:
        return server.busy(f"{cfg.max_queued_runs} analyses are queued or running")
    labels = _labels(request)
    if isinstance(labels, Response):
        return labels
    job = job_labels(request.query_params)
    if isinstance(job, str):
        return error(400, job)
    length = request.headers.get("content-length", "")
    declared = int(length) if length.isdigit() else 0
    max_body = cfg.max_upload_bytes * cfg.max_files_per_run + SLACK_BYTES
    if declared > max_body:
        return error(413, "the upload is larger than the server's cap")
    free = (await asyncio.get_running_loop().run_in_executor(
        server.checks.io, shutil.disk_usage, cfg.data_dir)).free
    if free < max(2 * declared, cfg.min_free_bytes):
        return error(507, f"too little free disk space in {cfg.data_dir.name}/ for this upload")
    server.uploads += 1
    try:
        received = await upload.receive(
            request.headers.get("content-type", ""), request.stream(), cfg.tmp_dir,
            cfg.blobs_dir, cfg.max_upload_bytes, cfg.max_files_per_run,
            functools.partial(index, store.blob_in_use), max_body, server.checks,
            functools.partial(index, store.inflated_bytes))
    except upload.UploadRefused as exc:
        return error(exc.status, str(exc))
    except ClientDisconnect:
        return error(400, "the client went away during the upload")
    finally:
        server.uploads -= 1
    try:
        return await _record(server, received, *labels, job=job)
    except sqlite3.OperationalError as exc:  # the index's disk is full
        log.warning("cannot record an upload: %s", exc)
        return error(507, "the run index cannot be written (no space left on the server's "
                          "disk?); free some space or delete runs")
    finally:
        for r in received:
            upload.release(r)


async def _record(server: Server, received: list[upload.Received], team: str | None,
                  project: str | None, job: dict[str, Any] | None = None) -> Response:
    """The upload in the index: another upload of a run of the same files (that did not
    fail), or a new run queued for analysis; a job's capture (``job``: its labels) is added
    to the job's history before its run is analyzed."""
    files = [{"name": r.name, "sha256": r.sha256, "bytes": r.bytes} for r in received]
    upload_id, run_id, existed = await server.index(
        server.store.record,
        files, upload.input_key(received), team, project,
        input_bytes=sum(r.inflated for r in received),
        inflated={r.sha256: r.inflated for r in received})
    if job:
        await server.index(server.following.index.add, upload_id, job)
    if not existed:
        server.jobs.submit(run_id)
    elif job:  # an analysis already finished (or under way: then its end checks it)
        asyncio.get_running_loop().run_in_executor(None, server.following.finished, run_id)
    return JSONResponse({"id": upload_id, "run": run_id, "url": f"/r/{upload_id}",
                         "existing": existed}, status_code=200 if existed else 201)


def _labels(request: Request) -> tuple[str | None, str | None] | Response:
    """An upload's ``team`` and ``project`` (query parameters), checked."""
    out: list[str | None] = []
    for name in ("team", "project"):
        value = request.query_params.get(name, "").strip()
        if len(value) > MAX_LABEL_CHARS or not value.isprintable():
            return error(400, f"{name} must be at most {MAX_LABEL_CHARS} printable characters")
        out.append(value or None)
    return out[0], out[1]


async def list_runs(server: Server, request: Request) -> Response:
    page = await page_of_runs(server, request)
    if isinstance(page, Response):
        return page
    runs, next_url = page
    return JSONResponse({"runs": [{**r, "url": f"/r/{r['id']}"} for r in runs],
                         "next": next_url})


async def page_of_runs(server: Server, request: Request, path: str = "/api/runs"
                       ) -> tuple[list[dict[str, Any]], str | None] | Response:
    """One page of uploads, newest first, and the URL of the next page (None on the last):
    ``q`` filters, ``limit`` (1-500, default 100) sizes it, ``before=ID`` continues after the
    upload ID (the ``next`` link carries it)."""
    params = request.query_params
    query, before = params.get("q") or None, params.get("before") or None
    limit_text = params.get("limit", str(PAGE_RUNS))
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE_RUNS:
        return error(400, f"limit must be a whole number from 1 to {MAX_PAGE_RUNS}")
    if before is not None and not RUN_ID.match(before):
        return error(400, "before must be a run id")
    limit = int(limit_text)
    runs = await server.index(server.store.runs, query, limit + 1, before)
    next_url = None
    if len(runs) > limit:
        runs = runs[:limit]
        next_params = {"before": runs[-1]["id"], "limit": str(limit)}
        if query:
            next_params["q"] = query
        next_url = f"{path}?{urlencode(next_params)}"
    return runs, next_url


async def get_run(server: Server, request: Request) -> Response:
    run = await server.run_or_none(request)
    if run is None:
        return error(404, "no such run")
    head = {"id": run["id"], "status": run["status"], "error": run["error"],
            "url": f"/r/{run['id']}", **{k: run[k] for k in RUN_KEYS}}
    stored = None
    if run["status"] == "done" and request.query_params.get("analysis") != "0":
        stored = server.config.runs_dir / run["run"] / ANALYSIS_JSON
    try:
        return await documents.run_json(head, stored)
    except documents.Missing:
        return error(404, "the run's analysis is missing")


async def get_job(server: Server, request: Request) -> Response:
    """A job's captures, oldest first, each with its run, summary and check (``/jobs/NAME``
    as JSON)."""
    name = request.path_params["name"]
    history = await asyncio.get_running_loop().run_in_executor(
        None, server.following.captures, name)
    if not history:
        return error(404, "no such job")
    return JSONResponse({"job": name, "captures": history})


async def delete_run(server: Server, request: Request) -> Response:
    """Remove this upload; the run with it when it was the run's last upload (an analysis in
    progress is stopped)."""
    upload_id = request.path_params["run_id"]
    if not RUN_ID.match(upload_id):
        return error(404, "no such run")
    found = await server.index(_delete, server, upload_id)
    if found is None:
        return error(404, "no such run")
    run, removed = found
    if removed:
        if server.jobs.cancel(run["id"]):
            log.info("run %s: its analysis was stopped (deleted)", run["id"])
        await asyncio.get_running_loop().run_in_executor(None, remove_results, server, run)
    return Response(status_code=204)


def _delete(server: Server, upload_id: str) -> tuple[dict[str, Any], bool] | None:
    """On the index's thread: the upload removed, and with its run the blobs no run uses nor
    an upload in flight (the index's one thread orders this with those uploads' lookups)."""
    found = server.store.delete(upload_id)
    if found is not None and found[1]:
        for f in found[0]["files"]:
            sha = f["sha256"]
            if not server.store.blob_in_use(sha) and not upload.in_flight(sha):
                blob_path(server.config.blobs_dir, sha).unlink(missing_ok=True)
                server.store.forget_blob(sha)
    return found


def remove_results(server: Server, run: dict[str, Any]) -> None:
    """A removed run's directory, and its fleet document when no run has its files (on a
    thread: the fleet table's lock may be held by a page being drawn)."""
    shutil.rmtree(server.config.runs_dir / run["id"], ignore_errors=True)
    fleet_key = run.get("fleet_key")
    if fleet_key is not None and fleet_key not in server.store.fleet_links():
        server.fleet.forget(fleet_key)  # no run has those files now
