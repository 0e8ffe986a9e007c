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

from tests.conftest import SAMPLES, shared_path
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


def test_nsys_export_report(browser, tmp_path):  # noqa: F811
    export = shared_path("traces", "nsys", "fuser-8fa9ec2-h100-report1.sqlite")
    page = _report(browser, tmp_path, export, "nsys-export")
    assert "H100" in page.page.inner_text("header")
    banner = page.page.inner_text("#warnings")  # a one-step, mostly idle capture
    assert "The capture is inconclusive" in banner and "Only one step was recorded" in banner
