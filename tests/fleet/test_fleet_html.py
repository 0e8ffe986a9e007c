"""The fleet page without a browser: the report's palette and nothing else, chart data by
palette name, escaping, the table schema as documented, and what `rightsize fleet` lists."""

from __future__ import annotations

import re
from importlib import resources

from rightsize.fleet.report import build
from rightsize.fleet.schema import COLUMNS
from rightsize.fleet.table import FleetTable
from rightsize.reports.fleet_html import chart_data, render_fleet_html
from tests.conftest import REPO, cli
from tests.fleet.rows import ROWS
from tests.reports.palette import palette, root_block, style_css

LITERAL = re.compile(r"#[0-9a-fA-F]{3,8}(?![\w-])|\b(?:rgba?|hsla?)\s*\(")
USED = re.compile(r"""color\(\s*"(--[\w-]+)"\s*\)""")


def _source(name: str) -> str:
    return (resources.files("rightsize.reports") / name).read_text("utf-8")


def test_one_palette_and_no_colour_of_its_own(tmp_path):
    for name in ("templates/fleet.html.j2", "templates/fleet.js", "fleet_html.py"):
        assert LITERAL.findall(_source(name)) == [], name
    t = FleetTable.open(tmp_path / "t", create=True)
    t.append(ROWS)
    r = build(t.rows(), "t")
    page = render_fleet_html(r, {})
    assert root_block(page) == root_block(style_css())
    data = chart_data(r)
    asked = {*data["verdict"]["colors"], *data["bound"]["colors"], *data["team"]["colors"],
             *data["weeks"]["colors"], *USED.findall(_source("templates/fleet.js")), "--good"}
    assert asked - set(palette()) == set()
    assert data["verdict"]["colors"] == ["--bad", "--good"]  # over-provisioned, right-sized
    assert data["bound"] == {"labels": ["dataloader", "compute"], "values": [2.0, 1.5],
                             "colors": ["--c-dataloader", "--c-compute"]}


def test_the_schema_doc_lists_every_column_in_order():
    doc = (REPO / "docs" / "fleet-table.md").read_text()
    documented = re.findall(r"^\| `(\w+)` \|", doc, flags=re.MULTILINE)
    assert documented == list(COLUMNS)


def test_fleet_lists_scan_and_report():
    res = cli("fleet", "--help")
    assert res.returncode == 0
    assert re.search(r"^  report\s", res.stdout, flags=re.MULTILINE)
    assert re.search(r"^  scan\s", res.stdout, flags=re.MULTILINE)
