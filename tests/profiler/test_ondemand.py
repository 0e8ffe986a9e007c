"""``rightsize run --on-demand`` and ``rightsize trigger`` with real processes on CPU torch.

A training job runs until the test says stop; other processes trigger captures. Each capture
must hold exactly the steps asked for, numbered as the job's own steps from the agreed start,
and be analyzed as a run directory of its own.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rightsize.rundir import read_manifest, trace_paths
from tests.profiler.ondemand_job import (
    captures,
    clean_env,
    finish,
    listening,
    profiler_steps,
    rightsize,
    start_run,
    wait_for,
    write_job,
)

pytest.importorskip("torch")


@pytest.mark.slow  # the one end-to-end test of triggers: a job triggered three times
def test_a_running_job_triggered_three_times(tmp_path: Path) -> None:
    write_job(tmp_path)
    proc = start_run(tmp_path, "job.py")
    run = tmp_path / "run"
    wait_for(lambda: listening(run), "the job to listen")
    asked = (3, 5, 2)
    printed = []
    for steps in asked:
        res = rightsize("trigger", "run", "--steps", str(steps), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        printed.append(res.stdout.strip())
        assert f"{steps} step(s) of every process" in res.stderr
    out, err = finish(proc, tmp_path)
    done = captures(run)
    assert [m["capture"]["steps"] for m in done] == list(asked)
    assert printed == [f"run/captures/{m['capture']['id']}" for m in done]
    ends = []
    for manifest, steps in zip(done, asked, strict=True):
        cap_dir = run / "captures" / manifest["capture"]["id"]
        start = manifest["capture"]["start_step"]
        (trace,) = trace_paths(cap_dir)
        # ProfilerStep#N is the job's own step N: the agreed start, then the next steps
        assert profiler_steps(trace) == list(range(start, start + steps))
        (rank,) = manifest["capture"]["ranks"]
        assert rank["first_step"] == start and rank["recorded_steps"] == steps
        assert manifest["capture"]["agreed_by"] == "run_dir"
        analysis = json.loads((cap_dir / "analysis.json").read_text())
        assert analysis["steps"]["count"] == steps
        assert (cap_dir / "report.html").is_file()
        assert manifest["collectors"]["host"]["status"] == "collected"
        ends.append((start, start + steps))
        assert f"capture {manifest['capture']['id']} (trigger): steps {start}-" \
               f"{start + steps - 1} on 1 rank(s)" in err
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ends))  # in order, apart
    job = read_manifest(run)
    assert job["collectors"]["profiler"]["status"] == "collected"
    assert [c["id"] for c in job["collectors"]["profiler"]["captures"]] == \
        [m["capture"]["id"] for m in done]
    assert job["files"]["traces"] == []  # the run's own: none, each capture has its own
    assert out.startswith("steps ")


@pytest.mark.slow  # the one end-to-end test of --auto
def test_auto_captures_when_steady_and_on_a_slowdown_flagged_as_regression(tmp_path: Path) -> None:
    write_job(tmp_path)
    # On this shared 2-core machine steps vary a lot: steady means 90% of 10 steps within 2x
    # their median; the slowdown (0.05 s -> 0.4 s of sleep a step) moves the median far more.
    proc = start_run(tmp_path, "--auto", "--steady-steps", "10", "--steady-pct", "100",
                     "--every", "off", "--drift", "50%", "--capture-steps", "3", "job.py")
    run = tmp_path / "run"
    first = wait_for(lambda: captures(run), "the first capture")[0]
    assert first["capture"]["reason"] == "steady"
    assert first["capture"]["regression"] is None  # nothing before it
    (tmp_path / "slow").write_text("")
    both = wait_for(lambda: captures(run)[1:] and captures(run), "the drift capture")
    _, err = finish(proc, tmp_path)
    second = both[1]["capture"]
    assert second["reason"] == "drift"
    assert second["job_step_ms"] > 1.5 * first["capture"]["job_step_ms"]
    regression = second["regression"]
    assert regression["previous"] == first["capture"]["id"] and regression["flagged"] is True
    assert regression["change_pct"] > 50
    assert regression["attribution"]  # compare's top changes
    compare = json.loads((run / "captures" / second["id"] / "compare.json").read_text())
    assert compare["step_ms"]["b"] > compare["step_ms"]["a"]
    assert f"REGRESSION {regression['change_pct']:+.1f}% vs {first['capture']['id']}" in err
    # no capture after that: the pace did not drift again, --every is off
    assert [m["capture"]["reason"] for m in captures(run)] == ["steady", "drift"]


@pytest.mark.slow  # a job started by another launcher: python itself
def test_environment_on_demand_finished_by_the_trigger(tmp_path: Path) -> None:
    import subprocess
    import sys

    write_job(tmp_path)
    exports = rightsize("trigger", "--print-env", "envrun", cwd=tmp_path).stdout
    env = clean_env()
    for line in exports.splitlines():  # export NAME=VALUE, as a shell would
        name, value = line.removeprefix("export ").split("=", 1)
        env[name] = value.replace("${PYTHONPATH:+:$PYTHONPATH}", ":" + env["PYTHONPATH"]) \
            .strip("'")
    assert env["RIGHTSIZE_ON_DEMAND"] == "1"
    job = subprocess.Popen([sys.executable, "job.py"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = tmp_path / "envrun"
    wait_for(lambda: listening(run), "the job to listen")
    res = rightsize("trigger", "envrun", "--steps", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _out, err = finish(job, tmp_path)
    assert err == ""  # nothing of rightsize's in the job's streams
    (manifest,) = captures(run)
    assert manifest["collectors"]["analysis"]["status"] == "written"
    assert manifest["collectors"]["nvml"] == {
        "status": "missing", "reason": "not sampled: the job was not started by rightsize run"}
    assert read_manifest(run)["on_demand"]["started_by"] == "environment"


def test_trigger_refuses_what_it_cannot_capture(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("")
    assert rightsize("run", "--out", "plain", "--no-report", "x.py", cwd=tmp_path).returncode == 0
    res = rightsize("trigger", "plain", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, ("rightsize: error: plain: not an on-demand run "
                                                "(start the job with rightsize run --on-demand, "
                                                "or RIGHTSIZE_ON_DEMAND=1)\n"))
    res = rightsize("run", "--on-demand", "--out", "ended", "x.py", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = rightsize("trigger", "ended", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, ("rightsize: error: ended: no process of the job "
                                                "is listening for captures (it ended, or has not "
                                                "imported torch yet)\n"))
    res = rightsize("trigger", "nowhere", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, ("rightsize: error: nowhere: no such run "
                                                "directory\n"))
    res = rightsize("run", "--auto", "x.py", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, ("rightsize: error: --auto and --upload need "
                                                "--on-demand\n"))
    res = rightsize("run", "--on-demand", "--auto", "--every", "soon", "x.py", cwd=tmp_path)
    assert res.stderr == ("rightsize: error: --every soon: expected a duration like 90s, 30m, "
                          "2h, or off\n")
