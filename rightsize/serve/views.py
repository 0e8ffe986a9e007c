"""The HTML pages' routes: upload, run list, run status, report, compare, fleet, jobs, assets.

Input: the :class:`~rightsize.serve.app.Server` state and the request. Output: pages rendered
from the templates of :mod:`.pages` (Jinja2, autoescape), a stored report streamed from disk
with the server's bar (:mod:`.documents`), the fleet report drawn on a thread. Nothing here
parses a stored document on the event loop: the compare page reads each run's small
``summary.json`` on a thread. A new page is a function here and one route in :mod:`.app`.
"""

from __future__ import annotations

import asyncio
import re
from datetime import date
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from rightsize.serve import documents, pages, security
from rightsize.serve.api import MAX_PAGE_RUNS, error, page_of_runs
from rightsize.serve.compare import compare_rows
from rightsize.serve.config import TOKEN_COOKIE
from rightsize.serve.worker import REPORT_HTML

if TYPE_CHECKING:
    from rightsize.serve.app import Server

MAX_FILTER_VALUES = 50  # team or project values one /fleet request may name
# /fleet's days: YYYY-MM-DD exactly (date.fromisoformat also takes 2026-W01-1 and 20261201),
# within the years a fleet report can step a day beyond in both directions
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
FIRST_DAY, LAST_DAY = date(1970, 1, 2), date(9999, 12, 30)


def page(template: str, status: int = 200, **context: Any) -> Response:
    return HTMLResponse(pages.render_page(template, **context), status_code=status,
                        headers={"Content-Security-Policy": pages.PAGE_CSP})


async def index(server: Server, request: Request) -> Response:
    cfg = server.config
    if request.query_params.get("token") is not None and cfg.token is not None:
        # Drop the token from the URL; keep it in a cookie only when it is the right one
        # (a wrong one reached here on a valid cookie, which it must not replace).
        response: Response = RedirectResponse("/", status_code=303)
        if security.token_in_query(cfg, request):
            response.set_cookie(TOKEN_COOKIE, cfg.token, httponly=True, samesite="lax",
                                secure=security.public_scheme(cfg, request) == "https")
        return response
    return page("upload.html.j2", max_files=cfg.max_files_per_run,
                max_upload=cfg.max_upload_bytes, base_url=security.base_url(cfg, request))


async def runs_page(server: Server, request: Request) -> Response:
    query = request.query_params.get("q", "")
    found = await page_of_runs(server, request, "/runs")
    if isinstance(found, Response):
        return found
    runs, next_url = found
    return page("runs.html.j2", runs=runs, query=query, next_url=next_url,
                first=not request.query_params.get("before"))


async def run_page(server: Server, request: Request) -> Response:
    run = await server.run_or_none(request)
    if run is None:
        return page("runs.html.j2", runs=[], query="", status=404)
    return page("run.html.j2", run=run)


async def report(server: Server, request: Request) -> Response:
    run = await server.run_or_none(request)
    if run is None:
        return error(404, "no such run")
    if run["status"] != "done":
        return RedirectResponse(f"/runs/{run['id']}", status_code=303)
    try:
        return await documents.report_page(
            server.config.runs_dir / run["run"] / REPORT_HTML, pages.way_back(run["id"]),
            {"Content-Security-Policy": pages.REPORT_CSP})
    except documents.Missing:
        return error(404, "the run's report is missing")


async def compare(server: Server, request: Request) -> Response:
    store, index = server.store, server.index
    done = await index(store.runs, limit=MAX_PAGE_RUNS, status="done")
    a_id = request.query_params.get("a", "")
    b_id = request.query_params.get("b", "")
    chosen = bool(a_id or b_id)
    for extra in (a_id, b_id):  # an older run named in the URL is offered too
        if extra and all(r["id"] != extra for r in done):
            run = await index(store.get, extra)
            if run is not None and run["status"] == "done":
                done.append(run)
    if not chosen and done:  # the picker: A the run before the newest, B the newest
        b_id = done[0]["id"]
        a_id = done[1]["id"] if len(done) > 1 else b_id
    a, b = await index(store.get, a_id), await index(store.get, b_id)
    context: dict[str, Any] = {"choices": done, "a_id": a_id, "b_id": b_id, "rows": [],
                               "a_name": "", "b_name": ""}
    if chosen:
        if a is None or b is None or a["status"] != "done" or b["status"] != "done":
            return page("compare.html.j2", status=404, **context)
        loop = asyncio.get_running_loop()
        sums = [await loop.run_in_executor(None, documents.read_summary,
                                           server.config.runs_dir / r["run"]) for r in (a, b)]
        if sums[0] is None or sums[1] is None:
            return error(413, "a stored analysis is too large to compare here; use "
                              "rightsize compare on the two runs' analysis JSON")
        context.update(rows=compare_rows(sums[0], sums[1]), a_name=a["files"][0]["name"],
                       b_name=b["files"][0]["name"])
    return page("compare.html.j2", **context)


def _days(params: Any) -> dict[str, date | None] | Response:
    """``since`` and ``until``: a UTC day, YYYY-MM-DD in range, or absent."""
    days: dict[str, date | None] = {}
    for name in ("since", "until"):
        text = params.get(name, "").strip()
        if not text:
            days[name] = None
            continue
        try:
            day = date.fromisoformat(text) if _DAY.fullmatch(text) else None
        except ValueError:
            day = None
        if day is None or not FIRST_DAY <= day <= LAST_DAY:
            return error(400, f"{name} must be a day, YYYY-MM-DD, from {FIRST_DAY} to "
                              f"{LAST_DAY} (e.g. {name}=2026-01-31)")
        days[name] = day
    if days["since"] and days["until"] and days["since"] > days["until"]:
        return error(400, "since is after until")
    return days


async def fleet_page(server: Server, request: Request) -> Response:
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
            return error(400, f"at most {MAX_FILTER_VALUES} {name} values")
    days = _days(params)
    if isinstance(days, Response):
        return days
    source = params.get("source", "").strip()
    if source not in ("", "trace", "metrics"):
        return error(400, "source must be trace or metrics")
    filters = Filters(values["team"], values["project"], days["since"], days["until"],
                      (source,) if source else ())
    html = await asyncio.get_running_loop().run_in_executor(None, server.fleet.page, filters)
    body = pages.with_fleet_bar(html, filters)
    return HTMLResponse(body, headers={"Content-Security-Policy": pages.fleet_csp(body)})


async def jobs_page(server: Server, request: Request) -> Response:
    """Every job whose captures were uploaded (``?job=NAME``), newest capture first."""
    jobs = await asyncio.get_running_loop().run_in_executor(None, server.following.index.jobs)
    return page("jobs.html.j2", jobs=jobs)


async def job_page(server: Server, request: Request) -> Response:
    """One job's captures over time, each with its check against the previous one."""
    name = request.path_params["name"]
    captures = await asyncio.get_running_loop().run_in_executor(
        None, server.following.captures, name)
    return page("job.html.j2", status=200 if captures else 404, job=name, captures=captures,
                threshold_pct=f"{server.config.regression_pct:g}")


async def static(server: Server, request: Request) -> Response:
    found = pages.asset(request.path_params["name"])
    if found is None:
        return error(404, "no such asset")
    body, media = found
    return Response(body, media_type=media, headers={"Cache-Control": "private, max-age=3600"})
