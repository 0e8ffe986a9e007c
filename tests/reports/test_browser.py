"""The HTML report in a real headless Chromium (Debian ``chromium`` driven by Playwright).

The page must load from a file with no console errors and no network request, draw its charts
(non-blank canvases), and show hostile names as text: a kernel and an op named
``</script><img src=x onerror=alert(1)>`` and a command line with ``<b>``, checked in the DOM.
Skips when Chromium or Playwright is missing; ``.ci/run`` installs both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import chromium, require_chromium
from tests.conftest import SAMPLES, cli, shared_path
from tests.tracebuilder import BASE_NS, TraceBuilder

PAYLOAD = "</script><img src=x onerror=alert(1)>"

require_chromium()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


rightsize = cli

class Page:
    """One loaded report: the page, its console errors and every request it made."""

    def __init__(self, browser, path: Path, shot: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url, wait_until="load")
        self.page.screenshot(path=str(shot), full_page=True)

    def network(self) -> list[str]:
        return [u for u in self.requests if u != self.url]

    def painted_canvases(self) -> dict[str, int]:
        """Canvas id -> number of non-transparent pixels."""
        return self.page.evaluate("""() => Object.fromEntries(
            [...document.querySelectorAll('canvas')].map(c => {
              const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
              let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
              return [c.id, n];
            }))""")


def check_clean(page: Page, shot: Path) -> None:
    assert page.errors == []
    assert page.network() == []
    assert page.dialogs == []
    assert shot.stat().st_size > 10_000


def sample_run(tmp_path: Path) -> Path:
    """A run directory recorded by `rightsize run` (samples/runs), or a hand-made one."""
    recorded = SAMPLES / "runs" / "train_compute-cpu"
    if (recorded / "manifest.json").is_file():
        return recorded
    return hostile_run(tmp_path / "handmade", "aten::mm", "ampere_sgemm_128x64_nn", "train.py")


def test_sample_run_report(browser, tmp_path):
    run_dir = sample_run(tmp_path)
    out = tmp_path / "report.html"
    res = rightsize("report", run_dir, "-o", out)
    assert res.returncode == 0, res.stderr
    shot = tmp_path / "sample-run.png"
    page = Page(browser, out, shot)
    check_clean(page, shot)
    assert page.page.locator("#headline").is_visible()
    canvases = page.painted_canvases()
    assert canvases and all(n > 100 for n in canvases.values()), canvases
    assert page.page.get_attribute("body", "data-charts") == str(len(canvases))


def test_shared_trace_report(browser, tmp_path):
    trace = shared_path(
        "traces",
        "kineto",
        "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz",
    )
    res = rightsize("report", trace, "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    shot = tmp_path / "resnet.png"
    page = Page(browser, tmp_path / (trace.name.removesuffix(".json.gz") + ".rightsize.html"), shot)
    check_clean(page, shot)
    canvases = page.painted_canvases()
    assert canvases.get("chart-breakdown", 0) > 1000, canvases
    assert page.page.locator("#kernels tbody tr").count() == 15
    assert "Tesla V100" in page.page.inner_text("header")


def test_full_document_charts(browser, tmp_path):
    """Every chart draws when the analysis has diagnosis, sizing and a timeline."""

    from rightsize.reports.render import write_report
    from tests.report_docs import real_doc, typed, with_everything

    out = write_report(typed(with_everything(real_doc("train_compute-cpu"))),
                       tmp_path / "full.html")
    shot = tmp_path / "full.png"
    page = Page(browser, out, shot)
    check_clean(page, shot)
    canvases = page.painted_canvases()
    assert set(canvases) == {"chart-shares", "chart-breakdown", "chart-steps", "chart-timeline",
                             "chart-host", "chart-sizing"}
    assert all(n > 500 for n in canvases.values()), canvases


def hostile_run(run_dir: Path, op: str, kernel: str, script: str) -> Path:
    """A run directory whose trace and command line carry the given names."""
    from rightsize.rundir import create_run_dir, write_manifest

    create_run_dir(run_dir)
    b = TraceBuilder(base_ns=BASE_NS)
    for n, t0 in enumerate((1000.0, 2000.0, 3000.0), start=1):
        b.step(n, t0, 1000.0)
        b.op(op, t0 + 100, 300.0, ext=n)
        b.launch("cudaLaunchKernel", t0 + 110, 10.0, corr=10 + n, ext=n)
        b.kernel(kernel, t0 + 150, 500.0, corr=10 + n, ext=n, blocks=1.0, occ=40)
    b.write(run_dir / "traces" / "rank0.pid1.pt.trace.json.gz", gz=True)
    write_manifest(
        run_dir,
        {
            "tool": {"name": "rightsize"},
            "status": "done",
            "command": {"kind": "script", "argv": ["python", script, "<b>bold</b>"]},
            "collectors": {"nvml": {"status": "missing", "reason": "no driver <i>here</i>"}},
        },
    )
    return run_dir


def test_hostile_names_render_as_text(browser, tmp_path):
    run_dir = hostile_run(tmp_path / "run", f"aten::{PAYLOAD}", f"kernel{PAYLOAD}", "<b>x.py")
    res = rightsize("report", run_dir, "-q")
    assert res.returncode == 0, res.stderr
    html = (run_dir / "report.html").read_text()
    assert PAYLOAD not in html and "<b>bold" not in html  # escaped in the source...
    shot = tmp_path / "hostile.png"
    page = Page(browser, run_dir / "report.html", shot)
    check_clean(page, shot)
    p = page.page
    # ...and in the DOM: no element was made from the names, the text is intact.
    assert p.evaluate("document.images.length") == 0
    assert p.evaluate("document.querySelectorAll('h1 *, td.name *, dd *').length") == 0
    assert p.locator("h1").inner_text() == "rightsize: python <b>x.py <b>bold</b>"
    assert p.locator("#kernels td.name").first.text_content() == f"kernel{PAYLOAD}"
    assert p.locator("#ops td.name").first.text_content() == f"aten::{PAYLOAD}"
    assert "no driver <i>here</i>" in p.locator("#provenance").inner_text()
    assert p.evaluate("document.scripts.length") == 2  # Chart.js and ours, nothing injected
    assert page.painted_canvases().get("chart-breakdown", 0) > 100


def test_prints_to_pdf_offline(browser, tmp_path):
    """Printing (what ``Save as PDF`` uses) works offline: the PDF is made, nothing fetched."""
    run_dir = sample_run(tmp_path)
    out = tmp_path / "r.html"
    assert rightsize("report", run_dir, "-o", out, "-q").returncode == 0
    page = Page(browser, out, tmp_path / "print.png")
    pdf = page.page.pdf(path=str(tmp_path / "report.pdf"))
    assert len(pdf) > 10_000 and page.network() == []
