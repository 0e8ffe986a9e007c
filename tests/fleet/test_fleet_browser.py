"""The fleet report's HTML page in a real headless Chromium (Debian's, through Playwright).

The table is the hand-made one of tests/fleet/rows.py (its figures worked out there: trace
jobs and workloads of cluster metrics), one job named like an injection, and one real job
scanned from a trace, whose row links to its own report page. Checked in the DOM: no console error, network request or dialog; the five charts
drawn and painted; the ranked table's rows and figures; the hostile name shown as text; the
link to the job's page opening that page.
"""

from __future__ import annotations

import pytest

from rightsize.fleet.table import FleetTable
from tests.browser import opened, require_chromium
from tests.conftest import cli
from tests.fleet.jobs import trace, write
from tests.fleet.rows import METRICS, ROWS, USAGE, row

PAYLOAD = "</script><img src=x onerror=alert(1)>"

require_chromium()


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    write(tmp / "in" / "real" / "job.json", trace(day=0))
    res = cli("fleet", "scan", tmp / "in", "--table", tmp / "t", "--workers", "1")
    assert res.returncode == 0, res.stderr
    table = FleetTable(tmp / "t")
    table.append([*ROWS, *METRICS, row("kx", PAYLOAD, 17, team="vision", status="bad-input",
                             reason=f"{PAYLOAD}: not a supported format", document=None)])
    (tmp / "usage.csv").write_text(USAGE)
    out = tmp / "out" / "fleet.html"
    res = cli("fleet", "report", "--table", tmp / "t", "--usage", tmp / "usage.csv",
              "--format", "html", "-o", out)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def page(page_path):
    with opened(page_path) as loaded:
        yield loaded


def test_loads_clean_and_draws_every_chart(page):
    p, events, url = page
    assert events["errors"] == [] and events["dialogs"] == []
    assert [u for u in events["requests"] if u != url] == []
    assert p.evaluate("document.body.dataset.charts") == "5"
    painted = p.evaluate("""() => Object.fromEntries([...document.querySelectorAll('canvas')]
        .map(c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                    let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
                    return [c.id, n]; }))""")
    assert sorted(painted) == ["chart-bound", "chart-savings", "chart-team", "chart-verdict",
                               "chart-weeks"]
    assert all(n > 500 for n in painted.values()), painted


def test_ranked_savings_and_summary(page):
    p, _, _ = page
    rows = p.eval_on_selector_all("#over-table tbody tr.job", """rs => rs.map(r =>
        [...r.querySelectorAll('td')].map(td => td.firstChild.textContent.trim()))""")
    # the workloads' own savings a month (5,840 - 1,460; 2,555 - 365), then the usage's
    assert [(r[0], r[1], r[5], r[8], r[9], r[10]) for r in rows] == [
        ("1", "ml/web", "75%", "$4,380", "metrics", "high"),
        ("2", "ml/small", "86%", "$2,190", "metrics", "medium"),
        ("3", "a", "50%", "$150", "trace", "-"), ("4", "e", "60%", "$12.00", "trace", "-")]
    assert [(r[3], r[4], r[6], r[7]) for r in rows[:2]] == [
        ("4 × A100 80GB SXM", "1 x A100 80GB SXM", "n/a (no steps)", "2920"),
        ("1 × A100 80GB SXM", "1 x MIG 1g.10gb on A100 80GB SXM", "n/a (no steps)", "730")]
    cards = p.eval_on_selector_all(".card .v", "vs => vs.map(v => v.textContent.trim())")
    # 110 h of usage + a month of the workloads' GPUs: 2,920 + 730 + 730
    assert cards[1:] == ["4490", "$10,175", "4 jobs"]
    by_source = p.eval_on_selector_all("#by-source tbody tr", """rs => rs.map(r =>
        [...r.querySelectorAll('td')].map(td => td.textContent.trim()))""")
    assert by_source == [["metrics", "3", "3", "4380", "$9,855"],
                         ["trace", "5", "2", "110", "$320"]]
    assert ("2 of 3 labels matched a job; 3 metrics workloads: their GPUs held x 730 h; usage "
            "labels with no job: zzz") in p.inner_text("#hours-note")
    changed = p.eval_on_selector_all("#changed li", "ls => ls.map(l => l.textContent)")
    assert changed == ["c: host / over-provisioned → compute / right-sized"]


def test_hostile_names_are_text(page):
    p, events, _ = page
    cells = p.eval_on_selector_all("#jobs-table td.name", "ts => ts.map(t => t.textContent)")
    assert PAYLOAD in cells
    assert p.eval_on_selector_all("img", "is => is.length") == 0
    assert PAYLOAD + ": not a supported format" in p.inner_text("#error-list")
    assert events["dialogs"] == []


def test_each_listed_job_with_a_document_links_its_page(page):
    p, _, _ = page
    links = p.eval_on_selector_all("a.job", "as => as.map(a => [a.textContent, a.href])")
    assert [name for name, _ in links] == ["real/job.json"]  # the hand-made rows have none
    p.click("a.job")
    p.wait_for_load_state("load")
    assert p.url == links[0][1] and p.url.endswith(".html")
    assert p.title().startswith("rightsize")
    assert p.locator("#headline").count() == 1
