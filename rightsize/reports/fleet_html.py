"""The HTML page of the fleet report, in the report's style (``fleet report --format html``).

Input: a :class:`~rightsize.fleet.report.FleetReport` and ``links`` (job key -> the href of its
report page, relative to the page). Output: one self-contained page: the report's style.css
and the vendored Chart.js inline (offline), charts of GPU-hours (or jobs, without hours) by
sizing verdict, bottleneck and team, the over-provisioned jobs' savings and the week-on-week
change; tables with a link to each job's page. Colours are palette names of style.css (a
bottleneck has its share's colour, :data:`~rightsize.reports.charts.CATEGORY_COLORS`); none is
defined here. Autoescape on, ``StrictUndefined``, data into JavaScript only via ``|tojson``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rightsize import __version__
from rightsize.fleet.report import FleetReport, Group
from rightsize.reports.charts import category_color
from rightsize.reports.html import chart_library, environment

TEMPLATE = "fleet.html.j2"
VERDICT_COLORS = {"over-provisioned": "--bad", "under-provisioned": "--warn",
                  "right-sized": "--good"}
SAVINGS_BARS = 15


def _bars(groups: tuple[Group, ...], hours: bool, color: Any) -> dict[str, Any]:
    return {"labels": [g.name for g in groups],
            "values": [round(g.gpu_hours or 0.0, 3) if hours else g.jobs for g in groups],
            "colors": [color(g.name) for g in groups]}


def chart_data(r: FleetReport) -> dict[str, Any]:
    hours = r.gpu_hours is not None
    monthly = r.savings_per_month_usd is not None
    # one unit per chart: with a month known for some jobs (metrics workloads, --usage),
    # only those; else every job per 1k steps
    top = [s for s in r.over_provisioned
           if (s.savings_per_month_usd is not None) == monthly][:SAVINGS_BARS]
    verdicts = sorted(set(r.this_week.by_verdict if r.this_week else {})
                      | set(r.previous_week.by_verdict if r.previous_week else {}))
    return {
        "unit": "GPU-hours" if hours else "jobs",
        "verdict": _bars(r.by_verdict, hours, lambda n: VERDICT_COLORS.get(n, "--c-idle")),
        "bound": _bars(r.by_bound, hours, category_color),
        "team": _bars(r.by_team, hours, lambda n: "--accent"),
        "savings": {"labels": [s.job for s in top],
                    "values": [round((s.savings_per_month_usd if monthly
                                      else s.savings_per_1k_steps_usd) or 0.0, 6) for s in top],
                    "unit": "$ saved per month" if monthly else "$ saved per 1k steps"},
        "weeks": {"labels": verdicts,
                  "this": [(r.this_week.by_verdict if r.this_week else {}).get(v, 0)
                           for v in verdicts],
                  "prev": [(r.previous_week.by_verdict if r.previous_week else {}).get(v, 0)
                           for v in verdicts],
                  "colors": [VERDICT_COLORS.get(v, "--c-idle") for v in verdicts]},
    }


def render_fleet_html(r: FleetReport, links: Mapping[str, str]) -> str:
    return environment().get_template(TEMPLATE).render(
        r=r, links=dict(links), charts=chart_data(r), chartjs=chart_library(),
        version=__version__)
