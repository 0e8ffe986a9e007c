"""The upload flow in a real headless Chromium (Debian ``chromium`` driven by Playwright).

Drop a trace on the upload page (a real ``drop`` event carrying a File), watch the XHR upload
progress, land on the run page and then on the report; the same with the file chooser. No
request may leave loopback and the pages log no console errors. Skips without Chromium or
Playwright, like tests/reports/test_browser.py.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.browser import chromium, require_chromium
from tests.conftest import shared_path
from tests.serve.serving import Server

TRACE = ("traces", "kineto", "hta-trace_filter-sampled_rank-0.json.gz")
OTHER = ("traces", "kineto", "hta-cupti_profiler-benchmark_result_924719_1679055439_trace.json.gz")
# Hands every upload progress event to the test (a binding, which outlives the navigations;
# the report is sandboxed, so no storage of the server's origin is readable there).
RECORD_PROGRESS = """
const add = XMLHttpRequestUpload.prototype.addEventListener;
XMLHttpRequestUpload.prototype.addEventListener = function (type, fn, opts) {
  if (type === "progress") {
    add.call(this, type, ev => { window.recordProgress(ev.loaded, ev.total); }, opts);
  }
  return add.call(this, type, fn, opts);
};
"""

require_chromium()


@pytest.fixture(scope="module")
def page_factory():
    with chromium() as browser:
        yield browser


def open_page(browser, server: Server, progress: list | None = None):
    page = browser.new_page()
    page.expose_function("recordProgress",
                         lambda loaded, total: (progress if progress is not None else [])
                         .append([loaded, total]))
    errors: list[str] = []
    foreign: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(server.url)
            else foreign.append(r.url))
    page.add_init_script(RECORD_PROGRESS)
    page.goto(server.url + "/")
    return page, errors, foreign


def test_drop_a_trace_see_progress_land_on_the_report(page_factory, server: Server) -> None:
    path = shared_path(*TRACE)
    seen: list[list[int]] = []
    page, errors, foreign = open_page(page_factory, server, seen)
    payload = base64.b64encode(path.read_bytes()).decode()
    transfer = page.evaluate_handle(
        """([name, b64]) => {
             const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
             const dt = new DataTransfer();
             dt.items.add(new File([bytes], name, {type: "application/gzip"}));
             return dt;
           }""", [path.name, payload])
    page.dispatch_event("#drop", "dragenter", {"dataTransfer": transfer})
    assert "over" in page.get_attribute("#drop", "class")
    page.dispatch_event("#drop", "drop", {"dataTransfer": transfer})
    assert page.text_content("#chosen") == path.name
    page.click("#send")
    page.wait_for_url(f"{server.url}/r/*", timeout=60_000)
    assert page.title().startswith("rightsize")
    assert path.name in page.content()
    assert seen and seen[-1][0] == seen[-1][1] > path.stat().st_size  # whole body, headers too
    assert errors == [] and foreign == []
    page.close()


def test_choose_a_file_then_the_run_list_shows_it(page_factory, server: Server,
                                                  tmp_path: Path) -> None:
    path = shared_path(*OTHER)
    page, errors, foreign = open_page(page_factory, server)
    page.set_input_files("#file", str(path))
    page.click("#send")
    page.wait_for_url(f"{server.url}/r/*", timeout=60_000)
    run_id = page.url.rsplit("/", 1)[-1]
    page.goto(f"{server.url}/runs")
    row = page.locator(f"tr[data-id='{run_id}']")
    assert path.name in row.inner_text() and "report" in row.inner_text()
    assert errors == [] and foreign == []
    page.close()


def test_compare_fits_1280_px_and_the_report_leads_back(page_factory, server: Server) -> None:
    """Issue 29, 12: at 1280 px the compare table cut off side B; a served report had no
    way back."""
    long_name = "a-rather-long-capture-name-" * 4 + ".json.gz"
    ids = [server.wait(server.upload((f"{i}-{long_name}", shared_path(*p).read_bytes())
                                     ).json()["id"])["id"] for i, p in enumerate((TRACE, OTHER))]
    page = page_factory.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server.url}/compare?a={ids[0]}&b={ids[1]}")
    right = page.evaluate("document.querySelector('#compare').getBoundingClientRect().right")
    last = page.evaluate("Math.max(...[...document.querySelectorAll('#compare tr > :last-child')]"
                         ".map(c => c.getBoundingClientRect().right))")
    width = page.evaluate("document.documentElement.clientWidth")
    assert right <= width and last <= width, (right, last, width)
    page.goto(f"{server.url}/r/{ids[1]}")
    page.click("#rightsize-serve-nav a[href='/runs']")
    page.wait_for_url(f"{server.url}/runs")
    assert ids[1] in page.content()
    page.close()
