"""The fleet view of a real ``rightsize serve`` (docs/serve.md, "Fleet"): each finished upload
is a row of the data directory's fleet table (schema v1, the row ``fleet scan`` makes of the
same file), written once per content key across restarts, caught up at start-up for an index
from before the table; ``/fleet`` is the fleet report behind the same gate and headers."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sqlite3
from pathlib import Path
from urllib.parse import quote

import polars as pl
import pytest

from rightsize.fleet.discover import file_job
from rightsize.fleet.keys import FileCache, content_key, job_key
from rightsize.fleet.table import FleetTable
from rightsize.serve.fleet import build_row, run_kind
from rightsize.serve.pages import PageError, fleet_csp
from tests.conftest import cli
from tests.fleet.jobs import A100, trace, write
from tests.serve.serving import Server, free_port

HOSTILE = '<img src=x onerror=alert(1)>.json'
# every column the document gives a row: these must equal fleet scan's row of the same file
DOCUMENT_COLUMNS = ("device", "gpu", "gpu_reported", "gpus", "nodes", "steps", "step_ms",
                    "bound", "confidence", "compute_pct", "memory_pct", "pcie_pct",
                    "dataloader_pct", "communication_pct", "host_pct", "idle_pct",
                    "gpu_util_pct", "sm_efficiency_pct", "peak_memory_bytes", "precision",
                    "sizing_verdict", "recommended_gpu", "recommended_gpus", "sizing_reason",
                    "objective", "savings_pct", "usd_per_gpu_hour", "usd_per_1k_steps",
                    "recommended_step_ms", "recommended_usd_per_1k_steps", "rules")


def table_rows(server: Server) -> pl.DataFrame:
    """Every row file's rows as stored (a key written twice would show twice)."""
    return FleetTable(server.data_dir / "fleet").raw().collect().sort("job")


def jobs_listed(html: str) -> list[str]:
    body = html[html.index('id="jobs-table"'):]
    body = body[: body.index("</table>")]
    return re.findall(r'<td class="name">(?:<a class="job" href="[^"]*">)?([^<]*)', body)


@pytest.fixture()
def traces(tmp_path: Path) -> dict[str, Path]:
    return {"h100": write(tmp_path / "in" / "h100.pt.trace.json", trace(day=0)),
            "a100": write(tmp_path / "in" / "a100.pt.trace.json", trace(day=1, gpu=A100))}


