"""The compare page in a real headless Chromium: no console errors, no network, both charts
painted, hostile names shown as text. Skips without Chromium or Playwright."""

from __future__ import annotations

from rightsize.reports.charts import category_color
from tests.cli.test_compare_cli import HOSTILE, hostile_trace, rightsize
from tests.conftest import SAMPLES, shared_path
from tests.reports.palette import palette
from tests.reports.test_browser import Page, browser, check_clean  # noqa: F401 (fixture)

BERT = "gaunernst_bert-small-uncased__1016001"


def load(browser, tmp_path, a, b):  # noqa: F811
    out = tmp_path / "compare.html"
    res = rightsize("compare", a, b, "--format", "html", "-o", out)
    assert res.returncode == 0, res.stderr
    shot = tmp_path / "compare.png"
    page = Page(browser, out, shot)
    check_clean(page, shot)
    return page


def test_cross_vendor_page_draws_both_charts(browser, tmp_path):  # noqa: F811
    h100 = shared_path("traces", "kineto", f"tracelens-h100-{BERT}.json.gz")
    mi300 = shared_path("traces", "kineto", f"tracelens-mi300-{BERT}.json.gz")
    page = load(browser, tmp_path, h100, mi300)
    canvases = page.painted_canvases()
    assert canvases.get("chart-changes", 0) > 1000 and canvases.get("chart-shares", 0) > 1000
    assert page.page.get_attribute("body", "data-charts") == "2"
    assert "A on MI300X" in page.page.inner_text("#runs")


def test_sample_runs_page(browser, tmp_path):  # noqa: F811
    page = load(browser, tmp_path, SAMPLES / "runs" / "train_dataloader-cpu",
                SAMPLES / "runs" / "train_compute-cpu")
    assert "data-loader wait fell" in page.page.inner_text("#changes")
    assert page.painted_canvases().get("chart-shares", 0) > 1000
    # each share drawn in the report's colour for it, read from the page's one palette
    drawn = page.page.evaluate("""() => Object.fromEntries(Object.values(Chart.instances)
        .find(c => c.canvas.id === "chart-shares").data.datasets
        .map(d => [d.label, String(d.backgroundColor)]))""")
    assert drawn["dataloader"] == palette()["--c-dataloader"] == "#e07b00"
    assert drawn == {k: palette()[category_color(k)] for k in drawn}
    bars = page.page.evaluate("""() => Object.values(Chart.instances)
        .find(c => c.canvas.id === "chart-changes").data.datasets[0].backgroundColor""")
    assert set(bars) <= {palette()["--bad"], palette()["--good"]} and palette()["--good"] in bars


def test_hostile_names_render_as_text(browser, tmp_path):  # noqa: F811
    trace = hostile_trace(tmp_path / "t.json.gz")
    page = load(browser, tmp_path, trace, trace)
    assert page.dialogs == [] and page.page.locator("img").count() == 0
    assert "</script><img src=x" in page.page.inner_text("#ops")
    assert HOSTILE.startswith("\x1b")
