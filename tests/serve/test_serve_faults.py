"""Issue 29's faults, with real processes killed and a real full disk: the server killed with
SIGKILL (its workers go with it; a partial upload is swept at the next start), one worker
killed (only its run fails), a restart after the results were written but not recorded
(adopted, not redone), and a small tmpfs filled by an upload and during an analysis."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path

import pytest

from rightsize.serve.store import Store
from rightsize.serve.worker import NO_SPACE_ERROR
from tests.serve.serving import Server, big_kineto, gone, raw

SMALL = big_kineto(steps=3, kernels=100)  # analyzed in well under a second


@pytest.fixture(scope="module")
def big() -> bytes:
    return big_kineto()


def _running(server: Server, run_id: str) -> bool:
    return bool(server.request("GET", f"/api/runs/{run_id}?analysis=0").json()["status"]
                == "running")


def test_kill_9_of_the_server_takes_its_workers_and_the_run_resumes(tmp_path: Path,
                                                                       big: bytes) -> None:
    """Issue 29, 3: the workers of a server killed with SIGKILL ran on as orphans."""
    server = Server(tmp_path / "data").start()
    run_id = server.upload(("big.json.gz", big)).json()["id"]
    server.wait_for(lambda: _running(server, run_id), why="the analysis started")
    workers = server.wait_for(server.workers, why="a worker process")
    pids = [w.pid for w in workers]
    server.kill()
    server.wait_for(lambda: all(gone(pid) for pid in pids), 10, why="the workers exited")
    again = Server(tmp_path / "data").start()
    try:
        run = again.wait(run_id, timeout_s=120)
        assert run["status"] == "done", run["error"]
        assert [r["id"] for r in again.request("GET", "/api/runs").json()["runs"]] == [run_id]
    finally:
        again.stop()


def test_killing_one_worker_fails_only_its_own_run(tmp_path: Path, big: bytes) -> None:
    """Issue 29, 4: one worker killed failed every running analysis."""
    server = Server(tmp_path / "data", ("--workers", "2")).start()
    try:
        other = big_kineto(steps=11)  # built before either upload: both must overlap
        ids = [server.upload(("a.json.gz", big)).json()["id"],
               server.upload(("b.json.gz", other)).json()["id"]]
        server.wait_for(lambda: all(_running(server, i) for i in ids), 30,
                        why="both analyses running")
        workers = server.wait_for(lambda: len(server.workers()) == 2 and server.workers(),
                                  why="two workers")
        os.kill(workers[0].pid, signal.SIGKILL)
        runs = [server.wait(i, timeout_s=120) for i in ids]
        statuses = sorted(r["status"] for r in runs)
        assert statuses == ["done", "failed"], [r["error"] for r in runs]
        failed = next(r for r in runs if r["status"] == "failed")
        assert failed["error"].startswith("the analysis worker died (killed by SIGKILL")
        # the pool goes on: a new upload gets a fresh worker
        more = server.upload(("c.json.gz", SMALL)).json()["id"]
        assert server.wait(more)["status"] in ("done", "failed")
    finally:
        server.stop()


def test_a_restart_adopts_results_written_but_not_recorded(tmp_path: Path) -> None:
    """Issue 29, 3: results the index never learned of were analyzed again on restart."""
    first = Server(tmp_path / "data").start()
    try:
        run_id = first.upload(("t.json.gz", SMALL)).json()["id"]
        done = first.wait(run_id)
    finally:
        first.stop()
    # what a server killed after its worker wrote both files, before it recorded them, leaves
    with sqlite3.connect(tmp_path / "data" / "runs.sqlite") as db:
        db.execute("UPDATE runs SET status = 'running', finished_at = NULL, verdict = NULL "
                   "WHERE id = ?", (run_id,))
    leftover = tmp_path / "data" / "runs" / run_id / ".report.html.tmp"
    leftover.write_text("half")
    second = Server(tmp_path / "data").start()
    try:
        run = second.request("GET", f"/api/runs/{run_id}").json()
        assert (run["status"], run["verdict"], run["device"]) == \
            ("done", done["verdict"], done["device"])
        assert run["analysis"] == done["analysis"]
        assert not leftover.exists()
        time.sleep(1)
        assert second.workers() == []  # adopted: no analysis started
    finally:
        second.stop()


def test_a_partial_upload_of_a_killed_server_is_swept_at_start(tmp_path: Path) -> None:
    """Issue 29, 6: tmp/*.part of a killed upload stayed for ever."""
    server = Server(tmp_path / "data").start()
    tmp = tmp_path / "data" / "tmp"
    head = (f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 50000000\r\n\r\n"
            '--b\r\nContent-Disposition: form-data; name="file"; filename="t.json"\r\n\r\n{')
    with raw(server.port, head.encode() + b" " * 1_000_000):
        server.wait_for(lambda: list(tmp.glob("*.part")), why="the upload's partial file")
        server.kill()
    assert len(list(tmp.glob("*.part"))) == 1
    again = Server(tmp_path / "data").start()
    try:
        assert list(tmp.iterdir()) == []
    finally:
        again.stop()


# -- a full disk: a real tmpfs ---------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs (needs root: mount). Skips where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)],
                          capture_output=True, text=True, timeout=30, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30,
                       check=False)


def _fill(disk: Path) -> Path:
    """Write a file until the disk is full (1 MiB, then 4 KiB pieces); the file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 20, 1 << 12):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    assert shutil.disk_usage(disk).free < 64 * 1024
    return filler


def _chunked_upload(port: int, name: str, data: bytes) -> tuple[int, dict[str, str]]:
    """An upload with no Content-Length (chunked), so no early free-space check sees it."""
    import json

    boundary = uuid.uuid4().hex

    def body() -> Iterator[bytes]:
        yield (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
               f'filename="{name}"\r\n\r\n').encode()
        for i in range(0, len(data), 1 << 20):
            yield data[i:i + (1 << 20)]
        yield f"\r\n--{boundary}--\r\n".encode()

    conn = HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/api/runs", body=body(), encode_chunked=True,
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    except (BrokenPipeError, ConnectionResetError):
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def test_an_upload_larger_than_the_free_space_is_507(small_disk: Path) -> None:
    """Issue 29, 5: a plain-text 500 before."""
    server = Server(small_disk / "data", ("--min-free-mb", "0", "--max-upload-mb", "100")
                    ).start()
    try:
        status, reply = _chunked_upload(server.port, "huge.json",
                                        b"[" + b" " * (60 << 20) + b"]")
        assert status == 507, reply
        assert reply["error"].startswith("no space left on the device of data/")
        assert list((small_disk / "data" / "tmp").iterdir()) == []
        assert server.request("GET", "/api/runs").status == 200
        declared = server.upload(("huge.json", b" " * (30 << 20)))  # Content-Length: refused
        assert declared.status == 507 and "too little free disk space" in declared.json()["error"]
        assert server.upload(("t.json.gz", SMALL)).status == 201  # space is back
    finally:
        server.stop()


def test_a_disk_filled_during_an_analysis(small_disk: Path, big: bytes) -> None:
    """Issue 29, 5: /api/runs answered 500 (the index's -shm cut short), a 0-byte
    .analysis.json.tmp stayed, and the run stayed running after space was freed."""
    data = small_disk / "data"
    server = Server(data, ("--min-free-mb", "0")).start()
    try:
        first = server.upload(("big.json.gz", big)).json()["id"]
        second = server.upload(("small.json.gz", SMALL)).json()["id"]  # queued behind it
        server.wait_for(lambda: _running(server, first), why="the first analysis started")
        filler = _fill(small_disk)
        server.wait_for(lambda: "cannot record its result" in server.log.read_text(), 60,
                        why="the worker failed on the full disk and the index refused it")
        listing = server.request("GET", "/api/runs")
        assert listing.status == 200  # reads need no space
        assert {r["id"]: r["status"] for r in listing.json()["runs"]} == \
            {first: "running", second: "queued"}
        assert list(data.glob("runs/*/.*.tmp")) == []
        filler.unlink()
        run = server.wait(first)
        assert (run["status"], run["error"]) == ("failed", NO_SPACE_ERROR)
        assert server.wait(second)["status"] == "done"
        assert server.request("DELETE", f"/api/runs/{first}").status == 204
        assert server.upload(("again.json.gz", big)).status == 201  # nothing counts as queued
    finally:
        server.stop()
    with sqlite3.connect(data / "runs.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not (data / "runs.sqlite-shm").exists()
    assert Store(data / "runs.sqlite").get(second) is not None