def test_uploads_are_rows_of_the_fleet_table_and_the_fleet_page(tmp_path: Path,
                                                              traces: dict[str, Path]) -> None:
    server = Server(tmp_path / "data").start()
    try:
        data = traces["h100"].read_bytes()
        created = server.upload(("h100.pt.trace.json", data),
                                path="/api/runs?team=vision&project=resnet").json()
        run = server.wait(created["id"])
        assert (run["status"], run["team"], run["project"]) == ("done", "vision", "resnet")
        bad = server.wait(server.upload((HOSTILE, b'{"x": 1}')).json()["id"])
        assert bad["status"] == "failed"

        # a run's row is written before the index says the run is finished
        df = table_rows(server)
        assert df["job"].to_list() == [HOSTILE, "h100.pt.trace.json"]
        ok = df.row(1, named=True)
        sha = hashlib.sha256(data).hexdigest()
        # the key fleet scan gives the same file, wherever it lies
        assert ok["key"] == content_key("file", [sha]) == job_key(
            file_job(traces["h100"]), FileCache())
        assert (ok["kind"], ok["paths"], ok["files"], ok["bytes"]) == \
            ("file", [f"{created['id']}/h100.pt.trace.json"], 1, len(data))
        assert (ok["status"], ok["reason"], ok["team"], ok["project"], ok["labels_source"]) == \
            ("ok", None, "vision", "resnet", "upload")
        assert (ok["recorded_at"].date().isoformat(), ok["recorded_at_source"]) == \
            ("2023-11-14", "trace")  # the trace's own wall clock (tests/tracebuilder.py)
        assert ok["analysis_s"] == run["analysis_s"]
        stored = json.loads(gzip.decompress(
            (server.data_dir / "fleet" / ok["document"]).read_bytes()))
        assert stored == run["analysis"]
        assert ok["document"] == f"documents/{ok['key'][:2]}/{ok['key']}.json.gz"
        failed = df.row(0, named=True)
        assert (failed["status"], failed["reason"], failed["document"]) == \
            ("bad-input", bad["error"], None)
        assert failed["recorded_at_source"] == "upload"

        # the same row as fleet scan's, column for column, from the same document
        res = cli("fleet", "scan", traces["h100"], "--table", tmp_path / "scan", "--workers", "1")
        assert res.returncode == 0, res.stderr
        scanned = FleetTable(tmp_path / "scan").rows().collect().row(0, named=True)
        assert scanned["key"] == ok["key"]
        assert {c: ok[c] for c in DOCUMENT_COLUMNS} == {c: scanned[c] for c in DOCUMENT_COLUMNS}
        assert ok["gpu"] == "H100 SXM" and ok["step_ms"] == 1.0

        # the same files again: the same run, no second row
        renamed = server.upload(("renamed.json", data)).json()
        assert renamed["existing"] is True and renamed["run"] == run["id"]
        assert table_rows(server).height == 2

        page = server.request("GET", "/fleet")
        assert page.status == 200 and page.headers["content-type"].startswith("text/html")
        assert (page.headers["x-content-type-options"], page.headers["referrer-policy"],
                page.headers["cache-control"]) == ("nosniff", "no-referrer", "no-store")
        assert page.headers["content-security-policy"] == fleet_csp(page.text)
        assert re.fullmatch(r"default-src 'none'; script-src 'sha256-[A-Za-z0-9+/=]{44}' "
                            r"'sha256-[A-Za-z0-9+/=]{44}'; style-src 'unsafe-inline'; "
                            r"img-src data:; form-action 'self'; frame-ancestors 'none'; "
                            r"base-uri 'none'", page.headers["content-security-policy"])
        assert jobs_listed(page.text) == ["&lt;img src=x onerror=alert(1)&gt;.json",
                                          "h100.pt.trace.json"]
        assert f'<a class="job" href="/r/{run["id"]}">h100.pt.trace.json</a>' in page.text
        assert f'href="/runs/{bad["id"]}"' in page.text  # a failed run: its status page
        assert "<img src=x" not in page.text
        assert "uploads to this server" in page.text and str(server.data_dir) not in page.text

        # filters: labels and recorded days, repeated or comma-separated
        assert jobs_listed(server.request("GET", "/fleet?team=vision").text) == \
            ["h100.pt.trace.json"]
        assert jobs_listed(server.request("GET", "/fleet?team=nlp,vision&project=x").text) == []
        assert jobs_listed(server.request("GET", "/fleet?since=2023-11-15").text) == \
            ["&lt;img src=x onerror=alert(1)&gt;.json"]
        assert jobs_listed(server.request("GET", "/fleet?until=2023-11-14").text) == \
            ["h100.pt.trace.json"]
        hostile = server.request("GET", "/fleet?team=" + quote("</script><script>alert(1)"))
        assert hostile.status == 200 and jobs_listed(hostile.text) == []
        assert hostile.text.count("<script>") == 2  # the template's own, nothing reflected
        assert 'value="&lt;/script&gt;&lt;script&gt;alert(1)"' in hostile.text
        for query, error in (("since=11/14/2023", ("since must be a day, YYYY-MM-DD, from "
                                                   "1970-01-02 to 9999-12-30 (e.g. "
                                                   "since=2026-01-31)")),
                             ("since=2023-11-15&until=2023-11-14", "since is after until")):
            reply = server.request("GET", f"/fleet?{query}")
            assert (reply.status, reply.json()) == (400, {"error": error})

        # labels are checked; a deleted run's row leaves the page and its document goes
        for label in ("x" * 101, "a\x07b"):
            reply = server.upload(("t.json", b"{}"), path=f"/api/runs?team={quote(label)}")
            assert (reply.status, reply.json()) == \
                (400, {"error": "team must be at most 100 printable characters"})
        assert server.request("DELETE", f"/api/runs/{run['id']}").status == 204
        assert (server.data_dir / "fleet" / ok["document"]).exists()  # the run has an upload
        assert server.request("DELETE", f"/api/runs/{renamed['id']}").status == 204
        assert not (server.data_dir / "fleet" / ok["document"]).exists()
        assert jobs_listed(server.request("GET", "/fleet").text) == \
            ["&lt;img src=x onerror=alert(1)&gt;.json"]
        assert table_rows(server).height == 2  # the table keeps its history
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_rows_survive_restarts_once_and_an_older_index_is_caught_up(
        tmp_path: Path, traces: dict[str, Path]) -> None:
    first = Server(tmp_path / "data").start()
    try:
        ids = [first.wait(first.upload((p.name, p.read_bytes())).json()["id"])["id"]
               for p in traces.values()]
        before = table_rows(first)
        # one writer: a second server on the data directory, or a scan into its table
        for command in (("serve", "--data-dir", tmp_path / "data", "--port", free_port()),
                        ("fleet", "scan", *traces.values(), "--table",
                         tmp_path / "data" / "fleet")):
            res = cli(*command)
            assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
            assert f"another scan (pid {first.proc.pid}) is writing this table" in res.stderr
    finally:
        first.stop()
    assert before.height == 2 and before["status"].to_list() == ["ok", "ok"]

    second = Server(tmp_path / "data").start()
    try:
        assert second.request("GET", "/fleet").status == 200
        assert table_rows(second).equals(before)  # no row written again
    finally:
        second.stop()

    # an index and data directory from before the fleet table: no fleet_key column, no fleet/
    db = sqlite3.connect(tmp_path / "data" / "runs.sqlite")
    with db:
        for column in ("fleet_key", "team", "project", "recorded_at"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    db.close()
    for path in sorted((tmp_path / "data" / "fleet").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (tmp_path / "data" / "fleet").rmdir()

    third = Server(tmp_path / "data").start()
    try:
        third.wait_for(lambda: table_rows(third).height == 2, 30,
                       why="the start-up catch-up of two finished runs")
        page = third.request("GET", "/fleet").text
        for run_id in ids:
            assert f'href="/r/{run_id}"' in page
        assert "2 finished runs added to the fleet table" in third.log.read_text()
    finally:
        third.stop()
    # the same rows from the stored analyses as from the finished runs, but for the recorded
    # time: these traces' clock is a base time past their head, which only the analysis saw
    caught = table_rows(third)
    assert caught["recorded_at_source"].to_list() == ["upload", "upload"]
    moved = ["scanned_at", "recorded_at", "recorded_at_source"]
    assert caught.drop(moved).equals(before.drop(moved))

    fourth = Server(tmp_path / "data").start()
    try:
        assert fourth.request("GET", "/fleet").status == 200
        assert table_rows(fourth).height == 2
    finally:
        fourth.stop()


def test_row_units(tmp_path: Path) -> None:
    run = {"id": "00000000000000aa", "created_at": 1_700_000_000.0, "finished_at": None,
           "analysis_s": None, "files": [{"name": "a.json", "sha256": "ab" * 32, "bytes": 3}]}
    for error, status in (("a.json: no traceEvents array", "bad-input"),
                          ("internal error: KeyError: 'x'", "failed"),
                          ("the analysis worker died (killed by SIGKILL: ...)", "failed"),
                          ("out of memory in the analysis worker (see --worker-memory-mb)",
                           "failed")):
        row = build_row(run, None, error, tmp_path)
        assert (row["status"], row["reason"], row["kind"]) == (status, error, "file")
        assert (row["recorded_at"].timestamp(), row["recorded_at_source"]) == \
            (1_700_000_000.0, "upload")  # no blob to read a clock from
    two = [{"sha256": "ab" * 32}, {"sha256": "cd" * 32}]
    ranks = {"job": {"world_size": 2},  # traces: their entries say their ranks
             "inputs": [{"format": "kineto", "rank": 0}, {"format": "kineto", "rank": 1}]}
    assert run_kind(two, ranks) == "ranks"
    with_log = {"job": {"world_size": 2}, "inputs": [*ranks["inputs"], {"samples": 9}]}
    assert run_kind(two + two[:1], with_log) == "upload"
    assert run_kind(two, {"inputs": [{"format": "nsys"}, {"format": "ncu"}]}) == "upload"
    assert run_kind(two, None) == "upload"


def test_the_fleet_policy_hashes_only_the_templates_two_scripts() -> None:
    page = "<body><script>var a = 1;\r\n</script><p>x</p><script>b()</script></body>"
    csp = fleet_csp(page)
    # the browser hashes the text after newline normalization: "var a = 1;\n"
    assert "'sha256-" + __import__("base64").b64encode(
        hashlib.sha256(b"var a = 1;\n").digest()).decode() + "'" in csp
    assert "'unsafe-inline'" not in csp.split("; ")[1]
    for bad in (page.replace("<p>x</p>", "<script>evil()</script>"),
                page.replace("<p>x</p>", '<SCRIPT src="/x.js"></SCRIPT>'),
                "<body><script>only()</script></body>"):
        with pytest.raises(PageError):
            fleet_csp(bad)


def test_metrics_workloads_of_the_table_are_on_the_fleet_page(tmp_path: Path,
                                                              traces: dict[str, Path]) -> None:
    """Workloads ``fleet metrics --table DATA/fleet`` wrote (the server stopped: one writer)
    are listed beside the uploads, filtered by ``source``; a version-1 table is migrated at
    start-up; while the server runs, ``--table`` is one line."""
    from tests.fleet_metrics.gen import response, scenarios

    saved = tmp_path / "dcgm.json"
    saved.write_bytes(response(scenarios()))
    table = tmp_path / "data" / "fleet"
    res = cli("fleet", "metrics", "--from", saved, "--table", table, "-q")
    assert res.returncode == 0, res.stderr
    mark = table / "FLEET.json"
    mark.write_text(mark.read_text().replace('"schema_version": 2', '"schema_version": 1'))
    server = Server(tmp_path / "data").start()
    try:
        assert FleetTable(table).version() == 2  # the server, its writer, migrated it
        server.wait(server.upload(("h100.pt.trace.json", traces["h100"].read_bytes())).json()
                    ["id"])
        workloads = ["ml/big", "ml/nosm", "ml/small", "ml/web"]  # recorded 2026-01-08
        assert jobs_listed(server.request("GET", "/fleet").text) == [
            *workloads, "h100.pt.trace.json"]
        page = server.request("GET", "/fleet?source=metrics").text
        assert jobs_listed(page) == workloads
        assert '<option value="metrics" selected>' in page
        assert "1 x MIG 1g.10gb on A100 80GB SXM" in page
        assert jobs_listed(server.request("GET", "/fleet?source=trace").text) == [
            "h100.pt.trace.json"]
        reply = server.request("GET", "/fleet?source=logs")
        assert (reply.status, reply.json()) == (400, {"error": "source must be trace or metrics"})
        res = cli("fleet", "metrics", "--from", saved, "--table", table, "-q")
        assert res.returncode == 1 and res.stderr.count("\n") == 1
        assert f"another scan (pid {server.proc.pid}) is writing this table" in res.stderr
    finally:
        log = server.stop()
    assert "Traceback" not in log
