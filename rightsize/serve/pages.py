"""The server's own HTML pages (upload, run list, run status, compare) and their assets.

Templates are package data under ``templates/``, rendered by Jinja2 with autoescape on and
``StrictUndefined``; data reaches JavaScript only through ``|tojson`` or ``data-`` attributes.
The style is the report's own ``style.css`` (served from :mod:`rightsize.reports`) plus a few
rules in ``serve.css``; every asset is served by this server: the pages work offline.
"""

from __future__ import annotations

import datetime as dt
import functools
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


def render_page(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


@functools.cache
def asset(name: str) -> tuple[bytes, str] | None:
    """An asset's bytes and media type, or None for a name not in :data:`ASSETS`."""
    if name not in ASSETS:
        return None
    package, path, media = ASSETS[name]
    return (resources.files(package) / path).read_bytes(), media


def with_way_back(report_html: str, run_id: str) -> str:
    """The stored report with :data:`_WAY_BACK` right after its ``<body>`` tag (the file on
    disk stays the self-contained page ``rightsize analyze`` writes). ``run_id`` is a checked
    hex id."""
    bar = _WAY_BACK.format(id=run_id)
    at = report_html.find("<body")
    end = report_html.find(">", at) if at >= 0 else -1
    if end < 0:
        return bar + report_html
    return report_html[: end + 1] + bar + report_html[end + 1:]


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f} ms"
