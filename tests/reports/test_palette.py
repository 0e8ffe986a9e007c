"""One palette for every page: the report and `rightsize compare` colour a share alike.

The colours live in style.css's ``:root`` only; the chart data carries palette names, the page's
script reads them from the page's own stylesheet. Checked on the rendered pages (the same :root
rule in both), on the chart data (a share's name is the report's for that share) and on the
sources (no colour literal in a chart script or the compare page)."""

from __future__ import annotations

import re
from importlib import resources

from rightsize.analyzers.compare import Side, compare_sides
from rightsize.analyzers.document import Document
from rightsize.reports.charts import CATEGORY_COLORS, category_color
from rightsize.reports.compare_html import chart_data, render_compare_html
from rightsize.reports.html import render_html
from rightsize.reports.model import build_model
from tests.conftest import SAMPLES
from tests.reports.palette import palette, root_block, style_css

RUNS = SAMPLES / "runs"
# A colour written out: #rgb/#rrggbb(aa), rgb()/rgba()/hsl()/hsla(). Palette names (--c-memory)
# and page anchors (href="#ops") are not colours.
LITERAL = re.compile(r"#[0-9a-fA-F]{3,8}(?![\w-])|\b(?:rgba?|hsla?)\s*\(")
USED = re.compile(r"""color\(\s*"(--[\w-]+)"\s*\)""")


def _doc(run: str) -> Document:
    return Document.from_json(RUNS / run / "analysis.json")


def _pages() -> tuple[str, str, dict]:
    a, b = _doc("train_dataloader-cpu"), _doc("train_compute-cpu")
    comparison = compare_sides(Side("a.json", a), Side("b.json", b))
    report = render_html(build_model(a))
    return report, render_compare_html(comparison), chart_data(comparison)


def _template(name: str) -> str:
    return (resources.files("rightsize.reports") / "templates" / name).read_text("utf-8")


def test_report_and_compare_pages_carry_the_same_palette():
    report, compare, data = _pages()
    # the same :root rule, the one style.css defines, in both pages
    assert root_block(report) == root_block(compare) == root_block(style_css())
    assert palette()["--c-dataloader"] == "#e07b00" and palette()["--c-memory"] == "#16a2b8"
    # a share is drawn in the report's colour for it: the dataloader bar is the report's
    # dataloader colour (compare used to pick colours by position: memory came out orange)
    shares = data["shares"]
    assert shares["keys"] == ["compute", "memory", "pcie", "dataloader", "communication", "host",
                              "idle"]
    assert shares["colors"] == ["--c-compute", "--c-memory", "--c-pcie", "--c-dataloader",
                                "--c-communication", "--c-host", "--c-idle"]
    assert shares["colors"] == [category_color(k) for k in shares["keys"]]
    # slower in the palette's "bad", faster in its "good"
    deltas, colors = data["changes"]["delta_ms"], data["changes"]["colors"]
    assert len(colors) == len(deltas) > 0
    assert colors == ["--bad" if d > 0 else "--good" for d in deltas]
    assert "--good" in colors  # the data-loader wait fell: at least one change is faster


def test_every_colour_a_chart_asks_for_is_in_the_palette():
    scripts = "".join(_template(n) for n in ("chart_setup.js", "report.js", "compare.js"))
    asked = set(USED.findall(scripts)) | set(CATEGORY_COLORS.values()) | {
        category_color("no-such-category"), "--bad", "--good"}
    assert asked - set(palette()) == set()
    assert "--ink" in asked and "--c-unknown" in asked


def test_no_colour_is_written_outside_the_palette():
    for name in ("compare.html.j2", "compare.js", "chart_setup.js", "report.js",
                 "report.html.j2", "plan.html.j2", "macros.html.j2"):
        assert LITERAL.findall(_template(name)) == [], name
    for module in ("charts.py", "compare_html.py", "model.py"):
        text = (resources.files("rightsize.reports") / module).read_text("utf-8")
        assert LITERAL.findall(text) == [], module
    assert len(LITERAL.findall(root_block(style_css()))) == len(palette())  # each one, once
    assert LITERAL.findall('href="#ops" --c-memory #16a2b8 rgba(1,2,3,.5)') == ["#16a2b8", "rgba("]
