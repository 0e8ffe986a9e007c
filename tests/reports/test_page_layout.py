"""Pages without collisions, at 1280 and 1920 px wide, in real headless Chromium: the analysis
report (a GPU run and a CPU run), compare, plan and the fleet report, each written by the real
CLI from the repository's samples. Screenshots go to ``$RIGHTSIZE_SHOTS`` (default: the
test's tmp folder) for eyes.

DOM assertions:

* no line of visible text overlaps another text's line (the client rects of every text node,
  pairwise disjoint): no cell spills over its neighbour, no card over a card;
* the candidate chart's names (drawn on its canvas, their boxes recorded by report.js) are
  pairwise disjoint, inside the plot, and crossed by no range bar;
* a CPU run's candidates are not charted (every projection alike, none recommended): the page
  says why instead;
* the fleet table's job names sit on one line (never broken mid-word), its reasons on rows of
  their own, and without ``--usage`` no column of n/a a month.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, require_chromium
from tests.conftest import SAMPLES, cli

require_chromium()

WIDTHS = (1280, 1920)

# Every visible text node's line boxes; pairs of boxes from different nodes that overlap by
# more than a pixel each way (a sweep over the boxes sorted by their top).
OVERLAPS = """() => {
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node, id = 0;
  while ((node = walker.nextNode())) {
    if (!node.textContent.trim()) continue;
    const el = node.parentElement;
    if (el.closest('script, style, details:not([open]) > :not(summary)')) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    id++;
    for (const r of range.getClientRects()) {
      if (r.width < 1 || r.height < 1) continue;
      boxes.push({id, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom,
                  text: node.textContent.trim().slice(0, 40)});
    }
  }
  boxes.sort((a, b) => a.y0 - b.y0);
  const out = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length && boxes[j].y0 < boxes[i].y1 - 1; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.id === b.id) continue;
      if (a.x0 < b.x1 - 1 && b.x0 < a.x1 - 1 && a.y0 < b.y1 - 1 && b.y0 < a.y1 - 1)
        out.push([a.text, b.text]);
    }
  }
  return {boxes: boxes.length, overlaps: out.slice(0, 10)};
}"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pages, written by the CLI: analyze, compare, plan, fleet report."""
    out = tmp_path_factory.mktemp("pages")
    runs = SAMPLES / "runs"
    made = {
        "report": ("analyze", runs / "train_pcie-h100", "--format", "html"),
        "report-cpu": ("analyze", runs / "train_dataloader-cpu", "--format", "html"),
        "compare": ("compare", runs / "train_compute-h100",
                    SAMPLES / "whatif" / "train_compute_fp32-h200", "--format", "html"),
        "plan": ("plan", runs / "infer-h100", "--samples-per-step", "256", "--latency-slo-ms",
                 "20", "--demand", SAMPLES / "day.csv", "--format", "html", "--no-manifests"),
    }
    for name, args in made.items():
        res = cli(*args, "-o", out / f"{name}.html", "-q", cwd=out)
        assert res.returncode == 0, f"{name}: {res.stderr[-2000:]}"
    table = out / "fleet-table"
    res = cli("fleet", "scan", *sorted(runs.glob("*-h100")), "--table", table, "--workers",
              "1", "-q", cwd=out)
    assert res.returncode == 0, res.stderr[-2000:]
    res = cli("fleet", "report", "--table", table, "--format", "html", "-o", out / "fleet.html",
              cwd=out)
    assert res.returncode == 0, res.stderr[-2000:]
    return {name: out / f"{name}.html" for name in (*made, "fleet")}


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("RIGHTSIZE_SHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _open(browser: Any, page: Path, width: int, shot: Path) -> Any:
    p = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.goto(page.resolve().as_uri(), wait_until="load")
    p.screenshot(path=str(shot), full_page=True)
    assert errors == []
    return p


def _disjoint(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes[i + 1:], i + 1)
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["report", "report-cpu", "compare", "plan", "fleet"])
def test_no_text_overlaps_another(browser, pages, tmp_path, name, width):
    p = _open(browser, pages[name], width, _shots(tmp_path) / f"{name}-{width}.png")
    try:
        found = p.evaluate(OVERLAPS)
        assert found["boxes"] > 100  # the page has text to check
        assert found["overlaps"] == []
        assert p.evaluate("document.documentElement.scrollWidth") <= width  # nothing spills
    finally:
        p.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_candidate_names_cross_no_name_and_no_range_bar(browser, pages, tmp_path, width):
    p = _open(browser, pages["report"], width, _shots(tmp_path) / f"report-chart-{width}.png")
    try:
        drawn = p.evaluate("""() => {
            const c = document.getElementById('chart-sizing');
            const chart = Object.values(Chart.instances).find(x => x.canvas === c);
            return {names: c.dataset.labels.split('|'), boxes: JSON.parse(c.dataset.labelBoxes),
                    bars: JSON.parse(c.dataset.bars), area: chart.chartArea};
        }""")
    finally:
        p.close()
    boxes, bars, area = drawn["boxes"], drawn["bars"], drawn["area"]
    assert len(boxes) == len(drawn["names"]) >= 10  # most of the 17 priced GPUs are named
    assert "H100 SXM" in drawn["names"]  # the GPU now and recommended
    assert _disjoint(boxes) == []
    crossed = [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(bars)
               if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]
    assert crossed == []
    assert all(area["left"] <= b[0] and b[2] <= area["right"] and area["top"] <= b[1]
               and b[3] <= area["bottom"] for b in boxes)


def test_a_cpu_run_is_not_charted_and_says_why(browser, pages, tmp_path):
    p = _open(browser, pages["report-cpu"], 1280, _shots(tmp_path) / "report-cpu-gpus.png")
    try:
        assert p.locator("#chart-sizing").count() == 0
        said = p.inner_text("#no-chart")
        table_folded = p.locator("#gpus details").count()
    finally:
        p.close()
    assert said.startswith("Not charted: no GPU is recommended for a CPU-only run: its "
                           "op-level FLOPs and bytes are no model of GPU kernels")
    assert table_folded == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_names_on_one_line_and_reasons_on_their_own_rows(browser, pages, tmp_path,
                                                                width):
    p = _open(browser, pages["fleet"], width, _shots(tmp_path) / f"fleet-over-{width}.png")
    try:
        cells = p.evaluate("""() => [...document.querySelectorAll('#over-table tr.job')].map(
            r => { const a = r.querySelector('td:nth-child(2) a, td:nth-child(2) span');
                   const range = document.createRange(); range.selectNodeContents(a);
                   const tops = new Set([...range.getClientRects()].map(x => Math.round(x.top)));
                   return [a.textContent, tops.size]; })""")
        heads = p.eval_on_selector_all("#over-table th", "ts => ts.map(t => t.textContent)")
        whys = p.eval_on_selector_all("#over-table tr.why td[colspan]",
                                      "ts => ts.map(t => t.textContent)")
        note = p.inner_text("#over-per-1k")
    finally:
        p.close()
    assert cells and all(lines == 1 for _, lines in cells), cells
    assert len(whys) == len(cells) and all(w.strip() for w in whys)
    assert "GPU-hours a month" not in heads and "Saved a month" not in heads
    assert note.startswith("Savings per 1k steps")
    assert json.dumps(heads).count("Per 1k steps") == 1
