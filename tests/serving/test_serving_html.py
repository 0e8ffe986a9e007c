"""The serving plan's page: self-contained, escaped (a model named like markup), and its three
charts (TTFT and TPOT p95 against the rate with the SLO lines, the cost frontier) drawn in a real
headless Chromium; every format through the renderer protocol."""

from __future__ import annotations

import json

import pytest

from rightsize.analyzers.serving.plan import Curve, Option, Rejected, ServingPlan
from rightsize.reports.renderer import render_as
from rightsize.reports.serving_html import ServingPlanRenderer, chart_data
from tests.browser import chromium

PAYLOAD = "</script><img src=x onerror=alert(1)>"


def option(gpu: str, replicas: int, cost: float, ttft: float, tpot: float) -> Option:
    return Option(gpu, 1, 1, replicas, 64, 2048, replicas, cost, "RunPod x (2026)", ttft, tpot,
                  1000.0, 12.5, 0, True)


def plan() -> ServingPlan:
    best = option("L40S", 3, 2.58, 310.0, 41.0)
    other = option("H100 SXM", 1, 2.99, 120.0, 12.0)
    curves = (Curve(best.label, (5.0, 10.0, 20.0), (150.0, 200.0, 310.0), (30.0, 35.0, 41.0)),
              Curve(other.label, (5.0, 10.0, 20.0), (80.0, 90.0, 120.0), (9.0, 10.0, 12.0)))
    return ServingPlan(1, PAYLOAD, 20.0, "Poisson", 512.0, 128.0, 500.0, 50.0, best,
                       ("--tensor-parallel-size 1",), (best, other), None, "",
                       (Rejected("L4 TP 1", PAYLOAD),), 12000, 9, 800, "", (), (), curves)


def test_chart_data_has_the_slos_and_the_frontier() -> None:
    d = chart_data(plan())
    assert (d["ttft_slo"], d["tpot_slo"], d["rate_min"], d["rate_max"]) == (500.0, 50.0, 5.0,
                                                                            20.0)
    assert [f["cost"] for f in d["frontier"]] == [2.58, 2.99]
    assert d["curves"][1]["ttft"] == [80.0, 90.0, 120.0]


def test_every_format_through_the_protocol() -> None:
    p = plan()
    data = json.loads(render_as(ServingPlanRenderer(), p, "json"))
    assert data["recommended"]["gpu"] == "L40S" and data["manifests"] == []
    assert "curves" not in data  # the page's, not the contract's
    assert "recommended: 3 x L40S TP 1" in render_as(ServingPlanRenderer(), p, "text")


def test_page_is_escaped_and_self_contained() -> None:
    page = render_as(ServingPlanRenderer(), plan(), "html")
    assert PAYLOAD not in page
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "http://" not in page.replace("http://www.w3.org", "")
    assert "src=\"http" not in page and "href=\"http" not in page
    assert page.count("<script>") == 2


def test_charts_draw_in_chromium(tmp_path) -> None:
    f = tmp_path / "plan.html"
    f.write_text(render_as(ServingPlanRenderer(), plan(), "html"), encoding="utf-8")
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        requests: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("dialog", lambda d: errors.append("dialog " + d.message))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f.as_uri())
        drawn = page.evaluate("document.body.getAttribute('data-charts')")
        labels = page.evaluate("Chart.getChart(document.getElementById('chart-ttft'))"
                               ".data.datasets.map(d => d.label)")
        slo = page.evaluate("Chart.getChart(document.getElementById('chart-tpot'))"
                            ".data.datasets[2].data.map(p => p.y)")
    assert errors == []
    assert [r for r in requests if not r.startswith("file://")] == []
    assert drawn == "3"
    assert labels == [plan().frontier[0].label, plan().frontier[1].label, "SLO 500 ms"]
    assert slo == [50, 50]


@pytest.mark.parametrize("fmt", ["csv", "yaml"])
def test_an_unknown_format_is_one_line(fmt: str) -> None:
    from rightsize.errors import RightsizeError

    with pytest.raises(RightsizeError, match="unknown report format"):
        render_as(ServingPlanRenderer(), plan(), fmt)
