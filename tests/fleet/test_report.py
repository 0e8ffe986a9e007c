"""The fleet report over a hand-made table (tests/fleet/rows.py): every figure worked out by
hand, with and without --usage, filters, the text and JSON outputs of the real CLI."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from rightsize.fleet.report import Filters, Group, Usage, UsageError, build, read_usage
from rightsize.fleet.table import FleetTable
from tests.conftest import cli
from tests.fleet.rows import ROWS, USAGE


@pytest.fixture
def table(tmp_path) -> FleetTable:
    t = FleetTable.open(tmp_path / "t", create=True)
    t.append(ROWS)
    return t


def usage() -> Usage:
    return Usage({"a": 100.0, "p1": 10.0, "zzz": 5.0}, "usage.csv")


def test_with_usage_every_figure(table):
    r = build(table.rows(), "t", usage=usage())
    # c's second recording supersedes its first: a, b, c (day 19), d, e
    assert (r.jobs, r.ok, r.bad_input, r.failed) == (5, 4, 1, 0)
    assert (r.first_day, r.last_day) == ("2026-11-18", "2026-11-20")
    assert r.hours_source == "usage" and r.usage_unmatched == ("zzz",)
    assert r.hours_note == "GPU-hours per month from usage.csv: 2 of 3 labels matched a job"
    # a: 100 h x $3; e (project p1): 10 h x $2
    assert (r.gpu_hours, r.cost_usd) == (110.0, 320.0)
    assert r.by_verdict == (Group("over-provisioned", 2, 2, 110.0, 320.0),
                            Group("right-sized", 2, 0, None, None))
    assert r.by_team == (Group("vision", 2, 1, 100.0, 300.0), Group("nlp", 2, 1, 10.0, 20.0))
    assert [(g.name, g.jobs) for g in r.by_bound] == [("dataloader", 2), ("compute", 2)]
    # savings per month: hours x price x savings: a 100 x 3 x 50% = 150, e 10 x 2 x 60% = 12
    assert [(s.job, s.gpu_hours_per_month, s.savings_per_month_usd)
            for s in r.over_provisioned] == [("a", 100.0, 150.0), ("e", 10.0, 12.0)]
    assert r.savings_per_month_usd == 162.0 and r.over_provisioned_total == 2
    assert [round(s.savings_per_1k_steps_usd or 0, 6) for s in r.over_provisioned] == [0.02, 0.03]
    # rules over the 4 ok jobs: dataloader-stall on a (1 - 4/10) and e (1 - 8/10): median 40%
    assert [(b.id, b.jobs, b.jobs_pct, round(b.median_gain_pct or 0, 6))
            for b in r.bottlenecks] == [("dataloader-stall", 2, 50.0, 40.0),
                                        ("host-bound", 1, 25.0, 25.0)]
    assert r.bottlenecks[0].title == "fix dataloader-stall"
    w, p = r.this_week, r.previous_week
    assert w is not None and p is not None
    assert (w.start, w.end, w.jobs, p.start, p.end, p.jobs) == (
        "2026-11-14", "2026-11-20", 5, "2026-11-07", "2026-11-13", 1)
    assert w.by_verdict == {"over-provisioned": 2, "right-sized": 2}
    assert p.by_verdict == {"over-provisioned": 1} and p.by_bound == {"host": 1}
    assert (w.savings_per_month_usd, p.savings_per_month_usd) == (162.0, None)
    assert [(c.job, c.before, c.after) for c in r.changed] == [
        ("c", "host / over-provisioned", "compute / right-sized")]
    assert [e.reason for e in r.errors] == ["/data/d.json: the file is empty"]
    assert [j.job for j in r.job_lines] == ["e", "a", "c", "d.json", "b"]


def test_without_usage_hours_are_the_runs_own_and_savings_per_1k_steps(table):
    r = build(table.rows(), "t")
    assert r.hours_source == "run"
    assert r.hours_note == ("GPU-hours of 2 of 4 jobs: run directories' wall time x GPUs; the "
                            "others have none (pass --usage for GPU-hours per month)")
    assert (r.gpu_hours, r.cost_usd) == (3.5, 12.0)  # a 2 h x $3, c 1.5 h x $4
    assert r.by_verdict == (Group("over-provisioned", 2, 1, 2.0, 6.0),
                            Group("right-sized", 2, 1, 1.5, 6.0))
    # no per-month figure from a run's own hours: ranked per 1k steps (e 0.03, a 0.02)
    assert [(s.job, s.savings_per_month_usd) for s in r.over_provisioned] == [("e", None),
                                                                             ("a", None)]
    assert r.savings_per_month_usd is None


def test_filters_by_team_and_day(table):
    r = build(table.rows(), "t", Filters(teams=("vision",)))
    assert [j.job for j in r.job_lines] == ["a", "c"] and r.jobs == 2
    r = build(table.rows(), "t", Filters(since=date(2026, 11, 19)))
    assert sorted(j.job for j in r.job_lines) == ["a", "c", "d.json", "e"]
    r = build(table.rows(), "t", Filters(projects=("p1",), until=date(2026, 11, 19)))
    assert r.jobs == 0 and r.over_provisioned == () and r.this_week is not None
    assert (r.this_week.start, r.this_week.jobs) == ("2026-11-13", 0)  # --until ends the week
    r = build(table.rows(), "t", Filters(projects=("p1",), until=date(2026, 11, 19)))


def test_usage_file_errors_are_one_line(tmp_path):
    f = tmp_path / "u.csv"
    f.write_text("job,hours\na,1\n")
    with pytest.raises(UsageError, match=r"the first line must be the header label,gpu_hours"):
        read_usage(f)
    f.write_text("label,gpu_hours\na,lots\n")
    with pytest.raises(UsageError, match=r"line 2: expected label,gpu_hours with a number"):
        read_usage(f)
    f.write_text(USAGE + "a,50\n")
    assert read_usage(f).hours_per_month == {"a": 150.0, "p1": 10.0, "zzz": 5.0}


def test_cli_text_and_json(table, tmp_path):
    (tmp_path / "usage.csv").write_text(USAGE)
    res = cli("fleet", "report", "--table", table.root, "--usage", tmp_path / "usage.csv")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[1] == "5 jobs recorded 2026-11-18..2026-11-20: 4 ok, 1 bad inputs, 0 failed"
    assert "total: 110.0 GPU-hours, cost $320 (at each job's current GPU price)" in lines
    assert any(ln.startswith("  a ") and ln.endswith(
        "saves  50%            $150/month  1 x H100 SXM -> 1 x L4") for ln in lines)
    assert "  c: host / over-provisioned -> compute / right-sized" in lines
    res = cli("fleet", "report", "--table", table.root, "--format", "json", "--team", "nlp")
    data = json.loads(res.stdout)
    assert data["schema_version"] == 1 and data["filters"]["teams"] == ["nlp"]
    assert [o["job"] for o in data["over_provisioned"]] == ["e"]
    assert data["over_provisioned"][0]["savings_per_1k_steps_usd"] == pytest.approx(0.03)


def test_cli_errors(tmp_path):
    res = cli("fleet", "report", "--table", tmp_path / "none")
    assert res.returncode == 1
    assert res.stderr == (f"rightsize: error: {tmp_path / 'none'}: no fleet table here; make one"
                          f" with: rightsize fleet scan PATH... --table {tmp_path / 'none'}\n")
    FleetTable.open(tmp_path / "t", create=True)
    res = cli("fleet", "report", "--table", tmp_path / "t", "--since", "2026-11-20",
              "--until", "2026-11-01")
    assert res.returncode == 2 and "--since is after --until" in res.stderr
    res = cli("fleet", "report", "--table", tmp_path / "t")  # empty: a report of nothing
    assert res.returncode == 0 and res.stdout.splitlines()[1] == (
        "0 jobs none recorded: 0 ok, 0 bad inputs, 0 failed")


def test_report_of_100k_rows_is_fast(tmp_path):
    """The benchmark's figure, bounded loosely here: build over 100,000 rows."""
    import time

    from benchmarks.fleet_corpus import synthetic_rows

    t = FleetTable.open(tmp_path / "t", create=True)
    t.append(synthetic_rows(100_000))
    start = time.perf_counter()
    r = build(t.rows(), "t")
    assert time.perf_counter() - start < 10  # goal 2 s; loose for a loaded 2-core CI box
    assert r.jobs == 100_000


def test_groups_sum_to_the_total(table):
    r = build(table.rows(), "t", usage=usage())
    for groups in (r.by_verdict, r.by_bound, r.by_team):
        assert sum(g.jobs for g in groups) == r.ok
        assert sum(g.gpu_hours or 0 for g in groups) == r.gpu_hours
    assert Path(table.root / "table").is_dir()


def test_html_goes_into_the_table_and_is_replaced_there(table, tmp_path):
    res = cli("fleet", "report", "--table", table.root, "--format", "html")
    page = table.root / "fleet-report.html"
    assert res.returncode == 0 and res.stderr == f"report: {page}\n"
    first = page.stat().st_mtime_ns
    res = cli("fleet", "report", "--table", table.root, "--format", "html")
    assert res.returncode == 0 and page.stat().st_mtime_ns >= first  # its own page: replaced
    mine = tmp_path / "mine.html"
    mine.write_text("mine")
    res = cli("fleet", "report", "--table", table.root, "--format", "html", "-o", mine)
    assert res.returncode == 1 and mine.read_text() == "mine"
    assert res.stderr == f"rightsize: error: {mine} already exists; pass --force to overwrite it\n"
