"""The ASGI application: the server's state, its routes, the token/Host/CSRF gate, start-up.

Input: a :class:`~rightsize.serve.config.ServeConfig`. Output: a Starlette app, served by
uvicorn from ``rightsize serve`` (through :mod:`.guard`, which bounds every phase of a
request). The routes are the JSON API (:mod:`.api`) and the pages (:mod:`.views`); the HTTP API
is documented in docs/serve.md. JSON errors are ``{"error": one line}``, an unexpected one
included (500, its traceback in the rate-limited log). Beyond the limits on concurrent uploads
and queued analyses the answer is 503 with ``Retry-After``; a full disk is 507.

Start-up checks the index (``PRAGMA integrity_check``), empties ``tmp/``, reconciles
``blobs/`` with the index (a blob no run names -- a server killed between storing an upload
and recording it -- is removed), adopts or requeues the runs a stopped server left unfinished,
and adds to the data directory's fleet table the finished runs it lacks (:mod:`.fleet`, in the
background).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rightsize.serve import api, documents, pages, security, upload, views
from rightsize.serve.config import ServeConfig, check_cpu_for
from rightsize.serve.fleet import ServeFleet
from rightsize.serve.following import Follower
from rightsize.serve.jobs import JobRunner
from rightsize.serve.store import RUN_ID, Index, Store

log = logging.getLogger("rightsize.serve")


class Server:
    """The state behind the routes: settings, the index, the checks of new uploads, the job
    runner, the upload count."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.store = Store(config.db_path)
        self.store.check()
        self.index = Index(self.store)  # every call from the event loop goes through it
        swept = upload.sweep_tmp(config.tmp_dir)
        if swept:
            log.info("start-up: removed %d partial uploads from tmp/", swept)
        orphans = upload.sweep_blobs(config.blobs_dir, self.store.blobs_in_use())
        if orphans:
            log.info("start-up: removed %d stored files no run uses from blobs/", orphans)
        self.following = Follower(config.db_path, config.runs_dir, config.regression_pct,
                                  config.webhook_url, config.public_url or config.url)
        self.fleet = ServeFleet(config, self.store, self.following.index.labels_of_run)
        self.jobs = JobRunner(config, self.index, self.fleet, self.following.finished)
        self.checks = upload.Checks(config.max_upload_bytes, check_cpu_for(config))
        self.uploads = 0
        pages.warm_up()
        self.fleet.warm_up()
        import rightsize.fleet.report  # noqa: F401 - /fleet's filters, imported on the loop

    async def run_or_none(self, request: Request) -> dict[str, Any] | None:
        """The upload (or run) the path's id names, as the API shows it."""
        run_id = request.path_params["run_id"]
        return await self.index(self.store.get, run_id) if RUN_ID.match(run_id) else None

    def busy(self, why: str) -> Response:
        return api.error(503, f"busy: {why}; retry later",
                         headers={"Retry-After": str(self.config.retry_after_s)})

    async def healthz(self, request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")


def create_app(config: ServeConfig) -> Starlette:
    server = Server(config)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await _warm_routes(app, config)
        server.jobs.resume()
        loop = asyncio.get_running_loop()
        catch_up = loop.run_in_executor(None, _catch_up, server.fleet)
        checks = loop.run_in_executor(None, _check_jobs, server.following)
        yield
        server.fleet.stop()
        server.checks.close()
        await server.jobs.close()
        await catch_up
        await checks
        server.following.close()
        server.fleet.close()
        server.index.close()

    def bind(handler: Callable[[Any, Request], Awaitable[Response]]) -> Any:
        return functools.partial(handler, server)

    routes = [
        Route("/healthz", server.healthz),
        Route("/api/runs", bind(api.create_run), methods=["POST"]),
        Route("/api/runs", bind(api.list_runs)),
        Route("/api/runs/{run_id}", bind(api.get_run)),
        Route("/api/runs/{run_id}", bind(api.delete_run), methods=["DELETE"]),
        Route("/", bind(views.index)),
        Route("/runs", bind(views.runs_page)),
        Route("/runs/{run_id}", bind(views.run_page)),
        Route("/r/{run_id}", bind(views.report)),
        Route("/compare", bind(views.compare)),
        Route("/fleet", bind(views.fleet_page)),
        Route("/jobs", bind(views.jobs_page)),
        Route("/jobs/{name:path}", bind(views.job_page)),
        Route("/api/jobs/{name:path}", bind(api.get_job)),
        Route("/static/{name}", bind(views.static)),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # no icon, no 404
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = server
    app.add_middleware(Gate, config=config)
    return app


WARM_PATHS = ("/healthz", "/api/runs", "/api/runs/0000000000000000", "/runs", "/compare",
              "/jobs", "/static/serve.css", "/nothing")


async def _warm_routes(app: Starlette, config: ServeConfig) -> None:
    """Requests to the app itself, and one streamed response, before the server answers: the
    first use of a route imports what it needs (Starlette's and anyio's modules) on the event
    loop, which held it for up to 160 ms under the first real request."""
    headers = [(b"host", b"127.0.0.1")]
    if config.token:
        headers.append((b"authorization", f"Bearer {config.token}".encode()))

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}  # no body; a streamed response sees the client go

    async def send(message: Any) -> None:
        return None

    for path in WARM_PATHS:
        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": headers, "scheme": "http",
                 "server": ("127.0.0.1", config.port), "client": ("127.0.0.1", 0),
                 "http_version": "1.1", "root_path": "", "app": app}
        await app(scope, receive, send)
    streamed = await documents.run_json({"warm": True}, None)
    await streamed({"type": "http", "method": "GET", "headers": []}, receive, send)


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


def _check_jobs(following: Follower) -> None:
    """Start-up: each job's captures checked that a stopped server had not checked."""
    try:
        following.catch_up()
    except Exception as exc:  # noqa: BLE001 - the server serves on; the next capture checks
        log.warning("start-up: the jobs' captures were not checked (%s: %s)",
                    type(exc).__name__, exc)


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
                await api.error(500, f"internal error ({type(exc).__name__}); see the server's "
                                     "log")(scope, receive, send_with_headers)

    def _check(self, request: Request) -> Response | None:
        config = self.config
        if not security.host_ok(config, request):
            return api.error(421, security.host_refusal(config))
        if not security.token_ok(config, request) and not security.token_in_query(config,
                                                                                   request):
            return api.error(401, "a token is required: send 'Authorization: Bearer TOKEN' or "
                                  "open /?token=TOKEN once")
        if not security.same_origin(config, request):
            return api.error(403, "cross-site request refused")
        return None
