"""The ASGI application: routes, the token/Host/CSRF gate, upload and concurrency limits.

Input: a :class:`~rightsize.serve.config.ServeConfig`. Output: a Starlette app, served by
uvicorn from ``rightsize serve`` (through :mod:`.guard`, which bounds every phase of a
request). The HTTP API is documented in docs/serve.md; JSON errors are ``{"error": one line}``,
an unexpected one included (500, its traceback in the rate-limited log). Beyond the limits on
concurrent uploads and queued analyses the answer is 503 with ``Retry-After``; a full disk is
507. Start-up checks the index (``PRAGMA integrity_check``), empties ``tmp/`` and adopts or
requeues the runs a stopped server left unfinished, and adds to the data directory's fleet
table the finished runs it lacks (:mod:`.fleet`, in the background).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rightsize.serve import pages, security, upload
from rightsize.serve.compare import compare_rows
from rightsize.serve.config import TOKEN_COOKIE, ServeConfig
from rightsize.serve.fleet import ServeFleet
from rightsize.serve.jobs import JobRunner
from rightsize.serve.store import RUN_ID, Store, blob_path
from rightsize.serve.worker import ANALYSIS_JSON, REPORT_HTML

log = logging.getLogger("rightsize.serve")
_SLACK_BYTES = 1024 * 1024  # multipart headers and boundaries around the files
PAGE_RUNS = 100  # runs per page of GET /api/runs and /runs, unless ?limit= says
MAX_PAGE_RUNS = 500
MAX_LABEL_CHARS = 100  # an upload's team or project label
MAX_FILTER_VALUES = 50  # team or project values one /fleet request may name


class Server:
    """The state behind the routes: settings, the index, the job runner, the upload count."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.store = Store(config.db_path)
        self.store.check()
        swept = upload.sweep_tmp(config.tmp_dir)
        if swept:
            log.info("start-up: removed %d partial uploads from tmp/", swept)
        self.fleet = ServeFleet(config, self.store)
        self.jobs = JobRunner(config, self.store, self.fleet)
        self.uploads = 0

    # -- API -------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def create_run(self, request: Request) -> Response:
        cfg = self.config
        if self.uploads >= cfg.max_concurrent_uploads:
            return self._busy(f"{cfg.max_concurrent_uploads} uploads are in progress")
        if self.store.count_active() >= cfg.max_queued_runs:
            return self._busy(f"{cfg.max_queued_runs} analyses are queued or running")
        labels = _labels(request)
        if isinstance(labels, Response):
            return labels
        length = request.headers.get("content-length", "")
        declared = int(length) if length.isdigit() else 0
        max_body = cfg.max_upload_bytes * cfg.max_files_per_run + _SLACK_BYTES
        if declared > max_body:
            return _error(413, "the upload is larger than the server's cap")
        if shutil.disk_usage(cfg.data_dir).free < max(2 * declared, cfg.min_free_bytes):
            return _error(507, f"too little free disk space in {cfg.data_dir.name}/ for this "
                               "upload")
        self.uploads += 1
        try:
            received = await upload.receive(
                request.headers.get("content-type", ""), request.stream(), cfg.tmp_dir,
                cfg.blobs_dir, cfg.max_upload_bytes, cfg.max_files_per_run,
                self.store.blob_in_use, max_body)
        except upload.UploadRefused as exc:
            return _error(exc.status, str(exc))
        except ClientDisconnect:
            return _error(400, "the client went away during the upload")
        finally:
            self.uploads -= 1
        try:
            return self._record(received, *labels)
        except sqlite3.OperationalError as exc:  # the index's disk is full
            log.warning("cannot record an upload: %s", exc)
            return _error(507, "the run index cannot be written (no space left on the "
                               "server's disk?); free some space or delete runs")
        finally:
            for r in received:
                upload.release(r)

    def _record(self, received: list[upload.Received], team: str | None,
                project: str | None) -> Response:
        key = upload.input_key(received)
        existing = self.store.find_reusable(key)
        if existing is not None:  # the same inputs again: one stored copy, one analysis
            return JSONResponse({"id": existing["id"], "url": f"/r/{existing['id']}",
                                 "existing": True}, status_code=200)
        files = [{"name": r.name, "sha256": r.sha256, "bytes": r.bytes} for r in received]
        run_id = self.store.create(files, key, team, project)
        self.jobs.submit(run_id)
        return JSONResponse({"id": run_id, "url": f"/r/{run_id}", "existing": False},
                            status_code=201)

    async def list_runs(self, request: Request) -> Response:
        page = self._page_of_runs(request)
        if isinstance(page, Response):
            return page
        runs, next_url = page
        return JSONResponse({"runs": [{**r, "url": f"/r/{r['id']}"} for r in runs],
                             "next": next_url})

    def _page_of_runs(self, request: Request,
                      path: str = "/api/runs") -> tuple[list[dict[str, Any]], str | None] | Response:
        """One page of runs, newest first, and the URL of the next page (None on the last):
        ``q`` filters, ``limit`` (1-500, default 100) sizes it, ``before=ID`` continues after
        the run ID (the ``next`` link carries it)."""
        params = request.query_params
        query, before = params.get("q") or None, params.get("before") or None
        limit_text = params.get("limit", str(PAGE_RUNS))
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE_RUNS:
            return _error(400, f"limit must be a whole number from 1 to {MAX_PAGE_RUNS}")
        if before is not None and not RUN_ID.match(before):
            return _error(400, "before must be a run id")
        limit = int(limit_text)
        runs = self.store.runs(query, limit + 1, before)
        next_url = None
        if len(runs) > limit:
            runs = runs[:limit]
            next_params = {"before": runs[-1]["id"], "limit": str(limit)}
            if query:
                next_params["q"] = query
            next_url = f"{path}?{urlencode(next_params)}"
        return runs, next_url

    async def get_run(self, request: Request) -> Response:
        run = self._run_or_none(request)
        if run is None:
            return _error(404, "no such run")
        analysis = None
        if run["status"] == "done" and request.query_params.get("analysis") != "0":
            analysis = json.loads((self._dir(run) / ANALYSIS_JSON).read_text("utf-8"))
        return JSONResponse({"id": run["id"], "status": run["status"], "error": run["error"],
                             "analysis": analysis, "url": f"/r/{run['id']}",
                             **{k: run[k] for k in ("files", "created_at", "started_at",
                                                    "finished_at", "analysis_s", "verdict",
                                                    "sizing", "device", "step_ms", "team",
                                                    "project")}})

    async def delete_run(self, request: Request) -> Response:
        run = self._run_or_none(request)
        if run is None:
            return _error(404, "no such run")
        if run["status"] == "running":
            return _error(409, "the run is being analyzed; delete it when it is done")
        fleet_key = self.store.fleet_key(run["id"])
        self.store.delete(run["id"])
        shutil.rmtree(self._dir(run), ignore_errors=True)
        if fleet_key is not None and fleet_key not in self.store.fleet_links():
            self.fleet.forget(fleet_key)  # no run has those files now
        for f in run["files"]:
            if not self.store.blob_in_use(f["sha256"]) and not upload.in_flight(f["sha256"]):
                blob_path(self.config.blobs_dir, f["sha256"]).unlink(missing_ok=True)
        return Response(status_code=204)

    # -- pages -----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        cfg = self.config
        if request.query_params.get("token") is not None and cfg.token is not None:
            # Drop the token from the URL; keep it in a cookie only when it is the right one
            # (a wrong one reached here on a valid cookie, which it must not replace).
            response: Response = RedirectResponse("/", status_code=303)
            if security.token_in_query(cfg, request):
                response.set_cookie(TOKEN_COOKIE, cfg.token, httponly=True, samesite="lax",
                                    secure=security.public_scheme(cfg, request) == "https")
            return response
        return _page("upload.html.j2", max_files=cfg.max_files_per_run,
                     max_upload=cfg.max_upload_bytes, base_url=security.base_url(cfg, request))

    async def runs_page(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        page = self._page_of_runs(request, "/runs")
        if isinstance(page, Response):
            return page
        runs, next_url = page
        return _page("runs.html.j2", runs=runs, query=query, next_url=next_url,
                     first=not request.query_params.get("before"))

    async def run_page(self, request: Request) -> Response:
        run = self._run_or_none(request)
        if run is None:
            return _page("runs.html.j2", runs=[], query="", status=404)
        return _page("run.html.j2", run=run)

    async def report(self, request: Request) -> Response:
        run = self._run_or_none(request)
        if run is None:
            return _error(404, "no such run")
        if run["status"] != "done":
            return RedirectResponse(f"/runs/{run['id']}", status_code=303)
        path = self._dir(run) / REPORT_HTML
        try:
            html = path.read_text("utf-8")
        except OSError:
            return _error(404, "the run's report is missing")
        return HTMLResponse(pages.with_way_back(html, run["id"]),
                            headers={"Content-Security-Policy": pages.REPORT_CSP})

    async def compare(self, request: Request) -> Response:
        done = self.store.runs(limit=MAX_PAGE_RUNS, status="done")
        a_id = request.query_params.get("a", "")
        b_id = request.query_params.get("b", "")
        chosen = bool(a_id or b_id)
        for extra in (a_id, b_id):  # an older run named in the URL is offered too
            if extra and all(r["id"] != extra for r in done):
                run = self.store.get(extra)
                if run is not None and run["status"] == "done":
                    done.append(run)
        if not chosen and done:  # the picker: A the run before the newest, B the newest
            b_id = done[0]["id"]
            a_id = done[1]["id"] if len(done) > 1 else b_id
        a, b = self.store.get(a_id), self.store.get(b_id)
        context: dict[str, Any] = {"choices": done, "a_id": a_id, "b_id": b_id, "rows": [],
                                   "a_name": "", "b_name": ""}
        if chosen:
            if a is None or b is None or a["status"] != "done" or b["status"] != "done":
                return _page("compare.html.j2", status=404, **context)
            doc_a = json.loads((self._dir(a) / ANALYSIS_JSON).read_text("utf-8"))
            doc_b = json.loads((self._dir(b) / ANALYSIS_JSON).read_text("utf-8"))
            context.update(rows=compare_rows(doc_a, doc_b), a_name=a["files"][0]["name"],
                           b_name=b["files"][0]["name"])
        return _page("compare.html.j2", **context)

    async def fleet_page(self, request: Request) -> Response:
        """The fleet report of every finished upload and the table's metrics workloads
        (filters: ``team``, ``project``, repeated or comma-separated; ``since``, ``until``:
        recorded UTC days, YYYY-MM-DD; ``source``: trace or metrics)."""
        from rightsize.fleet.report import Filters

        params = request.query_params
        values = {}
        for name in ("team", "project"):
            given = [v.strip() for item in params.getlist(name) for v in item.split(",")]
            values[name] = tuple(dict.fromkeys(v for v in given if v))
            if len(values[name]) > MAX_FILTER_VALUES:
                return _error(400, f"at most {MAX_FILTER_VALUES} {name} values")
        days: dict[str, date | None] = {}
        for name in ("since", "until"):
            text = params.get(name, "").strip()
            try:
                days[name] = date.fromisoformat(text) if text else None
            except ValueError:
                return _error(400, f"{name} must be a day, YYYY-MM-DD")
        if days["since"] and days["until"] and days["since"] > days["until"]:
            return _error(400, "since is after until")
        source = params.get("source", "").strip()
        if source not in ("", "trace", "metrics"):
            return _error(400, "source must be trace or metrics")
        filters = Filters(values["team"], values["project"], days["since"], days["until"],
                          (source,) if source else ())
        html = await asyncio.get_running_loop().run_in_executor(None, self.fleet.page, filters)
        page = pages.with_fleet_bar(html, filters)
        return HTMLResponse(page, headers={"Content-Security-Policy": pages.fleet_csp(page)})

    async def static(self, request: Request) -> Response:
        found = pages.asset(request.path_params["name"])
        if found is None:
            return _error(404, "no such asset")
        body, media = found
        return Response(body, media_type=media,
                        headers={"Cache-Control": "private, max-age=3600"})

    # -- helpers ---------------------------------------------------------------------------

    def _run_or_none(self, request: Request) -> dict[str, Any] | None:
        run_id = request.path_params["run_id"]
        return self.store.get(run_id) if RUN_ID.match(run_id) else None

    def _dir(self, run: dict[str, Any]) -> Any:
        return self.config.runs_dir / run["id"]

    def _busy(self, why: str) -> Response:
        return _error(503, f"busy: {why}; retry later",
                      headers={"Retry-After": str(self.config.retry_after_s)})


def _labels(request: Request) -> tuple[str | None, str | None] | Response:
    """An upload's ``team`` and ``project`` (query parameters), checked."""
    out: list[str | None] = []
    for name in ("team", "project"):
        value = request.query_params.get(name, "").strip()
        if len(value) > MAX_LABEL_CHARS or not value.isprintable():
            return _error(400, f"{name} must be at most {MAX_LABEL_CHARS} printable characters")
        out.append(value or None)
    return out[0], out[1]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _page(template: str, status: int = 200, **context: Any) -> Response:
    return HTMLResponse(pages.render_page(template, **context), status_code=status,
                        headers={"Content-Security-Policy": pages.PAGE_CSP})


def create_app(config: ServeConfig) -> Starlette:
    server = Server(config)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.jobs.resume()
        loop = asyncio.get_running_loop()
        catch_up = loop.run_in_executor(None, _catch_up, server.fleet)
        yield
        server.fleet.stop()
        await server.jobs.close()
        await catch_up
        server.fleet.close()

    routes = [
        Route("/healthz", server.healthz),
        Route("/api/runs", server.create_run, methods=["POST"]),
        Route("/api/runs", server.list_runs),
        Route("/api/runs/{run_id}", server.get_run),
        Route("/api/runs/{run_id}", server.delete_run, methods=["DELETE"]),
        Route("/", server.index),
        Route("/runs", server.runs_page),
        Route("/runs/{run_id}", server.run_page),
        Route("/r/{run_id}", server.report),
        Route("/compare", server.compare),
        Route("/fleet", server.fleet_page),
        Route("/static/{name}", server.static),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # no icon, no 404
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = server
    app.add_middleware(Gate, config=config)
    return app


def _catch_up(fleet: ServeFleet) -> None:
    """Start-up: the finished runs the fleet table lacks (runs analyzed before it existed)."""
    try:
        added = fleet.catch_up()
    except Exception as exc:  # noqa: BLE001 - the server serves on; the page tries again
        log.warning("start-up: the fleet table was not brought up to date (%s: %s)",
                    type(exc).__name__, exc)
        return
    if added:
        log.info("start-up: %d finished runs added to the fleet table", added)


class Gate:
    """Pure ASGI middleware (the body stream passes through untouched): Host, token, CSRF,
    and the headers every answer carries (:data:`security.RESPONSE_HEADERS`)."""

    def __init__(self, app: Any, config: ServeConfig) -> None:
        self.app, self.config = app, config

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False

        async def send_with_headers(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((k, v) for k, v in security.RESPONSE_HEADERS
                                        if k not in names)]
            await send(message)

        refusal = self._check(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:  # a bug: one line of JSON, the traceback in the log once
            log.error("internal error on %s %s", scope.get("method"), scope.get("path"),
                      exc_info=exc)
            if not started:
                await _error(500, f"internal error ({type(exc).__name__}); see the server's "
                                  "log")(scope, receive, send_with_headers)

    def _check(self, request: Request) -> Response | None:
        config = self.config
        if not security.host_ok(config, request):
            return _error(421, security.host_refusal(config))
        if not security.token_ok(config, request) and not security.token_in_query(config,
                                                                                   request):
            return _error(401, "a token is required: send 'Authorization: Bearer TOKEN' or "
                               "open /?token=TOKEN once")
        if not security.same_origin(config, request):
            return _error(403, "cross-site request refused")
        return None
