"""The HTML renderer: one self-contained page (CSS, Chart.js and data inline; no network).

Input: a :class:`~rightsize.reports.model.ReportModel`. Output: the page as a string.
Templates are package data under ``templates/`` loaded with Jinja2's ``PackageLoader``;
autoescape is always on, undefined names raise (``StrictUndefined``), and data reaches
JavaScript only through ``|tojson``. The charting library is the vendored, unmodified Chart.js
build under ``static/`` (MIT, license beside it), inlined into the page.
"""

from __future__ import annotations

import functools
from importlib import resources

import jinja2
from markupsafe import Markup

from rightsize.errors import RightsizeError
from rightsize.reports import fmt
from rightsize.reports.model import ReportModel
from rightsize.reports.template_cache import bytecode_cache

CHART_JS = "chart.umd.min.js"
TEMPLATE = "report.html.j2"


def template_environment(package: str) -> jinja2.Environment:
    """The one careful Jinja2 setup (autoescape, StrictUndefined) for ``package``'s templates
    directory, with the report's formatting filters; the report pages and ``rightsize serve``
    both build theirs here."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # compiled once, not by every command; the key names what shapes the compiled code
        bytecode_cache=bytecode_cache({"autoescape": True, "trim": True, "lstrip": True}),
    )
    env.filters.update(
        ms=fmt.ms,
        ms_range=fmt.ms_range,
        us=fmt.us,
        pct=fmt.pct,
        nbytes=fmt.nbytes,
        usd=fmt.usd,
        what_if=fmt.what_if,
        num=fmt.num,
        value=fmt.value,
        short=fmt.short,
    )
    return env


@functools.cache
def environment() -> jinja2.Environment:
    """The report templates' environment (built once)."""
    return template_environment("rightsize.reports")


@functools.cache
def chart_library() -> Markup:
    """The vendored Chart.js, safe to place inside a ``<script>`` element."""
    try:
        text = (resources.files("rightsize.reports") / "static" / CHART_JS).read_text("utf-8")
    except OSError as exc:
        raise RightsizeError(f"rightsize is installed without its report assets ({exc})") from None
    # The source-map comment would point DevTools at a file the page does not have.
    text = "\n".join(
        line for line in text.splitlines() if not line.startswith("//# sourceMappingURL=")
    )
    if "</script" in text.lower() or "<!--" in text:
        raise RightsizeError(f"{CHART_JS} cannot be inlined: it contains a script end tag")
    return Markup(text)


def render_html(model: ReportModel) -> str:
    template = environment().get_template(TEMPLATE)
    return template.render(m=model, charts=model.charts(), chartjs=chart_library())
