"""The HTML page of a serving plan (``rightsize plan --format html``), in the report's style.

Input: a :class:`~rightsize.analyzers.plan.plan.Plan` and the manifest paths written. Output:
one self-contained page (the report's CSS and vendored Chart.js inline, no network) with the
candidate table, the replicas-over-time chart for the cheapest candidates and the demand, the
partitions, the autoscaling targets and what is missing. Autoescape on; data reaches JavaScript
only through ``|tojson``. Pure.
"""

from __future__ import annotations

from typing import Any

from rightsize import __version__
from rightsize.analyzers.plan.plan import Plan
from rightsize.reports.html import chart_library, environment
from rightsize.reports.plan_text import HEAD, candidate_order, candidate_row, rate

CHART_SERIES = 4  # candidates drawn on the replicas chart (cheapest autoscaled first)


def chart_data(plan: Plan) -> dict[str, Any]:
    """Step series in hours from the curve's start: demand, and replicas per drawn candidate."""
    d = plan.inputs.demand
    hours = [round((t - d.t_s[0]) / 3600, 4) for t in (*d.t_s, d.end_s)]

    def points(values: tuple[float, ...] | tuple[int, ...]) -> list[dict[str, float]]:
        vals = [*values, values[-1]]  # hold the last value to the end of the curve
        return [{"x": h, "y": v} for h, v in zip(hours, vals, strict=True)]

    drawn = [c for c in sorted(plan.capacities, key=candidate_order) if c.replicas is not None]
    return {"unit": plan.inputs.unit, "demand": points(d.rate_per_s),
            "replicas": [{"gpu": c.gpu, "points": points(c.replicas.series)}
                         for c in drawn[:CHART_SERIES] if c.replicas is not None]}


def render_html(plan: Plan, written: list[str], next_command: str) -> str:
    rows = [candidate_row(c) for c in sorted(plan.capacities, key=candidate_order)]
    return environment().get_template("plan.html.j2").render(
        p=plan, head=HEAD, rows=rows, chart=chart_data(plan), chartjs=chart_library(),
        written=written, next_command=next_command, version=__version__, rate=rate)
