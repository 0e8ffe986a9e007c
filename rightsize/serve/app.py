"""The ASGI application: routes, the token/Host/CSRF gate, upload and concurrency limits.

Input: a :class:`~rightsize.serve.config.ServeConfig`. Output: a Starlette app, served by
uvicorn from ``rightsize serve``. The HTTP API is documented in docs/serve.md; JSON errors are
``{"error": one line}``. Beyond the limits on concurrent uploads and queued analyses the
answer is 503 with ``Retry-After``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rightsize.serve import pages, security, upload
from rightsize.serve.compare import compare_rows
from rightsize.serve.config import TOKEN_COOKIE, ServeConfig
from rightsize.serve.jobs import JobRunner
from rightsize.serve.store import RUN_ID, Store, blob_path
from rightsize.serve.worker import ANALYSIS_JSON, REPORT_HTML

_SLACK_BYTES = 1024 * 1024  # multipart headers and boundaries around the files
_MIN_FREE_BYTES = 256 * 1024 * 1024  # room for the run's analysis.json and report.html too


class Server:
    """The state behind the routes: settings, the index, the job runner, the upload count."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.store = Store(config.db_path)
        self.jobs = JobRunner(config, self.store)
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
        length = request.headers.get("content-length", "")
        declared = int(length) if length.isdigit() else 0
        if declared > cfg.max_upload_bytes * cfg.max_files_per_run + _SLACK_BYTES:
            return _error(413, "the upload is larger than the server's cap")
        if shutil.disk_usage(cfg.data_dir).free < max(2 * declared, _MIN_FREE_BYTES):
            return _error(507, f"too little free disk space in {cfg.data_dir.name}/ for this "
                               "upload")
        self.uploads += 1
        try:
            received = await upload.receive(
                request.headers.get("content-type", ""), request.stream(), cfg.tmp_dir,
                cfg.blobs_dir, cfg.max_upload_bytes, cfg.max_files_per_run,
                self.store.blob_in_use)
        except upload.UploadRefused as exc:
            return _error(exc.status, str(exc))
        except ClientDisconnect:
            return _error(400, "the client went away during the upload")
        finally:
            self.uploads -= 1
        try:
            return self._record(received)
        finally:
            for r in received:
                upload.release(r)

    def _record(self, received: list[upload.Received]) -> Response:
        key = upload.input_key(received)
        existing = self.store.find_reusable(key)
        if existing is not None:  # the same inputs again: one stored copy, one analysis
            return JSONResponse({"id": existing["id"], "url": f"/r/{existing['id']}",
                                 "existing": True}, status_code=200)
        files = [{"name": r.name, "sha256": r.sha256, "bytes": r.bytes} for r in received]
        run_id = self.store.create(files, key)
        self.jobs.submit(run_id)
        return JSONResponse({"id": run_id, "url": f"/r/{run_id}", "existing": False},
                            status_code=201)

    async def list_runs(self, request: Request) -> Response:
        runs = self.store.runs(request.query_params.get("q"))
        return JSONResponse({"runs": [{**r, "url": f"/r/{r['id']}"} for r in runs]})

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
                                                    "sizing", "device", "step_ms")}})

    async def delete_run(self, request: Request) -> Response:
        run = self._run_or_none(request)
        if run is None:
            return _error(404, "no such run")
        if run["status"] == "running":
            return _error(409, "the run is being analyzed; delete it when it is done")
        self.store.delete(run["id"])
        shutil.rmtree(self._dir(run), ignore_errors=True)
        for f in run["files"]:
            if not self.store.blob_in_use(f["sha256"]) and not upload.in_flight(f["sha256"]):
                blob_path(self.config.blobs_dir, f["sha256"]).unlink(missing_ok=True)
        return Response(status_code=204)

    # -- pages -----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None and self.config.token is not None:  # the gate accepted it: keep it in a cookie, drop it from the URL
            response: Response = RedirectResponse("/", status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        return _page("upload.html.j2", max_files=self.config.max_files_per_run,
                     max_upload=self.config.max_upload_bytes,
                     base_url=f"{request.url.scheme}://{request.headers.get('host', '')}")

    async def runs_page(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        return _page("runs.html.j2", runs=self.store.runs(query or None), query=query)

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
        return FileResponse(self._dir(run) / REPORT_HTML, media_type="text/html",
                            headers={"Content-Security-Policy": pages.REPORT_CSP})

    async def compare(self, request: Request) -> Response:
        done = [r for r in self.store.runs() if r["status"] == "done"]
        a_id = request.query_params.get("a", "")
        b_id = request.query_params.get("b", "")
        a, b = self.store.get(a_id), self.store.get(b_id)
        context: dict[str, Any] = {"choices": done, "a_id": a_id, "b_id": b_id, "rows": [],
                                   "a_name": "", "b_name": ""}
        if a_id or b_id:
            if a is None or b is None or a["status"] != "done" or b["status"] != "done":
                return _page("compare.html.j2", status=404, **context)
            doc_a = json.loads((self._dir(a) / ANALYSIS_JSON).read_text("utf-8"))
            doc_b = json.loads((self._dir(b) / ANALYSIS_JSON).read_text("utf-8"))
            context.update(rows=compare_rows(doc_a, doc_b), a_name=a["files"][0]["name"],
                           b_name=b["files"][0]["name"])
        return _page("compare.html.j2", **context)

    async def static(self, request: Request) -> Response:
        found = pages.asset(request.path_params["name"])
        if found is None:
            return _error(404, "no such asset")
        body, media = found
        return Response(body, media_type=media, headers={"Cache-Control": "max-age=3600"})

    # -- helpers ---------------------------------------------------------------------------

    def _run_or_none(self, request: Request) -> dict[str, Any] | None:
        run_id = request.path_params["run_id"]
        return self.store.get(run_id) if RUN_ID.match(run_id) else None

    def _dir(self, run: dict[str, Any]) -> Any:
        return self.config.runs_dir / run["id"]

    def _busy(self, why: str) -> Response:
        return _error(503, f"busy: {why}; retry later",
                      headers={"Retry-After": str(self.config.retry_after_s)})


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
        yield
        await server.jobs.close()

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
        Route("/static/{name}", server.static),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # no icon, no 404
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = server
    app.add_middleware(Gate, config=config)
    return app


class Gate:
    """Pure ASGI middleware (the body stream passes through untouched): Host, token, CSRF."""

    def __init__(self, app: Any, config: ServeConfig) -> None:
        self.app, self.config = app, config

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            refusal = self._check(Request(scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _check(self, request: Request) -> Response | None:
        config = self.config
        if not security.host_ok(config, request):
            return _error(421, "this server answers to loopback host names only")
        if not security.token_ok(config, request) and not security.token_in_query(config,
                                                                                   request):
            return _error(401, "a token is required: send 'Authorization: Bearer TOKEN' or "
                               "open /?token=TOKEN once")
        if not security.same_origin(request):
            return _error(403, "cross-site request refused")
        return None
