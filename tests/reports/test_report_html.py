"""The HTML page as text: self-contained, small whatever the input, careful Jinja, and the
templates and chart library inside the built wheel. (The DOM is checked in test_browser.py.)"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import jinja2
import pytest

from rightsize.reports import html as html_mod
from rightsize.reports.model import build_model
from rightsize.reports.render import render
from tests.conftest import REPO
from tests.report_docs import real_doc, typed, with_everything

PAYLOAD = "</script><img src=x onerror=alert(1)>"


def test_page_is_self_contained():
    page = render(typed(with_everything(real_doc())), "html")
    assert page.startswith("<!doctype html>")
    # nothing is fetched: no src/href/url() to anywhere, and the CSP forbids it anyway
    assert re.findall(r"""(?:src|href)\s*=\s*["']?(?!#)[^"'\s>]+""", page) == []
    assert "url(" not in page and "@import" not in page
    assert "default-src 'none'" in page
    assert "Chart.js v4" in page and "sourceMappingURL" not in page
    assert page.count("<script>") == 2


def test_names_are_escaped_in_the_source():
    doc = with_everything(real_doc(), name=PAYLOAD)
    doc["top_kernels"][0]["name"] = PAYLOAD
    doc["top_ops"][0]["name"] = f"aten::{PAYLOAD}"
    doc["self_ops"][0].update(name=f"aten::{PAYLOAD}", path=[PAYLOAD, f"aten::{PAYLOAD}"],
                              module=PAYLOAD)
    doc["recommendations"][0]["title"] = "<b>bold</b>"
    page = render(typed(doc), "html", manifest={"command": {"argv": ["python", "<b>x</b>"]}})
    assert PAYLOAD not in page and "<b>bold</b>" not in page and "<b>x</b>" not in page
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    # In the chart data the names are JSON with <, >, & escaped, so the script never ends early.
    data = page.split("var RS = ", 1)[1].split(";\n", 1)[0]
    assert "</" not in data and "<" not in data


@pytest.mark.slow  # renders a page from a huge analysis: about 15 s on the 2-core VM
def test_a_report_from_a_huge_analysis_stays_small():
    """Top-k tables and a downsampled timeline: a 1 GB trace's analysis is bounded like this."""
    doc = with_everything(real_doc())
    doc["top_kernels"] = [
        {**doc["top_kernels"][0], "name": f"k{i}" + "x" * 4000} for i in range(5000)
    ]
    doc["top_ops"] = [{**doc["top_ops"][0], "name": f"op{i}" + "y" * 4000} for i in range(5000)]
    n = 2_000_000
    doc["timeline"] = {
        "bucket_ms": 0.1,
        "t_ms": [i * 0.1 for i in range(n)],
        "trace_busy_pct": [50.0] * n,
        "nvml_gpu_util_pct": [60.0] * n,
    }
    doc["sizing"]["candidates"] = doc["sizing"]["candidates"] * 500
    doc["self_ops"] = [{**doc["self_ops"][0], "name": f"op{i}" + "y" * 4000,
                        "path": ["z" * 4000] * 50} for i in range(5000)]
    doc["steps"]["per_step"] = doc["steps"]["per_step"] * 100_000
    page = render(typed(doc), "html")
    assert len(page.encode()) < 2_000_000
    assert page.count('class="name"') <= 15 + 15 + len(doc["inputs"])


def test_jinja_is_strict_and_escaping():
    env = html_mod.environment()
    assert env.undefined is jinja2.StrictUndefined and env.autoescape is True
    assert isinstance(env.loader, jinja2.PackageLoader)
    with pytest.raises(jinja2.UndefinedError):  # a typo in a template fails, not blanks
        env.from_string("{{ m.headline.no_such_field }}").render(m=build_model(typed(real_doc())))
    with pytest.raises(jinja2.UndefinedError):
        env.get_template(html_mod.TEMPLATE).render(m=build_model(typed(real_doc())), charts={})
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


def test_empty_states_render():
    from tests.report_docs import empty_doc

    page = render(typed(empty_doc()), "html")
    for text in (
        "No diagnosis in this analysis",
        "No steps found",
        "No GPU kernels",
        "No sizing in this analysis",
        "No utilization timeline",
        "No memory events",
    ):
        assert text in page
    assert "<canvas" not in page


@pytest.mark.slow
def test_wheel_ships_templates_and_chart_library(tmp_path):
    try:
        import hatchling  # noqa: F401

        isolation = ["--no-isolation"]  # offline and fast when the backend is at hand
    except ImportError:
        isolation = []
    pytest.importorskip("build", reason="the test extra's `build` is not installed")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            *isolation,
            "--outdir",
            str(tmp_path),
            str(REPO),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    [wheel] = tmp_path.glob("rightsize-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in (
        "templates/report.html.j2",
        "templates/macros.html.j2",
        "templates/style.css",
        "templates/report.js",
        "static/chart.umd.min.js",
        "static/chart.js.LICENSE.md",
    ):
        assert f"rightsize/reports/{rel}" in names, rel
