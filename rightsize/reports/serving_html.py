"""The serving reports through the renderer protocol (:mod:`rightsize.reports.renderer`):
``serving plan`` (text, JSON, and a page with the latency-vs-rate curves of the cheapest plans,
the SLO lines and the cost frontier) and ``serving simulate`` (text, JSON, a page with its
latency table).

Input: a :class:`~rightsize.analyzers.serving.plan.ServingPlan` or a
:class:`~rightsize.analyzers.serving.simulated.Simulated`, and what the command wrote beside
(manifests). Output: text, JSON types, or one self-contained page (the report's CSS and the
vendored Chart.js inline, no network). Autoescape on; data reaches JavaScript only through
``|tojson``. Pure.
"""

from __future__ import annotations

from typing import Any

from rightsize import __version__
from rightsize.analyzers.serving.plan import ServingPlan
from rightsize.analyzers.serving.simulated import Simulated
from rightsize.reports.fmt import usd
from rightsize.reports.renderer import Style
from rightsize.reports.serving_online_text import (
    OPTION_HEAD,
    option_row,
    plan_text,
    simulated_rows,
    simulated_text,
)


def chart_data(p: ServingPlan) -> dict[str, Any]:
    rates = [x for c in p.curves for x in c.rate_per_s] or [p.rate_per_s]
    return {
        "ttft_slo": p.ttft_p95_slo_ms, "tpot_slo": p.tpot_p95_slo_ms,
        "rate_min": min(rates), "rate_max": max(rates),
        "curves": [{"label": c.label, "rate": list(c.rate_per_s), "ttft": list(c.ttft_p95_ms),
                    "tpot": list(c.tpot_p95_ms)} for c in p.curves],
        "frontier": [{"label": o.label, "cost": o.cost_per_hour_usd,
                      "cost_text": usd(o.cost_per_hour_usd), "ttft": o.ttft_p95_ms,
                      "tpot": o.tpot_p95_ms} for o in p.frontier],
    }


class ServingPlanRenderer:
    """``rightsize serving plan``: the plan, and the manifests written beside it."""

    def __init__(self, manifests: tuple[str, ...] = (), manifests_check: str | None = None
                 ) -> None:
        self.manifests, self.manifests_check = manifests, manifests_check

    def text(self, model: ServingPlan, style: Style) -> str:
        out = plan_text(model)
        if self.manifests:
            out += f"\nManifests: {', '.join(self.manifests)}\n  {self.manifests_check}\n"
        return out

    def json(self, model: ServingPlan) -> Any:
        return {**model.to_json(), "manifests": list(self.manifests),
                "manifests_check": self.manifests_check}

    def html(self, model: ServingPlan) -> str:
        from rightsize.reports.html import chart_library, environment

        return environment().get_template("serving_plan.html.j2").render(
            p=model, head=OPTION_HEAD, rows=[option_row(o) for o in model.frontier],
            charts=chart_data(model), chartjs=chart_library(), written=list(self.manifests),
            version=__version__)


class SimulatedRenderer:
    """``rightsize serving simulate``: one deployment's latencies under a load."""

    def text(self, model: Simulated, style: Style) -> str:
        return simulated_text(model)

    def json(self, model: Simulated) -> Any:
        return model.to_json()

    def html(self, model: Simulated) -> str:
        from rightsize.reports.html import environment

        return environment().get_template("serving_simulate.html.j2").render(
            s=model, rows=simulated_rows(model), version=__version__)
