"""``fleet metrics --table DIR``: each workload a row of the fleet table (source ``metrics``,
docs/fleet-table.md), exact on the generated series (gen.py), replaced when the same window is
read again, reported beside trace jobs by ``fleet report``; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.fleet.metrics_rows import public_url
from rightsize.fleet.table import FleetTable
from tests.conftest import cli
from tests.fleet_metrics.gen import T0, scenarios, short
from tests.fleet_metrics.gen import response as _response

A100_MONTH = 1.79 * 730  # the catalog's cheapest A100 80GB SXM price, 730 h a month
WEEK_H = 7 * 24


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("saved") / "dcgm.json"
    p.write_bytes(_response(scenarios() + short()))
    return p


def table_rows(root: Path) -> dict[str, dict]:
    df = FleetTable(root).rows().collect()
    return {r["job"]: r for r in df.iter_rows(named=True)}


def test_workloads_are_rows_with_their_own_figures(saved: Path, tmp_path: Path) -> None:
    out = cli("fleet", "metrics", "--from", saved, "--table", tmp_path / "t", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert out.stderr.endswith(f"; 5 rows in the fleet table {tmp_path / 't'} (see them: "
                               f"rightsize fleet report --table {tmp_path / 't'})\n")
    rows = table_rows(tmp_path / "t")
    assert sorted(rows) == ["ml/big", "ml/brief", "ml/nosm", "ml/small", "ml/web"]
    small = rows["ml/small"]
    assert {k: small[k] for k in (
        "source", "kind", "team", "project", "status", "paths", "labels_source", "device", "gpu",
        "gpu_reported", "gpus", "nodes", "recorded_at_source", "sizing_verdict",
        "confidence_level", "recommended", "recommended_gpu", "recommended_gpus", "bound",
        "confidence", "steps", "document", "files", "rules")} == {
        "source": "metrics", "kind": "workload", "team": "ml", "project": "small",
        "status": "ok", "paths": [str(saved)], "labels_source": "metrics", "device": "gpu",
        "gpu": "A100 80GB SXM", "gpu_reported": "NVIDIA A100-SXM4-80GB", "gpus": 1,
        "nodes": 1, "recorded_at_source": "metrics", "sizing_verdict": "over-provisioned",
        "confidence_level": "high", "recommended": "1 x MIG 1g.10gb on A100 80GB SXM",
        "recommended_gpu": "A100 80GB SXM", "recommended_gpus": None, "bound": None,
        "confidence": None, "steps": None, "document": None, "files": None, "rules": []}
    assert small["window_start"].timestamp() == T0
    assert small["recorded_at"].timestamp() == T0 + WEEK_H * 3600
    assert small["usd_per_gpu_hour"] == 1.79
    assert small["usd_per_month"] == pytest.approx(A100_MONTH)
    assert small["recommended_usd_per_month"] == pytest.approx(A100_MONTH / 7)
    assert small["savings_pct"] == pytest.approx(600 / 7)
    assert small["run_gpu_hours"] == pytest.approx(WEEK_H)  # 1 GPU held for the week
    assert small["peak_memory_bytes"] == 7168 * 2**20
    assert small["gpu_util_pct"] == 30.0  # the duty cycle's mean
    assert small["sm_efficiency_pct"] == pytest.approx((1815 * 5 + 202 * 8) / 2017)
    assert small["sizing_reason"] == ("1g.10gb: 10 GB for 9.02 GB; 1/7 of the SMs for summed "
                                      "p95 8.0%")
    web = rows["ml/web"]
    assert (web["gpus"], web["nodes"], web["recommended"], web["recommended_gpus"]) == (
        4, 4, "1 x A100 80GB SXM", 1)
    assert web["run_gpu_hours"] == pytest.approx(4 * WEEK_H)
    assert rows["ml/big"]["sizing_verdict"] == "right-sized"
    for name in ("ml/nosm", "ml/brief"):  # inconclusive: why, and no level or verdict
        assert (rows[name]["sizing_verdict"], rows[name]["confidence_level"]) == (None, None)
        assert rows[name]["sizing_reason"]
    # the JSON's rows and the table's agree
    by = {r["workload"]: r for r in json.loads(out.stdout)["rows"]}
    assert by["ml/small"]["confidence"] == small["confidence_level"]
    assert by["ml/web"]["cost_per_month_now_usd"] == round(web["usd_per_month"], 2)


def test_the_same_window_again_replaces_its_rows(saved: Path, tmp_path: Path) -> None:
    t = tmp_path / "t"
    for _ in range(2):
        out = cli("fleet", "metrics", "--from", saved, "--table", t, "-q")
        assert out.returncode == 0, out.stderr
    raw = FleetTable(t).raw().collect()
    assert raw.height == 5 and raw["key"].n_unique() == 5
    # each day merged into one file: the old rows are gone from disk (ml/brief's three hours
    # end on 2026-01-01, the week's workloads on 2026-01-08)
    assert sorted(p.parent.name for p in (t / "table").glob("day=*/*.parquet")) == [
        "day=2026-01-01", "day=2026-01-08"]
    # a shorter window (the three-hour pod alone) is another key: a row beside the old one
    brief = tmp_path / "brief.json"
    brief.write_bytes(_response([(n, lb, p[:20]) for n, lb, p in short()]))
    assert cli("fleet", "metrics", "--from", brief, "--table", t, "-q").returncode == 0
    assert FleetTable(t).raw().collect().height == 6


def test_the_report_shows_them_beside_trace_jobs(saved: Path, tmp_path: Path) -> None:
    from tests.fleet.rows import ROWS

    t = FleetTable.open(tmp_path / "t", create=True)
    t.append(ROWS)
    assert cli("fleet", "metrics", "--from", saved, "--table", t.root, "-q").returncode == 0
    out = cli("fleet", "report", "--table", t.root, "--format", "json")
    data = json.loads(out.stdout)
    assert (data["jobs"], data["ok"]) == (10, 9)
    over = [(o["job"], o["source"]) for o in data["over_provisioned"]]
    assert over == [("ml/web", "metrics"), ("ml/small", "metrics"), ("e", "trace"),
                    ("a", "trace")]
    assert data["over_provisioned"][0]["savings_per_month_usd"] == pytest.approx(3 * A100_MONTH)
    assert data["savings_per_month_usd"] == pytest.approx(3 * A100_MONTH + A100_MONTH * 6 / 7)
    assert [g["name"] for g in data["by_source"]] == ["metrics", "trace"]
    only = json.loads(cli("fleet", "report", "--table", t.root, "--format", "json",
                          "--source", "metrics").stdout)
    assert only["jobs"] == 5 and {j["source"] for j in only["job_lines"]} == {"metrics"}


def test_table_errors_are_one_line(saved: Path, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    out = cli("fleet", "metrics", "--from", saved, "--table", tmp_path / "other")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == (f"rightsize: error: {tmp_path / 'other'} is not empty and not a fleet "
                          "table (no FLEET.json): pick another --table folder\n")
    t = FleetTable.open(tmp_path / "t", create=True)
    with t.writer():  # another writer holds the table
        out = cli("fleet", "metrics", "--from", saved, "--table", t.root, "-q")
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "is writing this table; wait for it to finish" in out.stderr
    assert t.raw().collect().height == 0


def test_public_url_drops_credentials() -> None:
    assert public_url("https://u:pw@prom.example:9090/prom/?x=1") == (
        "https://prom.example:9090/prom/")
    assert public_url("http://[::1]:9090") == "http://[::1]:9090"
    assert public_url("http://127.0.0.1:9090") == "http://127.0.0.1:9090"
