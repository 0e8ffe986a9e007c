"""One entity per job across its captures, and a Kubernetes workload seen both in metrics and
in a capture counted once (rightsize/fleet/report.py, IDENTITY; docs/captures.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rightsize.fleet.analyze import capture_identity, entity
from rightsize.fleet.report import build
from rightsize.fleet.table import FleetTable
from tests.conftest import SAMPLES, cli
from tests.fleet.rows import METRICS, ROWS, row

# two captures of job "live" (days 13 and 19) and one of the workload ml/small (day 17,
# before the metrics window of day 19: the capture is still the entity's row)
CAPTURES = [
    row("cap1", "live", 13, entity="job:live", paths=["/runs/live/captures/1"], bound="host"),
    row("cap2", "live", 19, entity="job:live", paths=["/runs/live/captures/2"], bound="compute"),
    row("cap3", "small-trainer", 17, entity="workload:ml/small",
        paths=["/runs/small/captures/1"], bound="memory"),
]


def test_a_jobs_captures_and_its_workloads_metrics_are_one_entity_each(tmp_path: Path) -> None:
    table = FleetTable.open(tmp_path / "t", create=True)
    table.append(ROWS + METRICS + CAPTURES)
    report = build(table.rows(), "t")
    lines = {j.job: j for j in report.job_lines}
    # the 8 jobs of ROWS + METRICS, plus "live" once; ml/small is the capture now
    assert report.jobs == 9
    assert lines["live"].bound == "compute" and lines["live"].key == "cap2"
    assert "ml/small" not in lines
    assert (lines["small-trainer"].source, lines["small-trainer"].bound) == ("trace", "memory")
    assert table.rows().collect().height == len(ROWS + METRICS + CAPTURES)  # history stays


def test_capture_identity_from_the_manifest() -> None:
    assert entity("live") == "job:live"
    assert entity("live", "ml", "trainer") == "workload:ml/trainer"
    assert capture_identity({"capture": {}, "labels": {"name": "live", "team": "t"}}) == {
        "job": "live", "entity": "job:live"}
    assert capture_identity({"capture": {}, "command": {"name": "train"}, "labels": {
        "namespace": "ml", "workload": "trainer"}}) == {
        "job": "train", "entity": "workload:ml/trainer"}


def test_fleet_scan_reads_an_on_demand_runs_captures(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "live"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "schema_version": 1, "status": "done", "command": {"name": "train"},
        "settings": {"on_demand": True}, "labels": {"name": "live", "team": "vision"},
        "collectors": {}, "files": {"traces": []}}))
    for i, day in enumerate(("2026-11-18", "2026-11-19")):
        cap = run / "captures" / f"2026111{8 + i}-120000"
        shutil.copytree(SAMPLES / "runs" / "train_compute-cpu", cap)
        manifest = json.loads((cap / "manifest.json").read_text())
        manifest |= {"started_at": f"{day}T12:00:00+00:00", "labels": {"name": "live",
                                                                       "team": "vision"},
                     "capture": {"id": cap.name, "reason": "trigger"}}
        (cap / "manifest.json").write_text(json.dumps(manifest))
    res = cli("fleet", "scan", str(tmp_path / "runs"), "--table", str(tmp_path / "t"), "-q")
    assert res.returncode == 0, res.stderr
    rows = FleetTable(tmp_path / "t").rows().collect().sort("recorded_at")
    assert rows["job"].to_list() == ["live", "live"]
    assert rows["entity"].to_list() == ["job:live", "job:live"]
    assert rows["team"].to_list() == ["vision", "vision"] and set(rows["status"]) == {"ok"}
    report = build(FleetTable(tmp_path / "t").rows(), "t")
    assert report.jobs == 1 and report.job_lines[0].recorded_at.startswith("2026-11-19")
