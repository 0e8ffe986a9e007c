"""The plan's HTML page: self-contained, escaped, and its replicas chart drawn in a real
headless Chromium (when /usr/bin/chromium and playwright are there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rightsize.analyzers.plan import demand as dm
from rightsize.analyzers.plan.plan import Plan, PlanInputs, build
from rightsize.analyzers.plan.workload import from_document
from rightsize.reports.plan_html import chart_data, render_html
from tests.analyzers.test_plan import CATALOG, DAY, _candidate, make_doc, plan_for

PAYLOAD = "</script><img src=x onerror=alert(1)>"
CHROMIUM = Path(os.environ.get("RIGHTSIZE_CHROMIUM", "/usr/bin/chromium"))


def _plan() -> Plan:
    doc = make_doc([_candidate("H100 SXM", 50.0), _candidate("L4", 80.0, usd=0.5)])
    inputs = PlanInputs(10, "samples", 100.0, dm.from_csv(DAY, PAYLOAD), 0.2)
    return build(doc, from_document(doc), inputs, CATALOG)


def test_chart_data_step_series() -> None:
    data = chart_data(plan_for(make_doc([_candidate("H100 SXM", 50.0)]), rate=DAY))
    assert data["demand"] == [{"x": 0.0, "y": 100.0}, {"x": 6.0, "y": 300.0},
                              {"x": 12.0, "y": 900.0}, {"x": 18.0, "y": 400.0},
                              {"x": 24.0, "y": 400.0}]
    assert data["replicas"] == [{"gpu": "H100 SXM", "points": [
        {"x": 0.0, "y": 1}, {"x": 6.0, "y": 2}, {"x": 12.0, "y": 6}, {"x": 18.0, "y": 3},
        {"x": 24.0, "y": 3}]}]


def test_page_is_escaped_and_self_contained() -> None:
    page = render_html(_plan(), ["rightsize-plan/deployment.yaml"], "kubectl apply")
    assert PAYLOAD not in page
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "http://" not in page.replace("http://www.w3.org", "")  # no network resources
    assert page.count("<script>") == 2


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent")
def test_chart_draws_in_chromium(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = tmp_path / "plan.html"
    page_file.write_text(render_html(_plan(), [], "next"), encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--headless", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: errors.append("dialog " + d.message))
        page.goto(page_file.as_uri())
        labels = page.evaluate("Chart.getChart(document.getElementById('chart-replicas'))"
                               ".data.datasets.map(d => d.label)")
        browser.close()
    assert errors == []
    assert labels == ["L4 replicas", "H100 SXM replicas", "demand (samples/s)"]
