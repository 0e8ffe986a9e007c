"""The token rule, the limits (503 + Retry-After), restarts, and the CLI without its extra."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import time
from pathlib import Path

from rightsize.serve.config import resolve_token
from rightsize.serve.store import Store, blob_path
from tests.conftest import shared_path
from tests.serve.serving import Server

TRACE = ("traces", "kineto", "hta-cupti_profiler-benchmark_result_924719_1679055439_trace.json.gz")
OTHER = ("traces", "kineto", "hta-critical_path-alexnet-benchmark_result_2869224_1695835535_trace.json.gz")


def test_token_rule(tmp_path: Path) -> None:
    assert resolve_token("127.0.0.1", None) == (None, False)
    assert resolve_token("::1", None) == (None, False)
    assert resolve_token("127.0.0.1", "given") == ("given", False)
    token, generated = resolve_token("0.0.0.0", None)
    assert generated and token is not None and len(token) >= 32
    assert resolve_token("example.org", "t") == ("t", False)

    server = Server(tmp_path / "data", ("--token", "Zq8-xY2_pL5vR9tW", "--max-queued", "1",
                                        "--max-concurrent-uploads", "1")).start()
    try:
        assert "Authorization: Bearer Zq8-xY2_pL5vR9tW" in server.log.read_text()
        assert server.request("GET", "/healthz").status == 200
        for path in ("/", "/runs", "/api/runs", "/static/serve.js", "/compare", "/fleet"):
            assert server.request("GET", path).status == 401, path
        assert server.request("GET", "/api/runs",
                              headers={"Authorization": "Bearer wrong"}).status == 401
        assert server.upload(("t.json", b"{}")).status == 401
        assert server.request("GET", "/?token=wrong").status == 401

        login = server.request("GET", "/?token=Zq8-xY2_pL5vR9tW")
        assert login.status == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert cookie.startswith("rightsize_token=Zq8-xY2_pL5vR9tW;") and "HttpOnly" in cookie
        assert "SameSite=lax" in cookie and "Secure" not in cookie  # plain http here
        # issue 29, 11: a wrong token in the URL does not replace a valid cookie
        logged_in = {"Cookie": "rightsize_token=Zq8-xY2_pL5vR9tW"}
        garbage = server.request("GET", "/?token=garbage", headers=logged_in)
        assert garbage.status == 303 and "set-cookie" not in garbage.headers
        page = server.request("GET", "/runs", headers=logged_in)
        assert page.status == 200
        assert (page.headers["x-content-type-options"], page.headers["referrer-policy"],
                page.headers["cache-control"]) == ("nosniff", "no-referrer", "no-store")
        assert server.request("GET", "/runs",
                              headers=logged_in).status == 200

        server.headers = {"Authorization": "Bearer Zq8-xY2_pL5vR9tW"}
        assert server.request("GET", "/api/runs").json() == {"runs": [], "next": None}
        # --max-queued 1: a second analysis while the first is queued or running waits
        first = server.upload((TRACE[-1], shared_path(*TRACE).read_bytes()))
        assert first.status == 201
        busy = server.upload((OTHER[-1], shared_path(*OTHER).read_bytes()))
        assert busy.status == 503 and busy.headers["retry-after"] == "5"
        assert "queued or running" in busy.json()["error"]
        assert server.wait(first.json()["id"])["status"] == "done"
        # --max-concurrent-uploads 1: while one upload is being received, another waits
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as slow:
            slow.sendall((f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                          "Authorization: Bearer Zq8-xY2_pL5vR9tW\r\nContent-Length: 100000\r\n"
                          "Content-Type: multipart/form-data; boundary=b\r\n\r\n--b\r\n"
                          "Content-Disposition: form-data; name=\"file\"; filename=\"s\""
                          "\r\n\r\n{").encode())
            for _ in range(50):  # until the server has begun receiving it
                busy = server.upload(("t.json", b"{}"))
                if busy.status == 503:
                    break
                time.sleep(0.05)
            assert busy.status == 503 and busy.headers["retry-after"] == "5"
            assert busy.json()["error"] == "busy: 1 uploads are in progress; retry later"
    finally:
        server.stop()


def test_restart_keeps_runs(tmp_path: Path) -> None:
    data = shared_path(*TRACE).read_bytes()
    first = Server(tmp_path / "data").start()
    try:
        run_id = first.upload((TRACE[-1], data)).json()["id"]
        done = first.wait(run_id)
        assert done["status"] == "done"
    finally:
        first.stop()
    second = Server(tmp_path / "data").start()
    try:
        again = second.request("GET", f"/api/runs/{run_id}").json()
        assert again == done
        assert [r["id"] for r in second.request("GET", "/api/runs").json()["runs"]] == [run_id]
        assert second.request("GET", f"/r/{run_id}").status == 200
        copy = second.upload(("copy.json.gz", data)).json()
        assert copy == {"id": copy["id"], "run": run_id, "url": f"/r/{copy['id']}",
                        "existing": True}
    finally:
        second.stop()


def test_serve_without_its_extra_says_how_to_install_it() -> None:
    code = ("import sys\nsys.modules['uvicorn'] = None\nsys.modules['starlette'] = None\n"
            "from rightsize.cli import main\nmain(['serve'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 1
    expected = ("rightsize: error: rightsize serve needs its extra: "
                "pip install 'rightsize[serve]' (uvicorn is missing)")
    assert out.stderr.strip().splitlines() == [expected]


def test_a_worker_past_its_memory_limit_fails_the_run_in_one_line(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", ("--worker-memory-mb", "400")).start()
    try:
        big = ("traces", "kineto", "hta-df_index_resolver-df_index_resolver.json.gz")
        run = server.wait(server.upload((big[-1], shared_path(*big).read_bytes())).json()["id"])
        assert run["status"] == "failed"
        assert "memory" in run["error"] and "\n" not in run["error"]
        assert server.request("GET", "/healthz").status == 200  # the server itself is fine
    finally:
        server.stop()


def test_runs_left_queued_by_a_stopped_server_are_analyzed_at_start(tmp_path: Path) -> None:
    data = shared_path(*TRACE).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    blob = blob_path(tmp_path / "data" / "blobs", digest)
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    store = Store(tmp_path / "data" / "runs.sqlite")
    run_id = store.create([{"name": "left.json.gz", "sha256": digest, "bytes": len(data)}], "k")
    store.mark_running(run_id)  # as a server killed mid-analysis leaves it
    server = Server(tmp_path / "data").start()
    try:
        run = server.wait(run_id)
        assert run["status"] == "done" and run["analysis"]["inputs"][0]["path"] == "left.json.gz"
    finally:
        server.stop()


def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "rightsize", "serve", "--port", str(port),
                              "--data-dir", str(tmp_path)], capture_output=True, text=True,
                             timeout=60, check=False)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"rightsize: error: cannot listen on 127.0.0.1:{port}: Address already in use"]


def test_weak_tokens_are_refused_in_one_line(tmp_path: Path) -> None:
    for weak, why in (("a", "at least 16 characters"), (" ", "must not contain white space"),
                      ("aaaaaaaaaaaaaaaaaaaa", "6 different characters")):
        out = subprocess.run([sys.executable, "-m", "rightsize", "serve", "--data-dir",
                              str(tmp_path), "--token", weak], capture_output=True, text=True,
                             timeout=60, check=False)
        assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr
