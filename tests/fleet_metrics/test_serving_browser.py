"""fleet metrics' serving rows on its HTML page, in a real headless Chromium (Debian's, through
Playwright), as the JSON and text already carry them.

Two served workloads, one named like an injection: checked in the DOM, no console error,
network request or dialog; the serving table's rows in order with their figures formatted one
way (times by ``fmt.ms``, money by ``fmt.usd``: $2.99, $0.44); the hostile name shown as text.
"""

from __future__ import annotations

import pytest

from rightsize.analyzers.fleet_metrics.model import SCHEMA_VERSION, FleetMetrics
from rightsize.analyzers.fleet_metrics.serving import ServingRow
from rightsize.reports.fleet_metrics import FleetMetricsRenderer
from rightsize.reports.renderer import Style, render_as
from tests.browser import opened, require_chromium

PAYLOAD = "</script><img src=x onerror=alert(1)>"

require_chromium()


def _rows() -> tuple[ServingRow, ...]:
    meets = ServingRow(
        "ml/llm", "vllm", "meta-llama/Meta-Llama-3-8B", 2, 28_800, rate_per_s=4.0,
        ttft_p95_ms=512.5, tpot_p95_ms=48.25, ttft_p95_slo_ms=1000.0, tpot_p95_slo_ms=100.0,
        meets_slo=True, gpu="H100 SXM", gpus_per_pod=1, cost_per_hour_now_usd=5.98,
        recommended="1 x L40S TP 1", recommended_cost_per_hour_usd=0.86,
        recommended_ttft_p95_ms=640.0, recommended_tpot_p95_ms=71.0, saving_pct=85.6,
        calibrated_by="vLLM metrics of ml/llm", why="meets the SLO; a cheaper plan also does",
        metrics=("vllm:time_to_first_token_seconds",))
    hostile = ServingRow(
        f"ml/{PAYLOAD}", "sglang", None, 1, 3_600, rate_per_s=0.5, ttft_p95_ms=2500.0,
        tpot_p95_ms=120.0, ttft_p95_slo_ms=1000.0, tpot_p95_slo_ms=100.0, meets_slo=False,
        gpu="L4", gpus_per_pod=1, cost_per_hour_now_usd=0.44, why=f"misses the SLO {PAYLOAD}")
    return meets, hostile


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    model = FleetMetrics(SCHEMA_VERSION, "http://prometheus:9090", "2026-01-01T00:00:00Z",
                         "2026-01-01T07:00:00Z", 300.0, 0.2, 730.0, {}, None, None, None,
                         serving=_rows())
    path = tmp_path_factory.mktemp("fleet-metrics") / "fleet.html"
    path.write_text(render_as(FleetMetricsRenderer(), model, "html", Style()), "utf-8")
    with opened(path) as loaded:
        yield loaded


def test_loads_clean(page):
    _, events, url = page
    assert events["errors"] == [] and events["dialogs"] == []
    assert [u for u in events["requests"] if u != url] == []


def test_serving_rows_with_their_figures(page):
    p, _, _ = page
    cells = p.eval_on_selector_all(
        "#serving-rows tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))")
    assert len(cells) == 2
    first = cells[0]
    assert first[:9] == ["ml/llm", "vllm", "meta-llama/Meta-Llama-3-8B", "2", "4",
                         "512.50 ms", "48.25 ms", "1000 / 100 ms", "yes"]
    assert first[9:13] == ["$5.98", "1 x L40S TP 1", "$0.86", "86%"]
    second = cells[1]
    assert second[0] == f"ml/{PAYLOAD}"  # shown as text, not markup
    assert second[5:13] == ["2.50 s", "120.00 ms", "1000 / 100 ms", "no", "$0.44", "-",
                            "n/a", "-"]
    assert p.locator("#serving-rows img").count() == 0
    assert p.eval_on_selector("#serving", "s => s.querySelector('h2').innerText") == \
        "Serving (vLLM/SGLang metrics)"
