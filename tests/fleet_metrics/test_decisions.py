"""Fleet decisions read as a user acts on them (issue 38): a pod of 8 GPUs kept reads as kept,
a log file names its own workload, an idle GPU is released, ``.txt`` nvidia-smi logs are
scanned, and the report's straggler row names each job's own rank."""

from __future__ import annotations

import re

from rightsize.analyzers.fleet_metrics import Outcome, analyze
from rightsize.catalog import load_catalog
from rightsize.fleet.discover import walk
from rightsize.fleet.report import build
from rightsize.fleet.table import FleetTable
from rightsize.reports.fleet_metrics import render_text
from rightsize.traces.fleet_files import read
from tests.conftest import cli
from tests.fleet.rows import row, rule
from tests.fleet_metrics.gen import pod, series_set
from tests.nvsmi_log import write_log

A100_MONTH = 1.79 * 730


def test_a_pod_of_eight_gpus_kept_reads_as_kept():
    # one pod (a StatefulSet's -0) holding GPUs 0-7, each 60 GiB at SM_ACTIVE 65-70%
    series = [s for g in range(8) for s in pod("train-0", "node-a", (61440, 61440), (95, 95),
                                               (0.65, 0.70), gpu=g)]
    res = analyze(series_set(series), load_catalog())
    [r] = res.rows
    assert (r.outcome, r.gpus_per_replica, r.recommended) == (
        Outcome.KEEP, 8, "1 x 8 x A100 80GB SXM")  # was "1 x A100 80GB SXM"
    line = next(ln for ln in render_text(res).splitlines() if ln.startswith("ml/train"))
    assert re.search(r"1 x 8 x A100 80GB SXM +-> keep +high +\$10,454 +\$10,454 +\$0.00$", line)


def test_a_log_file_names_its_workload_with_its_seconds(tmp_path):
    log = write_log(tmp_path / "gpu-2025-02-11-00-47-08.csv")
    data = read(log)
    res = analyze(data, load_catalog(), gpu="H100 SXM")
    # the stem is the workload: "-08" is the log's seconds, not a StatefulSet pod's ordinal
    assert [r.workload for r in res.rows] == ["gpu-2025-02-11-00-47-08"]
    assert res.rows[0].owner_kind is None


def test_a_gpu_idle_all_window_is_released_with_its_whole_cost():
    # a pod holding 18 GiB whose duty cycle is 0 save one 7% sample in a thousand (a health
    # check): p99 0.0%; before, a smaller GPU was offered for it
    idle = pod("llm-serve-0", "node-a", (18432, 18432), (0, 0), None)
    name, labels, pts = idle[1]
    idle[1] = (name, labels, [(t, 7.0 if i % 1000 == 500 else v)
                              for i, (t, v) in enumerate(pts)])
    res = analyze(series_set(idle), load_catalog())
    [r] = res.rows
    assert (r.outcome, r.recommended, r.replicas_recommended) == (
        Outcome.IDLE, "release 1 x A100 80GB SXM", 0)
    assert r.cost_per_month_recommended_usd == 0.0
    assert r.savings_per_month_usd == r.cost_per_month_now_usd == A100_MONTH
    assert r.why.startswith("idle: gpu_util_pct p99 0.0%, mean 0.01% (max 7.0%) over 7.0 d, "
                            "p99 under 1%: next to nothing ran on the 1 x A100 80GB SXM it holds;"
                            " release it and save its $1,307/month")


def test_fleet_scan_takes_txt_nvidia_smi_logs_and_leaves_other_text(tmp_path):
    logs = tmp_path / "in"
    logs.mkdir()
    write_log(logs / "node3-gpus.txt")
    (logs / "README.txt").write_text("GPU logs of the node 3 run\n")
    _, files, left_out = walk([str(logs)])
    assert [f.name for f in files] == ["node3-gpus.txt"] and left_out == {"text": 1}
    res = cli("fleet", "scan", logs, "--table", tmp_path / "t", "--workers", "1")
    assert res.returncode == 0, res.stderr
    [job] = FleetTable(tmp_path / "t").rows().collect().to_dicts()
    assert (job["job"], job["status"]) == ("in/node3-gpus.txt", "ok")


def test_the_straggler_row_names_each_jobs_own_rank(tmp_path):
    def straggler(rank: int, what_if: float) -> dict:
        return {**rule("straggler", what_if), "title": f"Rank {rank} holds up the collectives"}
    rows = [row("k1", "j1", 19, step_ms=10.0, rules=[straggler(1, 8.0)]),
            row("k2", "j2", 19, step_ms=10.0, rules=[straggler(3, 9.0)]),
            row("k3", "j3", 19, step_ms=10.0, rules=[straggler(3, 9.0)])]
    t = FleetTable.open(tmp_path / "t", create=True)
    t.append(rows)
    [b] = build(t.rows(), "t").bottlenecks
    # was "Rank 1 holds up the collectives" for all three jobs
    assert (b.id, b.jobs, b.title) == (
        "straggler", 3, "Ranks hold up the collectives: rank 3 in 2 jobs, rank 1 in 1 job")
