"""The fleet page of a token-protected ``rightsize serve`` in a real headless Chromium.

Logged in once (``/?token=``), the runs page leads to ``/fleet``; there, in the DOM: no console
error (a script the policy blocked would log one) or request off the server, the charts drawn
by the two scripts the policy allows by hash, the uploads listed newest first with their labels
beside a workload of cluster metrics (written by ``fleet metrics --table DATA/fleet`` before the
server started), a hostile file name as text, the filter form narrowing the list by team, by
recorded day and by source, and a job's link opening that run's report with the token cookie
(200, not 401).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import chromium, require_chromium
from tests.conftest import cli
from tests.fleet.jobs import A100, trace, write
from tests.fleet_metrics.gen import response, scenarios
from tests.serve.serving import Server

TOKEN = "Zq8-xY2_pL5vR9tW"
HOSTILE = "</script><img src=x onerror=alert(1)>.json"
SHOWN = "script><img src=x onerror=alert(1)>.json"  # an upload's name: its last component

require_chromium()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("fleet-browser")
    # ml/small: a week of dcgm-exporter series on an A100 80GB that a MIG 1g.10gb holds
    (tmp / "dcgm.json").write_bytes(response(scenarios()[:3]))
    res = cli("fleet", "metrics", "--from", tmp / "dcgm.json", "--table", tmp / "data" / "fleet",
              "-q")
    assert res.returncode == 0, res.stderr
    server = Server(tmp / "data", ("--token", TOKEN)).start()
    server.headers = {"Authorization": f"Bearer {TOKEN}"}
    ids = {}
    try:
        for name, doc, labels in (("h100.pt.trace.json", trace(day=0), "team=vision"),
                                  ("a100.pt.trace.json", trace(day=1, gpu=A100), "team=nlp")):
            data = write(tmp / name, doc).read_bytes()
            reply = server.upload((name, data), path=f"/api/runs?{labels}&project=p")
            ids[name] = server.wait(reply.json()["id"])["id"]
        ids[HOSTILE] = server.wait(server.upload((HOSTILE, b"{}")).json()["id"])["id"]
        yield server, ids
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def open_fleet(browser: Any, server: Server) -> tuple[Any, dict[str, list[str]]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    events: dict[str, list[str]] = {"errors": [], "foreign": [], "dialogs": []}
    page.on("console", lambda m: events["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: events["errors"].append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(server.url)
            else events["foreign"].append(r.url))
    page.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
    page.goto(f"{server.url}/?token={TOKEN}")  # the cookie, then the token-less URL
    page.goto(f"{server.url}/runs")
    page.click("header nav a[href='/fleet']")
    page.wait_for_url(f"{server.url}/fleet")
    return page, events


def jobs(page: Any) -> list[list[str]]:
    return page.eval_on_selector_all("#jobs-table tbody tr", """rs => rs.map(r =>
        [...r.querySelectorAll('td')].map(td => td.textContent.trim()))""")


def test_the_fleet_page_draws_lists_and_filters(browser: Any,
                                                served: tuple[Server, dict[str, str]]) -> None:
    server, _ = served
    page, events = open_fleet(browser, server)
    # verdict, bottleneck, team and savings (the workload's MIG slice) charts; no week chart:
    # this week ends on the newest recorded day, the hostile upload's (recorded at its upload:
    # no trace clock), and holds no ok job; the traces are from 2023, the workload's window
    # ends 2026-01-08
    assert page.evaluate("document.body.dataset.charts") == "4"
    painted = page.evaluate("""() => [...document.querySelectorAll('canvas')].map(c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return [c.id, n]; })""")
    assert sorted(i for i, n in painted if n > 500) == ["chart-bound", "chart-savings",
                                                         "chart-team", "chart-verdict"]
    listed = jobs(page)
    assert [(r[0], r[2], r[3]) for r in listed] == [(SHOWN, "-", "-"), ("ml/small", "ml", "small"),
                                                    ("a100.pt.trace.json", "nlp", "p"),
                                                    ("h100.pt.trace.json", "vision", "p")]
    assert [r[4] for r in listed[1:]] == ["1 × A100 80GB SXM"] * 2 + ["1 × H100 SXM"]
    # the workload's row: no bottleneck (no trace), its placement, source and confidence
    assert listed[1][5:] == ["-", "over-provisioned", "1 x MIG 1g.10gb on A100 80GB SXM",
                             "metrics", "high"]
    assert [r[8] for r in listed[2:]] == ["trace", "trace"]
    over = page.eval_on_selector_all("#over-table tbody tr.job", """rs => rs.map(r =>
        [...r.querySelectorAll('td')].map(td => td.firstChild.textContent.trim()))""")
    # $1.79 x 730 h a month now, a seventh of it on the slice: $1,306.70 - $186.67 saved
    assert [(r[1], r[4], r[6], r[7], r[8], r[9]) for r in over] == [
        ("ml/small", "1 x MIG 1g.10gb on A100 80GB SXM", "n/a (no steps)", "730", "$1,120",
         "metrics")]
    assert page.locator("#over-table a.job").count() == 0  # a workload has no report page
    assert page.eval_on_selector_all("img", "is => is.length") == 0
    assert SHOWN in page.inner_text("#error-list")

    page.fill("#fleet-filter input[name=team]", "vision")
    page.click("#fleet-filter button[type=submit]")
    page.wait_for_url("**/fleet?team=vision*")
    assert [r[0] for r in jobs(page)] == ["h100.pt.trace.json"]
    assert page.input_value("#fleet-filter input[name=team]") == "vision"
    page.click("#fleet-clear")
    page.wait_for_url(f"{server.url}/fleet")
    page.select_option("#fleet-filter select[name=source]", "metrics")
    page.click("#fleet-filter button[type=submit]")
    page.wait_for_url("**/fleet?*source=metrics*")
    assert [r[0] for r in jobs(page)] == ["ml/small"]
    assert page.input_value("#fleet-filter select[name=source]") == "metrics"
    assert "source metrics" in page.inner_text("header .sub")
    page.click("#fleet-clear")
    page.wait_for_url(f"{server.url}/fleet")
    page.fill("#fleet-filter input[name=since]", "2023-11-15")
    page.fill("#fleet-filter input[name=until]", "2023-11-15")
    page.click("#fleet-filter button[type=submit]")
    page.wait_for_url("**/fleet?*since=2023-11-15*")
    assert [r[0] for r in jobs(page)] == ["a100.pt.trace.json"]
    assert "recorded 2023-11-15 to 2023-11-15" in page.inner_text("header .sub")
    assert events == {"errors": [], "foreign": [], "dialogs": []}
    page.close()


def test_a_job_link_opens_its_report_with_the_token_cookie(
        browser: Any, served: tuple[Server, dict[str, str]]) -> None:
    server, ids = served
    page, events = open_fleet(browser, server)
    link = page.locator("#jobs-table a.job", has_text="h100.pt.trace.json")
    assert link.get_attribute("href") == f"/r/{ids['h100.pt.trace.json']}"
    with page.expect_navigation() as nav:
        link.click()
    assert nav.value.status == 200 and page.url == f"{server.url}/r/{ids['h100.pt.trace.json']}"
    assert page.title().startswith("rightsize")
    assert page.locator("#headline").count() == 1
    # the served report is sandboxed (an opaque origin): its way back must still carry the
    # token cookie (SameSite=Lax: top-level GET navigations do; Strict ones answered 401)
    with page.expect_navigation() as back:
        page.click("nav a[href='/runs']")
    assert back.value.status == 200 and page.url == f"{server.url}/runs"
    page.go_back()
    page.go_back()
    failed = page.locator("#jobs-table a.job", has_text="onerror")
    assert failed.get_attribute("href") == f"/runs/{ids[HOSTILE]}"  # its status and error
    assert events["foreign"] == [] and events["dialogs"] == []
    page.close()

