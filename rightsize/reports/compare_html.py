"""The HTML renderer of ``rightsize compare``: one self-contained page in the report's style.

Input: a :class:`~rightsize.analyzers.compare.Comparison`. Output: the page as a string, with the
report's ``style.css`` and the vendored Chart.js inlined (offline), a diverging bar chart of the
top changes and the two runs' exclusive shares as aligned stacked bars. Colours are the report's:
names of style.css's palette (:data:`~rightsize.reports.charts.CATEGORY_COLORS` for a share,
``--bad``/``--good`` for slower/faster), read by the page's script; none is defined here. Same
rules as the report (:mod:`rightsize.reports.html`): autoescape, ``StrictUndefined``, data into
JavaScript only via ``|tojson``.
"""

from __future__ import annotations

from typing import Any

from rightsize.analyzers.compare import Comparison
from rightsize.reports.charts import category_color
from rightsize.reports.html import chart_library, environment

TEMPLATE = "compare.html.j2"
CHART_ROWS = 12


def chart_data(c: Comparison) -> dict[str, Any]:
    """What the page's script draws: the top changes (B - A, ms per step; slower in the
    palette's ``--bad``, faster in ``--good``) and both shares, each in the report's colour for
    that share."""
    top = c.top_changes[:CHART_ROWS]
    keys = list(dict.fromkeys([*c.a.shares_pct, *c.b.shares_pct]))
    return {
        "changes": {"labels": [f"{ch.kind}: {ch.name}" for ch in top],
                    "delta_ms": [round(ch.delta_ms, 4) for ch in top],
                    "colors": ["--bad" if ch.delta_ms > 0 else "--good" for ch in top]},
        "shares": {"keys": keys,
                   "a": [c.a.shares_pct.get(k) or 0 for k in keys],
                   "b": [c.b.shares_pct.get(k) or 0 for k in keys],
                   "colors": [category_color(k) for k in keys]},
    }


def render_compare_html(c: Comparison) -> str:
    from rightsize import __version__

    template = environment().get_template(TEMPLATE)
    return template.render(c=c, j=c.to_json(), charts=chart_data(c), chartjs=chart_library(),
                           version=__version__)
