"""The server's own HTML pages (upload, run list, run status, compare, the fleet page's bar)
and their assets.

Templates are package data under ``templates/``, rendered by Jinja2 with autoescape on and
``StrictUndefined``; data reaches JavaScript only through ``|tojson`` or ``data-`` attributes.
The style is the report's own ``style.css`` (served from :mod:`rightsize.reports`) plus a few
rules in ``serve.css``; every asset is served by this server: the pages work offline.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import re
from importlib import resources
from typing import Any

import jinja2

from rightsize import __version__

# The policy of the server's own pages: scripts and styles from this origin only.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
            "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
# Stored reports inline their scripts and styles (they are self-contained files) and fetch
# nothing. ``sandbox allow-scripts`` gives the page an opaque origin of its own: its inline
# scripts run (the report's tables and charts), but never as this server's origin, so they
# cannot read the token cookie or call the API, whatever a trace smuggled into the page.
REPORT_CSP = ("sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; "
              "style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; "
              "base-uri 'none'; form-action 'none'")
# The bar put at the top of a served report: the way back to the run list and the run.
_WAY_BACK = ('<nav id="rightsize-serve-nav" style="font:14px system-ui,sans-serif;'
             'padding:6px 12px;border-bottom:1px solid #ccc;background:#f6f8fa">'
             '<a href="/runs">&larr; Runs</a> &middot; <a href="/runs/{id}">this run</a> '
             '&middot; <a href="/compare?b={id}">compare</a> &middot; '
             '<a href="/api/runs/{id}">analysis JSON</a></nav>')
# The fleet page (``/fleet``) is the fleet report's self-contained page, served on this
# server's origin (not sandboxed like a stored report: from an opaque origin, a click on a job's
# link is a cross-site navigation: it carries the SameSite=Lax token cookie, but the
# page's own fetches and form would not). Its two
# inline scripts run by their SHA-256 (Chart.js and the chart script whose data comes through
# |tojson), nothing else: no 'unsafe-inline' script, no event handler attribute, no eval.
FLEET_SCRIPTS = 2
_SCRIPT_OPEN = re.compile(r"<script\b", re.IGNORECASE)


class PageError(Exception):
    """A page that is not what its template makes (never served)."""


def fleet_csp(page: str) -> str:
    """The fleet page's policy: its own :data:`FLEET_SCRIPTS` scripts by hash. A page with any
    other ``<script`` (which autoescape makes impossible from data) is refused, so a hash is
    never given to a script the template did not write."""
    bodies = _script_bodies(page)
    if len(bodies) != FLEET_SCRIPTS or len(_SCRIPT_OPEN.findall(page)) != FLEET_SCRIPTS:
        raise PageError(f"the fleet page has {len(_SCRIPT_OPEN.findall(page))} script tags, "
                        f"not the template's {FLEET_SCRIPTS}")
    hashes = " ".join(f"'sha256-{_sha256_b64(b)}'" for b in bodies)
    return (f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
            "img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


def _script_bodies(page: str) -> list[str]:
    """The text of each ``<script>...</script>`` element, in one pass (a regex with ``.*?``
    between them would rescan the page from every unclosed ``<script>``)."""
    bodies: list[str] = []
    at = page.find("<script>")
    while at >= 0:
        end = page.find("</script>", at + 8)
        if end < 0:
            break
        bodies.append(page[at + 8:end])
        at = page.find("<script>", end + 9)
    return bodies


def _sha256_b64(script: str) -> str:
    # what the browser hashes: the element's text after HTML's newline normalization
    text = script.replace("\r\n", "\n").replace("\r", "\n")
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def with_fleet_bar(fleet_html: str, filters: Any) -> str:
    """The fleet page with the server's bar after its ``<body>`` tag: the way to the other
    pages and the filter form (team, project, recorded days, source)."""
    bar = render_page("fleet_bar.html.j2", teams=", ".join(filters.teams),
                      projects=", ".join(filters.projects),
                      since=filters.since.isoformat() if filters.since else "",
                      until=filters.until.isoformat() if filters.until else "",
                      source=filters.sources[0] if filters.sources else "",
                      filtered=bool(filters.teams or filters.projects or filters.since
                                    or filters.until or filters.sources))
    return _after_body(fleet_html, bar)


ASSETS = {  # URL name -> (package, resource path, media type)
    "style.css": ("rightsize.reports", "templates/style.css", "text/css"),
    "serve.css": ("rightsize.serve", "templates/serve.css", "text/css"),
    "serve.js": ("rightsize.serve", "templates/serve.js", "text/javascript"),
}


@functools.cache
def environment() -> jinja2.Environment:
    from rightsize.reports.html import template_environment

    env = template_environment("rightsize.serve")  # the report's filters (nbytes, pct...)
    env.filters.update(when=_when, ms=_ms)
    env.globals.update(version=__version__)
    return env


def warm_up() -> None:
    """Compile every page template before the server answers (a template compiled on first
    use holds the event loop while Python compiles it)."""
    env = environment()
    for name in env.list_templates(filter_func=lambda n: n.endswith(".j2")):
        env.get_template(name)


def render_page(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


@functools.cache
def asset(name: str) -> tuple[bytes, str] | None:
    """An asset's bytes and media type, or None for a name not in :data:`ASSETS`."""
    if name not in ASSETS:
        return None
    package, path, media = ASSETS[name]
    return (resources.files(package) / path).read_bytes(), media


def way_back(run_id: str) -> str:
    """The bar put right after a served report's ``<body>`` tag (:data:`_WAY_BACK`; the file
    on disk stays the self-contained page ``rightsize analyze`` writes). ``run_id`` is a
    checked hex id."""
    return _WAY_BACK.format(id=run_id)


def _after_body(html: str, bar: str) -> str:
    at = html.find("<body")
    end = html.find(">", at) if at >= 0 else -1
    if end < 0:
        return bar + html
    return html[: end + 1] + bar + html[end + 1:]


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f} ms"
