"""The HTTP API against a real uvicorn server on loopback (docs/serve.md)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import socket
from pathlib import Path

from tests.conftest import shared_path
from tests.serve.serving import Server

KINETO = ("traces", "kineto", "hta-trace_filter-sampled_rank-0.json.gz")
NSYS = ("traces", "nsys", "fuser-8fa9ec2-h100-report1.sqlite")
HOSTILE = '../../etc/<img src=x onerror=alert(1)>"x\x07.json'


def blobs(server: Server) -> list[Path]:
    return sorted(p for p in (server.data_dir / "blobs").rglob("*") if p.is_file())


def test_healthz(server: Server) -> None:
    reply = server.request("GET", "/healthz")
    assert (reply.status, reply.json()) == (200, {"status": "ok"})


def test_upload_kineto_trace_then_poll_report_and_dedup(server: Server) -> None:
    path = shared_path(*KINETO)
    data = path.read_bytes()
    reply = server.upload((path.name, data))
    assert reply.status == 201
    created = reply.json()
    assert created["url"] == f"/r/{created['id']}" and created["existing"] is False
    run = server.wait(created["id"])
    assert run["status"] == "done", run["error"]
    assert run["error"] is None
    assert run["files"] == [{"name": path.name, "sha256": hashlib.sha256(data).hexdigest(),
                             "bytes": len(data)}]
    doc = run["analysis"]
    assert doc["schema_version"] == 1
    assert [i["path"] for i in doc["inputs"]] == [path.name]  # the upload's name, not a blob
    assert run["verdict"] == doc["diagnosis"]["bound"]
    assert run["step_ms"] == doc["steps"]["mean_ms"]
    stored = json.loads((server.data_dir / "runs" / created["id"] / "analysis.json").read_text())
    assert stored == doc

    page = server.request("GET", created["url"])
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert path.name in page.text

    listing = server.request("GET", "/api/runs").json()["runs"]
    assert created["id"] in [r["id"] for r in listing]
    runs_page = server.request("GET", "/runs?q=trace_filter")
    assert runs_page.status == 200 and created["id"] in runs_page.text

    # the same file again: one stored blob, one analysis, the same run; an upload of its own
    n_blobs = len(blobs(server))
    again = server.upload(("renamed.json.gz", data))
    assert (again.status, again.json()["run"], again.json()["existing"]) == \
        (200, created["id"], True)
    assert again.json()["id"] != created["id"]
    assert len(blobs(server)) == n_blobs
    mine = server.request("GET", f"/api/runs/{again.json()['id']}").json()
    assert mine["files"][0]["name"] == "renamed.json.gz" and mine["analysis"] == doc


def test_upload_nsys_export_and_compare(server: Server) -> None:
    kineto = server.upload((KINETO[-1], shared_path(*KINETO).read_bytes())).json()["id"]
    path = shared_path(*NSYS)
    reply = server.upload((path.name, path.read_bytes()))
    assert reply.status == 201
    run = server.wait(reply.json()["id"])
    assert run["status"] == "done", run["error"]
    assert run["analysis"]["inputs"][0]["format"] == "nsys"
    assert run["device"] == "NVIDIA H100 80GB HBM3"

    page = server.request("GET", f"/compare?a={kineto}&b={run['id']}")
    assert page.status == 200
    for text in ("Step time (mean)", "Share: compute", "Verdict", path.name):
        assert text in page.text
    picker = server.request("GET", "/compare")
    assert picker.status == 200 and run["id"] in picker.text
    assert server.request("GET", "/compare?a=0000000000000000&b=nothing").status == 404


def test_over_the_cap_is_413_and_leaves_no_partial_file(server: Server) -> None:
    before = blobs(server)
    reply = server.upload(("big.json", b"[" + b" " * (5 * 1024 * 1024) + b"]"))
    assert reply.status == 413
    assert "4 MiB upload cap" in reply.json()["error"]
    assert list((server.data_dir / "tmp").iterdir()) == []
    assert blobs(server) == before


def test_gzip_bomb_is_refused(server: Server) -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)  # 64 MiB in ~64 KiB
    assert len(bomb) < 4 * 1024 * 1024
    before = blobs(server)
    reply = server.upload(("bomb.json.gz", bomb))
    assert reply.status == 413
    assert "decompresses to more than the 4 MiB cap" in reply.json()["error"]
    assert list((server.data_dir / "tmp").iterdir()) == []
    assert blobs(server) == before


def test_hostile_file_name_is_text_never_a_path(server: Server) -> None:
    reply = server.upload((HOSTILE, b'{"not": "a trace"}'))
    assert reply.status == 201
    run = server.wait(reply.json()["id"])
    shown = '<img src=x onerror=alert(1)>"x.json'  # last component, control character dropped
    assert run["files"][0]["name"] == shown
    assert run["status"] == "failed"
    assert run["error"].startswith(shown) and "\n" not in run["error"]
    assert not (server.data_dir.parent / "etc").exists()
    page = server.request("GET", "/runs").text
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;&#34;x.json" in page


def test_delete_run_removes_it_and_its_unshared_blob(server: Server) -> None:
    data = b'{"traceEvents": []}  '
    run_id = server.upload(("empty.json", data)).json()["id"]
    server.wait(run_id)
    blob = server.data_dir / "blobs" / hashlib.sha256(data).hexdigest()[:2] / \
        hashlib.sha256(data).hexdigest()
    assert blob.exists()
    assert server.request("DELETE", f"/api/runs/{run_id}").status == 204
    assert server.request("GET", f"/api/runs/{run_id}").status == 404
    assert not blob.exists() and not (server.data_dir / "runs" / run_id).exists()


def test_bad_requests_are_one_line_json(server: Server) -> None:
    reply = server.request("POST", "/api/runs", b"{}", {"Content-Type": "application/json"})
    assert reply.status == 415 and "multipart/form-data" in reply.json()["error"]
    body = b"--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--b--\r\n"
    reply = server.request("POST", "/api/runs", body,
                           {"Content-Type": "multipart/form-data; boundary=b"})
    assert (reply.status, reply.json()) == (400, {"error": "no 'file' field with a file in "
                                                           "the upload"})
    assert server.request("GET", "/api/runs/../../etc").status == 404
    assert server.request("GET", "/r/zzzz").status == 404


def test_cross_site_post_and_foreign_host_are_refused(server: Server) -> None:
    reply = server.upload(("a.json", b"{}"), headers={"Origin": "http://evil.example"})
    assert (reply.status, reply.json()["error"]) == (403, "cross-site request refused")
    reply = server.upload(("a.json", b"{}"), headers={"Sec-Fetch-Site": "cross-site"})
    assert reply.status == 403
    reply = server.request("GET", "/api/runs", headers={"Host": "rebound.example:80"})
    assert reply.status == 421


def test_trace_with_its_ncu_csv_in_one_upload(server: Server) -> None:
    nsys = shared_path("traces", "nsys", "extrap-concurrent_example-concurrent.s1-profile1.sqlite")
    ncu = shared_path("traces", "ncu", "llmperfopt-dsocr-kernel_0016-gemm-ncu.details.csv")
    reply = server.upload((nsys.name, nsys.read_bytes()), (ncu.name, ncu.read_bytes()))
    assert reply.status == 201
    run = server.wait(reply.json()["id"])
    assert run["status"] == "done", run["error"]
    assert [f["name"] for f in run["files"]] == [nsys.name, ncu.name]
    assert [(i["path"], i["format"]) for i in run["analysis"]["inputs"]] == \
        [(nsys.name, "nsys"), (ncu.name, "ncu")]


def test_413_comes_before_the_body_is_sent(server: Server) -> None:
    """The cap is enforced while streaming: the answer arrives with most of the body unsent."""
    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"big.json\"\r\n\r\n").encode()
    declared = 20 * 1024 * 1024  # under the early Content-Length refusal (8 files x 4 MiB)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall((f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                      f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                      f"Content-Length: {declared}\r\n\r\n").encode() + head)
        sent = len(head)
        while sent < 5 * 1024 * 1024:  # a little past the 4 MiB cap, then stop sending
            sock.sendall(b" " * 65536)
            sent += 65536
        answer = sock.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 413 ")
    assert sent < declared / 3
    assert list((server.data_dir / "tmp").iterdir()) == []


def test_content_length_past_every_cap_is_refused_unread(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall((f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                      "Content-Type: multipart/form-data; boundary=x\r\n"
                      f"Content-Length: {10**12}\r\n\r\n").encode())
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
            if answer.endswith(b"}"):
                break
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(b'{"error":"the upload is larger than the server\'s cap"}')


def test_runs_are_paged_newest_first(server: Server) -> None:
    """Issue 29, 12: only the newest 500 runs could be listed."""
    for i in range(5):
        server.upload((f"page-{i}.json", b'{"traceEvents": []}' + b" " * i))
    seen: list[str] = []
    url: str | None = "/api/runs?q=page-&limit=2"
    while url is not None:
        page = server.request("GET", url).json()
        assert len(page["runs"]) <= 2
        seen += [r["files"][0]["name"] for r in page["runs"]]
        url = page["next"]
    assert seen == [f"page-{i}.json" for i in reversed(range(5))]
    html = server.request("GET", "/runs?q=page-&limit=2").text
    assert 'rel="next"' in html and "Older runs" in html
    assert server.request("GET", "/api/runs?limit=0").status == 400
    assert server.request("GET", "/api/runs?before=x").status == 400


def test_compare_picker_defaults_to_two_different_runs(server: Server) -> None:
    done = [server.wait(server.upload((p[-1], shared_path(*p).read_bytes())).json()["id"])
            for p in (KINETO, NSYS)]
    assert all(r["status"] == "done" for r in done)
    html = server.request("GET", "/compare").text
    picked = re.findall(r'<option value="([0-9a-f]{16})" selected>', html)
    assert len(picked) == 2 and picked[0] != picked[1]  # A, then B (the newest)


def test_a_served_report_is_sandboxed_and_has_a_way_back(server: Server) -> None:
    run = server.wait(server.upload((KINETO[-1], shared_path(*KINETO).read_bytes())).json()["id"])
    page = server.request("GET", f"/r/{run['id']}")
    assert page.headers["content-security-policy"].startswith("sandbox allow-scripts;")
    assert '<a href="/runs">&larr; Runs</a>' in page.text
    assert page.text.index('id="rightsize-serve-nav"') > page.text.index("<body")
    folder = server.data_dir / "runs" / run["run"]
    assert sorted(p.name for p in folder.iterdir()) == ["analysis.json", "report.html",
                                                         "summary.json"]
    assert (server.data_dir / "cache").is_dir()  # caches beside the data, not in ~/.cache


def test_a_run_without_a_trace_has_an_unknown_device_not_cpu(server: Server) -> None:
    ncu = shared_path("traces", "ncu", "llmperfopt-dsocr-kernel_0016-gemm-ncu.details.csv")
    run = server.wait(server.upload((ncu.name, ncu.read_bytes())).json()["id"])
    assert run["status"] == "done", run["error"]
    assert run["device"] is None
