"""Screenshots of three real reports in Chromium, checked by DOM assertions and kept for eyes.

A GPU Kineto trace (ResNet-50, V100), a CPU run recorded by ``rightsize run``
(samples/runs/train_dataloader-cpu) and an Nsight Systems export (H100). Each page must load
clean (no console error, no network), draw its charts, colour the same category the same in
every chart, and show no internal identifier (a JSON key of the analysis document, e.g.
``usd_per_1k_steps``) as visible text. Screenshots go to ``$RIGHTSIZE_SHOTS`` (default: the
test's tmp folder).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from rightsize.reports.charts import CATEGORY_COLORS
from tests.conftest import SAMPLES, shared_path
from tests.reports.palette import palette
from tests.reports.test_browser import Page, browser, check_clean, rightsize  # noqa: F401

ALLOWED = {"num_workers", "pin_memory", "persistent_workers", "prefetch_factor"}  # user's APIs


def _keys(doc: Any) -> set[str]:
    """Every snake_case key of the analysis document."""
    found: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            if "_" in k:
                found.add(k)
            found |= _keys(v)
    elif isinstance(doc, list):
        for v in doc[:50]:
            found |= _keys(v)
    return found


def _shot_dir(tmp_path: Path) -> Path:
    out = Path(os.environ.get("RIGHTSIZE_SHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _chart(page: Page, canvas: str) -> dict[str, Any]:
    """What a Chart.js chart draws: its x labels, datasets (label, colour, points) and axes."""
    return page.page.evaluate("""(id) => {
        const c = Object.values(Chart.instances).find(c => c.canvas.id === id);
        if (!c) return null;
        return { labels: c.data.labels || [],
                 sets: c.data.datasets.map(d => ({ label: d.label, color: String(d.backgroundColor),
                                                   n: d.data.length })),
                 x: { min: c.scales.x.min, max: c.scales.x.max, type: c.scales.x.type },
                 y: { min: c.scales.y ? c.scales.y.min : null,
                      type: c.scales.y ? c.scales.y.type : null },
                 drawn: c.canvas.getAttribute("data-labels") };
    }""", canvas)


def _doc(tmp_path: Path, name: str) -> dict[str, Any]:
    return json.loads((tmp_path / f"{name}.json").read_text())


def _scatter_ok(page: Page, doc: dict[str, Any]) -> list[str]:
    """The candidate scatter: each axis from 0 or logarithmic (one candidate far from the rest)
    from a round number below every point, every priced candidate a point, names drawn."""
    sizing = _chart(page, "chart-sizing")
    assert sizing is not None
    priced = [c for c in doc["sizing"]["candidates"] if c["usd_per_1k_steps"] is not None]
    for axis, key in (("x", "projected_step_ms_low"), ("y", "usd_per_1k_steps")):
        scale, lowest = sizing[axis], min(c.get(key) or c["projected_step_ms"] for c in priced)
        if scale["type"] == "linear":
            assert scale["min"] == 0
        else:
            assert scale["type"] == "logarithmic" and 0 < scale["min"] <= lowest
    assert sum(s["n"] for s in sizing["sets"]) == len(priced)
    assert sizing["x"]["max"] >= max(c["projected_step_ms_high"] for c in priced)
    drawn = sizing["drawn"].split("|")
    rec = doc["sizing"]["recommended"]
    assert (rec is None or rec in drawn) and len(drawn) >= len(priced) // 2  # labels give way
    return drawn


def _report(browser, tmp_path: Path, source: Path, name: str) -> Page:  # noqa: F811
    html, doc = tmp_path / f"{name}.html", tmp_path / f"{name}.json"
    res = rightsize("analyze", source, "--format", "json", "-o", doc, "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = rightsize("report", source, "-o", html, "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    shot = _shot_dir(tmp_path) / f"{name}.png"
    page = Page(browser, html, shot)
    check_clean(page, shot)
    text = page.page.inner_text("body")
    leaked = {k for k in _keys(json.loads(doc.read_text())) - ALLOWED
              if re.search(rf"(?<![\w:.]){re.escape(k)}(?![\w(])", text)}
    names = page.page.inner_text("#kernels") + page.page.inner_text("#ops")
    assert {k for k in leaked if k not in names} == set()
    return page


def _colors(page: Page) -> dict[str, dict[str, str]]:
    return page.page.evaluate("""() => Object.fromEntries(Object.values(Chart.instances)
        .map(c => [c.canvas.id, Object.fromEntries(c.data.datasets.length > 1
            ? c.data.datasets.map(d => [d.label, String(d.backgroundColor)])
            : (c.data.labels || []).map((l, i) => [l, String(
                (c.data.datasets[0].backgroundColor || [])[i])]))]))""")


def test_gpu_trace_report(browser, tmp_path):  # noqa: F811
    trace = shared_path("traces", "kineto",
                        "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz")
    page = _report(browser, tmp_path, trace, "gpu-trace")
    canvases = page.painted_canvases()
    assert canvases.get("chart-breakdown", 0) > 1000 and canvases.get("chart-shares", 0) > 1000
    colors = _colors(page)
    shares, breakdown = colors["chart-shares"], colors["chart-breakdown"]
    loader = [v for k, v in breakdown.items() if "loader" in k.lower()]
    assert loader == [shares["dataloader"]]  # the same colour for the same time
    assert "Tesla V100" in page.page.inner_text("header")
    assert page.page.locator("#warnings").count() == 0
    doc = _doc(tmp_path, "gpu-trace")
    steps = _chart(page, "chart-steps")  # one stacked bar per step, split by share
    assert steps is not None and steps["labels"] == [f"step {n}" for n in range(5, 11)]
    assert {s["label"]: s["color"] for s in steps["sets"]}.items() <= shares.items()
    assert canvases["chart-steps"] > 1000
    drawn = _scatter_ok(page, doc)
    assert drawn[0] == "V100 32GB SXM2"  # the GPU now has no price: a dashed line, named
    ops = page.page.inner_text("#ops")  # self time with the call path, one row per path
    assert "CudnnConvolutionBackward > aten::cudnn_convolution_backward >" in ops
    assert ops.count("aten::cudnn_convolution_backward_weight") == 1
    assert "Self (host)" in ops
    # the thresholds' values sit on one line (the value column is never squeezed to a digit)
    widths = page.page.evaluate(
        "() => [...document.querySelectorAll('dl.kv dd')].map(d => d.getBoundingClientRect().width)")
    assert min(widths) >= 30


def test_cpu_run_report(browser, tmp_path):  # noqa: F811
    recorded = SAMPLES / "runs" / "train_dataloader-cpu"
    if not (recorded / "manifest.json").is_file():
        pytest.skip("no recorded sample run")
    run = shutil.copytree(recorded, tmp_path / "run")
    (run / "analysis.json").unlink()  # analyzed by this rightsize, not the one that recorded it
    page = _report(browser, tmp_path, run, "cpu-run")
    assert "Feed the GPU faster" not in page.page.inner_text("body")
    assert page.page.locator("#headline").is_visible()
    doc = _doc(tmp_path, "cpu-run")
    host = _chart(page, "chart-host")  # host samples, charted (no "No utilization timeline")
    assert host is not None and [s["n"] for s in host["sets"]] == [
        len(doc["host_timeline"]["t_s"])] * 4
    assert "No utilization timeline" not in page.page.inner_text("#utilization")
    lines = {s["label"]: s["color"] for s in host["sets"]}  # no share colour means two things
    shares = {palette()[v] for v in CATEGORY_COLORS.values()}
    assert {k for k, c in lines.items() if c in shares} == {"data-loader workers"}
    assert lines["data-loader workers"] == palette()[CATEGORY_COLORS["dataloader"]]
    assert page.painted_canvases()["chart-host"] > 1000
    steps = _chart(page, "chart-steps")
    assert steps is not None and len(steps["labels"]) == doc["steps"]["count"] == 3
    # no GPU is recommended for a CPU run, every projection is alike: not charted, and why
    assert page.page.locator("#chart-sizing").count() == 0
    assert page.page.inner_text("#no-chart").startswith("Not charted: no GPU is recommended "
                                                        "for a CPU-only run")
    ops = page.page.inner_text("#ops")
    assert "Self (host)" in ops and "GPU (own kernels)" not in ops  # no kernels: no GPU column


def test_nsys_export_report(browser, tmp_path):  # noqa: F811
    export = shared_path("traces", "nsys", "fuser-8fa9ec2-h100-report1.sqlite")
    page = _report(browser, tmp_path, export, "nsys-export")
    assert "H100" in page.page.inner_text("header")
    banner = page.page.inner_text("#warnings")  # a one-step, mostly idle capture
    assert "The capture is inconclusive" in banner and "Only one step was recorded" in banner
    doc = _doc(tmp_path, "nsys-export")
    strip = _chart(page, "chart-steps")  # one step: how it splits over time
    slices = len(doc["steps"]["split_over_time"]["shares_ms"]["idle"])
    assert strip is not None and len(strip["labels"]) == slices == 120
    assert "How the step splits over time" in page.page.inner_text("#steps")
    drawn = _scatter_ok(page, doc)
    assert "H100 SXM" in drawn  # the GPU now, named


def test_an_outlier_leaves_the_scatter_readable(browser, tmp_path):  # noqa: F811
    """Five GPUs and a V100 5x slower than the slowest: Chromium draws each point where the
    log axes of charts.sizing_axes put it (to the pixel), with the labelled ticks."""
    from rightsize.reports.charts import sizing_axes
    from rightsize.reports.render import write_report
    from tests.report_docs import real_doc, typed, with_everything
    from tests.reports.test_report_charts import INNER, OUTLIER

    doc = with_everything(real_doc("train_compute-cpu"))
    base = doc["sizing"]["candidates"][0]
    doc["sizing"]["candidates"] = [
        dict(base, gpu=name, projected_step_ms=ms, projected_step_ms_low=ms * 0.85,
             projected_step_ms_high=ms * 1.15, usd_per_1k_steps=usd, usd_per_hour=1.0)
        for name, ms, usd in [*INNER, OUTLIER]]
    doc["sizing"].update(current="H100 SXM", recommended="L4")
    out = write_report(typed(doc), tmp_path / "outlier.html")
    page = Page(browser, out, tmp_path / "outlier.png")
    check_clean(page, tmp_path / "outlier.png")
    drawn = page.page.evaluate("""() => {
        const c = Object.values(Chart.instances).find(c => c.canvas.id === "chart-sizing");
        const a = c.chartArea, pts = {};
        c.data.datasets.forEach((d, i) => c.getDatasetMeta(i).data.forEach((p, j) => {
            pts[d.data[j].name] = [p.x - a.left, a.bottom - p.y]; }));
        return { pts: pts, w: a.right - a.left, h: a.bottom - a.top,
                 types: [c.scales.x.type, c.scales.y.type],
                 xticks: c.scales.x.ticks.map(t => t.label),
                 yticks: c.scales.y.ticks.map(t => t.label) };
    }""")
    x, y = sizing_axes([(ms * 0.85, ms * 1.15, ms, usd)
                        for _, ms, usd in [*INNER, OUTLIER]]) or (None, None)
    assert x is not None and y is not None
    assert drawn["types"] == ["logarithmic", "logarithmic"]
    assert drawn["xticks"] == ["20", "50", "100", "200", "500", "1,000"]
    assert drawn["yticks"] == ["$0.02", "$0.03", "$0.05", "$0.10"]
    for name, ms, usd in [*INNER, OUTLIER]:
        px, py = drawn["pts"][name]
        assert abs(px - drawn["w"] * x.fraction(ms)) < 0.5, name
        assert abs(py - drawn["h"] * y.fraction(usd)) < 0.5, name
    inner = sorted(drawn["pts"][n][0] for n, _, _ in INNER)
    assert inner[-1] - inner[0] > 0.4 * drawn["w"]  # 41% of the plot's width, not 12%
