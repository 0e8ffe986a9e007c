"""Jobs followed over time by a real ``rightsize serve`` (docs/serve.md, "Jobs"): captures
uploaded as ``rightsize run --on-demand --upload`` sends them (``?job=NAME&capture=...``),
``/jobs/NAME`` with each capture against the previous one, a regression posted to
``--webhook`` (a real HTTP receiver on 127.0.0.1), the job's latest capture as its row of
``/fleet`` with the history kept in the table, one entity with the metrics rows of the
Kubernetes workload it names."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import polars as pl
import pytest

from rightsize.fleet.table import FleetTable
from rightsize.serve.following import job_labels
from rightsize.serve.webhook import Webhook
from tests.conftest import cli
from tests.fleet.jobs import trace
from tests.serve.serving import Server
from tests.serve.test_serve_fleet import jobs_listed


class Receiver:
    """A webhook receiver on 127.0.0.1: answers each POST with the next of ``statuses``
    (then 200) and keeps what it was sent."""

    def __init__(self, statuses: tuple[int, ...] = ()) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.statuses = list(statuses)
        received = threading.Event()
        self.received = received
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append(json.loads(body))
                outer.headers.append(dict(self.headers))
                self.send_response(outer.statuses.pop(0) if outer.statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                received.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook?from=rightsize"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def upload_capture(server: Server, name: str, doc: dict[str, Any], **labels: Any) -> str:
    query = urlencode({"job": "trainer", "namespace": "ml", "workload": "small", "ranks": 1,
                       **labels})
    reply = server.upload((name, json.dumps(doc).encode()), path=f"/api/runs?{query}")
    assert reply.status == 201, reply.text
    run = server.wait(reply.json()["id"])
    assert run["status"] == "done", run
    return str(run["id"])


def test_a_jobs_captures_over_time_a_regression_posted_and_one_fleet_entity(
        tmp_path: Path, receiver: Receiver) -> None:
    from tests.fleet_metrics.gen import response, scenarios

    saved = tmp_path / "dcgm.json"
    saved.write_bytes(response(scenarios()))
    res = cli("fleet", "metrics", "--from", saved, "--table", tmp_path / "data" / "fleet", "-q")
    assert res.returncode == 0, res.stderr
    server = Server(tmp_path / "data", ("--webhook", receiver.url)).start()
    try:
        ids = [upload_capture(server, "c1.pt.trace.json", trace(day=0), capture="c1",
                              reason="steady", job_step_ms=100)]
        # 1.5 times slower: the job's own step 100 -> 150 ms, +50% > 10%: a regression
        ids.append(upload_capture(server, "c2.pt.trace.json", trace(day=1, scale=1.5),
                                  capture="c2", reason="drift", job_step_ms=150))
        assert receiver.received.wait(30), server.log.read_text()
        hook = receiver.bodies[0]
        assert receiver.headers[0]["Content-Type"] == "application/json"
        attribution = hook.pop("attribution")
        assert hook == {
            "event": "regression", "job": "trainer", "capture": "c2", "upload": ids[1],
            "run": ids[1], "previous": {"upload": ids[0], "capture": "c1"},
            "basis": "job_step_ms", "step_ms": [100.0, 150.0], "change_pct": 50.0,
            "threshold_pct": 10.0, "verdict": hook["verdict"],
            "job_url": f"{server.url}/jobs/trainer", "report_url": f"{server.url}/r/{ids[1]}"}
        assert hook["verdict"]  # the capture's bound, as its report says
        # compare's top changes: every item of the step, 1.5 times longer, each slower
        assert attribution and all(a["b_ms"] > a["a_ms"] for a in attribution
                                   if a.get("kind") != "share")
        # +2%: no regression, nothing posted
        ids.append(upload_capture(server, "c3.pt.trace.json", trace(day=2, scale=1.5, tag="3"),
                                  capture="c3", reason="every", job_step_ms=153))
        history = server.wait_for(
            lambda: (h := server.request("GET", "/api/jobs/trainer").json()["captures"])
            and len(h) == 3 and h[2]["flagged"] is not None and h, why="the third check")
        assert [c["id"] for c in history] == ids
        assert [c["capture"] for c in history] == ["c1", "c2", "c3"]
        assert [c["flagged"] for c in history] == [False, True, False]
        assert [c["change_pct"] for c in history] == [None, 50.0, 2.0]
        assert [c["previous"] for c in history] == [None, ids[0], ids[1]]
        assert [c["webhook"] for c in history] == [None, "sent", None]
        assert [c["job_step_ms"] for c in history] == [100.0, 150.0, 153.0]
        assert [c["url"] for c in history] == [f"/r/{i}" for i in ids]
        steps = [c["summary"]["step_ms"] for c in history]  # the profiled mean, 1.5x
        assert steps[1] == pytest.approx(1.5 * steps[0], rel=1e-3) and steps[2] == steps[1]
        assert len(receiver.bodies) == 1

        page = server.request("GET", "/jobs/trainer")
        assert page.status == 200
        assert page.text.count('<tr data-id="') == 3
        assert "regression +50.0%" in page.text and "+2.0%" in page.text
        assert "webhook: sent" in page.text
        assert all(f'href="/r/{i}"' in page.text for i in ids)
        jobs = server.request("GET", "/jobs").text
        assert '<a href="/jobs/trainer">trainer</a>' in jobs
        assert server.request("GET", "/jobs/nobody").status == 404
        assert server.request("GET", "/api/jobs/nobody").json() == {"error": "no such job"}

        # /fleet: the job's latest capture is its row, and it is the entity of the metrics
        # workload ml/small (the upload named it): one row, not two
        assert sorted(jobs_listed(server.request("GET", "/fleet").text)) == [
            "ml/big", "ml/nosm", "ml/web", "trainer"]
        assert '<a class="job" href="/jobs/trainer">trainer</a>' in \
            server.request("GET", "/fleet").text  # to the job's page: every capture
        rows = FleetTable(tmp_path / "data" / "fleet").rows().collect()
        captures = rows.filter(pl.col("entity") == "workload:ml/small").sort("recorded_at")
        assert captures["job"].to_list() == ["trainer"] * 3  # the history stays
        assert rows.filter(pl.col("job") == "ml/small").height == 1  # and the metrics row

        bad = server.upload(("x.json", b"{}"), path="/api/runs?job=trainer&reason=bored")
        assert (bad.status, bad.json()) == (
            400, {"error": "reason must be one of trigger, steady, every, drift"})
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_job_labels_are_checked() -> None:
    assert job_labels({}) == {}
    assert job_labels({"capture": "c1"}) == "capture needs job"
    assert job_labels({"job": "j", "ranks": "0"}) == "ranks must be a whole number from 1 to 100000"
    assert job_labels({"job": "j", "job_step_ms": "nan"}) == "job_step_ms must be a positive number"
    assert job_labels({"job": "j", "capture": "../x"}) == (
        "capture must be letters, digits, '.', '_' or '-' (at most 64)")
    assert job_labels({"job": "j", "ranks": "2", "job_step_ms": "41.5", "workload": "w"}) == {
        "job": "j", "capture": None, "reason": None, "ranks": 2, "job_step_ms": 41.5,
        "namespace": None, "workload": "w", "pod": None}


def test_the_webhook_retries_a_5xx_and_gives_up_on_a_4xx() -> None:
    outcomes: dict[str, str] = {}
    done = threading.Event()

    def record(upload_id: str, outcome: str) -> None:
        outcomes[upload_id] = outcome
        if len(outcomes) == 2:
            done.set()

    receiver = Receiver(statuses=(503, 200, 404))
    hook = Webhook(receiver.url, record)
    try:
        hook.post("a", {"event": "regression", "job": "j"})
        hook.post("b", {"event": "regression", "job": "k"})
        assert done.wait(15)
    finally:
        hook.close()
        receiver.close()
    # a: 503 then 200 after 1 s; b: 404 is final, tried once
    assert outcomes == {"a": "sent", "b": "failed: HTTP 404"}
    assert [b["job"] for b in receiver.bodies] == ["j", "j", "k"]


def test_a_webhook_that_is_no_http_url_is_one_line(tmp_path: Path) -> None:
    res = cli("serve", "--data-dir", tmp_path / "data", "--webhook", "ftp://hooks.example.org/x")
    assert res.returncode == 2
    assert "Invalid value for '--webhook': expected an http(s) URL, not " \
           "'ftp://hooks.example.org/x'" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "data").exists()


def test_job_pages_escape_what_uploads_named() -> None:
    from rightsize.serve.pages import render_page
    from rightsize.serve.regression import capture_summary

    evil = "</script><b>x"
    capture = {"id": "a" * 16, "created_at": 0.0, "capture": "c1", "reason": "trigger",
               "job_step_ms": 10.0, "status": "failed", "error": evil, "flagged": None,
               "change_pct": None, "previous": None, "attribution": None, "webhook": None,
               "summary": capture_summary({}), "url": "/runs/" + "a" * 16}
    for page in (render_page("job.html.j2", job=evil, captures=[capture], threshold_pct="10"),
                 render_page("jobs.html.j2", jobs=[{"job": evil, "captures": 1,
                                                    "latest_at": 0.0, "regressions": 0}])):
        assert evil not in page and "&lt;/script&gt;&lt;b&gt;x" in page
