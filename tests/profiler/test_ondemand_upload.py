"""``rightsize run --on-demand --upload``: captures reach a real ``rightsize serve`` on 127.0.0.1,
and those made while the server is down are queued on disk and sent once it is back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.profiler.capture import job_step_ms
from rightsize.rundir import read_json_file
from tests.profiler.ondemand_job import (
    captures,
    finish,
    listening,
    rightsize,
    start_run,
    wait_for,
    write_job,
)

pytest.importorskip("torch")
pytest.importorskip("starlette", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

from tests.serve.serving import Server

REPO = Path(__file__).resolve().parents[2]


def _steps(run: Path) -> int:
    return int(listening(run)[0]["steps"])


@pytest.mark.slow  # the one end-to-end test of uploads: a server stopped and restarted mid-run
def test_no_capture_is_lost_while_the_server_is_down(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    write_job(tmp_path)
    proc = start_run(tmp_path, "--upload", server.url, "--team", "vision", "--project", "p1",
                     "--name", "resnet-live", "--upload-wait-s", "60", "job.py")
    run = tmp_path / "run"
    try:
        wait_for(lambda: listening(run), "the job to listen")
        # each capture carries the job's own step time (asserted below): the first trigger
        # waits until the job has published some (on a loaded machine it once came first)
        wait_for(lambda: job_step_ms(run) is not None, "the job's step times")
        assert rightsize("trigger", "run", "--steps", "2", cwd=tmp_path).returncode == 0
        wait_for(lambda: list((run / "uploads" / "sent").glob("*.json")), "the first upload")
        server.stop()
        for _ in range(2):  # two captures while the server is down: queued, the job goes on
            res = rightsize("trigger", "run", "--steps", "2", cwd=tmp_path)
            assert res.returncode == 0, res.stderr
        queue = sorted((run / "uploads" / "queue").glob("*.json"))
        assert len(queue) == 2
        wait_for(lambda: (read_json_file(queue[0]) or {}).get("attempts", 0) >= 1, "a retry")
        before = _steps(run)
        wait_for(lambda: _steps(run) >= before + 5, "the job to step while uploads fail")
        server.start()  # the same port and data directory
        wait_for(lambda: not list((run / "uploads" / "queue").glob("*.json")), "the queue",
                 timeout_s=120)
    finally:
        _, err = finish(proc, tmp_path)
        server.stop()
    ids = [m["capture"]["id"] for m in captures(run)]
    assert len(ids) == 3
    sent = {p.stem: json.loads(p.read_text()) for p in (run / "uploads" / "sent").glob("*.json")}
    assert sorted(sent) == ids
    assert all(s["answer"] and json.loads(s["answer"])["existing"] is False
               for s in sent.values())
    assert sent[ids[0]]["attempts"] == 1
    assert sent[ids[1]]["attempts"] >= 2  # the queue's head: tried while down, sent after
    assert sent[ids[2]]["attempts"] >= 1
    assert "will be retried" in err
    server.start()
    try:
        runs = server.request("GET", "/api/runs").json()["runs"]
        # the job followed over time: its three captures in order, each analyzed and checked
        # against the one before (serve's /jobs/<name>)
        history = server.wait_for(
            lambda: (h := server.request("GET", "/api/jobs/resnet-live").json()["captures"])
            and all(c["flagged"] is not None for c in h) and h, timeout_s=90,
            why="the job's captures checked")
    finally:
        server.stop()
    assert [c["capture"] for c in history] == ids
    assert [(c["reason"], c["ranks"], c["status"]) for c in history] == [("trigger", 1, "done")] * 3
    assert [c["previous"] for c in history] == [None, history[0]["id"], history[1]["id"]]
    assert all(c["job_step_ms"] > 0 and c["summary"]["step_ms"] > 0 for c in history)
    assert len(runs) == 3
    assert {(r["team"], r["project"]) for r in runs} == {("vision", "p1")}
    server_ids = {json.loads(s["answer"])["id"] for s in sent.values()}
    assert {r["id"] for r in runs} == server_ids


def test_rightsize_upload_sends_what_is_queued(tmp_path: Path) -> None:
    from rightsize.profiler.upload import enqueue
    from rightsize.rundir import trace_paths
    from tests.serve.serving import free_port

    cap = next(iter(trace_paths(REPO / "samples" / "runs" / "train_compute-cpu"))).parent.parent
    run = tmp_path / "run"
    enqueue(run, cap, f"http://127.0.0.1:{free_port()}", {"team": "t", "project": None})
    res = rightsize("upload", "run", "--timeout-s", "0", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.startswith("rightsize: error: 1 capture(s) still queued in run/uploads/"
                                 "queue/: http://127.0.0.1:")
    assert len(res.stderr.splitlines()) == 1
    server = Server(tmp_path / "data").start()
    try:
        res = rightsize("upload", "run", "--to", server.url, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert res.stderr.splitlines()[-1] == "rightsize: 1 capture(s) sent; none queued"
        (run_item,) = server.request("GET", "/api/runs").json()["runs"]
    finally:
        server.stop()
    assert (run_item["team"], run_item["project"]) == ("t", None)
    sent = json.loads((run / "uploads" / "sent" / f"{cap.name}.json").read_text())
    assert (sent["attempts"], sent["url"]) == (2, server.url)
