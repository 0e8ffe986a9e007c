"""Every report family draws through the one renderer protocol (rightsize/reports/renderer.py):
text, JSON (written one way by render_as) and HTML, plus a family's own format."""

from __future__ import annotations

import json

import pytest

from rightsize.errors import RightsizeError
from rightsize.reports.compare_text import COMPARE
from rightsize.reports.fleet_metrics import FleetMetricsRenderer
from rightsize.reports.fleet_text import FleetRenderer
from rightsize.reports.plan_text import PlanRenderer
from rightsize.reports.render import ANALYSIS
from rightsize.reports.renderer import FORMATS, Style, dumps, formats, render_as
from rightsize.reports.serving_html import ServingPlanRenderer, SimulatedRenderer
from rightsize.reports.serving_text import PredictRenderer

FAMILIES = [ANALYSIS, COMPARE, PlanRenderer(), FleetRenderer(), FleetMetricsRenderer(),
            ServingPlanRenderer(), SimulatedRenderer(), PredictRenderer()]


@pytest.mark.parametrize("renderer", FAMILIES, ids=lambda r: type(r).__name__)
def test_every_family_has_the_three_formats(renderer):
    for fmt in FORMATS:
        assert callable(getattr(renderer, fmt))


class _Toy:
    """A report family in five lines: what a new one (serving) writes."""

    extra_formats = ("csv",)

    def text(self, model, style):
        return f"{model['n']} {'bold' if style.color else 'plain'} {style.width}\n"

    def json(self, model):
        return {"n": model["n"], "ratio": 0.5}

    def html(self, model):
        return f"<p>{model['n']}</p>"

    def csv(self, model, style):
        return f"n\n{model['n']}\n"


def test_render_as_dispatches_and_writes_json_one_way():
    toy, model = _Toy(), {"n": 3}
    assert render_as(toy, model, "text", Style(color=True, width=60)) == "3 bold 60\n"
    assert render_as(toy, model, "json") == '{\n  "n": 3,\n  "ratio": 0.5\n}\n'
    assert json.loads(render_as(toy, model, "json")) == {"n": 3, "ratio": 0.5}
    assert render_as(toy, model, "html") == "<p>3</p>"
    assert render_as(toy, model, "csv") == "n\n3\n"
    assert formats(toy) == ("text", "json", "html", "csv")
    with pytest.raises(RightsizeError, match=r"unknown report format 'pdf' \(choose from "
                                             r"text, json, html, csv\)"):
        render_as(toy, model, "pdf")
    with pytest.raises(ValueError):
        dumps({"x": float("nan")})  # no NaN in any family's JSON
