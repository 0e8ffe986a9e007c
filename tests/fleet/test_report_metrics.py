"""The fleet report over trace jobs and metrics workloads together (tests/fleet/rows.py: ROWS
and METRICS, every figure worked out there and below), the source filter, and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rightsize.fleet.report import Filters, Group, Usage, build
from rightsize.fleet.table import FleetTable
from tests.conftest import cli
from tests.fleet.rows import METRICS, ROWS


@pytest.fixture
def table(tmp_path) -> FleetTable:
    t = FleetTable.open(tmp_path / "t", create=True)
    t.append(ROWS + METRICS)
    return t


def test_without_usage_metrics_hours_are_their_windows_and_savings_their_own(table):
    r = build(table.rows(), "t")
    assert (r.jobs, r.ok, r.bad_input) == (8, 7, 1)
    assert r.hours_note == ("GPU-hours of 5 of 7 jobs: run directories' wall time x GPUs and "
                            "metrics workloads' window x GPUs held; the others have none (pass "
                            "--usage for GPU-hours per month)")
    # a 2 h x $3, c 1.5 h x $4; web 672 h x $2, small 24 h x $3.5, nosm 24 h x $2
    assert (r.gpu_hours, r.cost_usd) == (723.5, 1488.0)
    assert r.by_source == (Group("metrics", 3, 3, 720.0, 1476.0),
                           Group("trace", 4, 2, 3.5, 12.0))
    assert r.by_verdict == (Group("over-provisioned", 4, 3, 698.0, 1434.0),
                            Group("not sized", 1, 1, 24.0, 48.0),
                            Group("right-sized", 2, 1, 1.5, 6.0))
    assert [(g.name, g.jobs) for g in r.by_bound] == [("not diagnosed (metrics)", 3),
                                                      ("dataloader", 2), ("compute", 2)]
    # metrics workloads per month from their own costs (5,840 - 1,460; 2,555 - 365), GPU-hours
    # a month = GPUs held x 730; then the trace jobs per 1k steps (no --usage)
    assert [(s.job, s.source, s.gpu_hours_per_month, s.savings_per_month_usd,
             s.recommended, s.confidence_level) for s in r.over_provisioned] == [
        ("ml/web", "metrics", 2920.0, 4380.0, "1 x A100 80GB SXM", "high"),
        ("ml/small", "metrics", 730.0, 2190.0, "1 x MIG 1g.10gb on A100 80GB SXM", "medium"),
        ("e", "trace", None, None, None, None),  # hand-made trace rows: no words
        ("a", "trace", None, None, None, None)]
    assert r.savings_per_month_usd == 6570.0 and r.over_provisioned_total == 4
    assert r.over_provisioned[0].savings_per_1k_steps_usd is None
    # rules are over the 4 ok trace jobs only: the figures of the trace-only table
    assert [(b.id, b.jobs, b.jobs_pct) for b in r.bottlenecks] == [
        ("dataloader-stall", 2, 50.0), ("host-bound", 1, 25.0)]
    w = r.this_week
    assert w is not None and (w.jobs, w.savings_per_month_usd) == (8, 6570.0)
    assert w.by_verdict == {"not sized": 1, "over-provisioned": 4, "right-sized": 2}
    assert w.by_bound == {"compute": 2, "dataloader": 2, "not diagnosed (metrics)": 3}
    assert [j.job for j in r.job_lines] == ["e", "ml/web", "a", "c", "d.json", "ml/small", "b",
                                            "ml/nosm"]
    nosm = next(j for j in r.job_lines if j.job == "ml/nosm")
    assert (nosm.source, nosm.sizing_verdict, nosm.bound, nosm.document) == (
        "metrics", None, None, None)


def test_with_usage_metrics_hours_are_a_month_of_their_gpus(table):
    usage = Usage({"a": 100.0, "p1": 10.0, "zzz": 5.0}, "usage.csv")
    r = build(table.rows(), "t", usage=usage)
    assert r.hours_note == ("GPU-hours per month from usage.csv: 2 of 3 labels matched a job; "
                            "3 metrics workloads: their GPUs held x 730 h")
    # a 100 h x $3, e 10 h x $2; web 2,920 h x $2, small 730 h x $3.5, nosm 730 h x $2
    assert (r.gpu_hours, r.cost_usd) == (4490.0, 10175.0)
    assert [(s.job, s.savings_per_month_usd) for s in r.over_provisioned] == [
        ("ml/web", 4380.0), ("ml/small", 2190.0), ("a", 150.0), ("e", 12.0)]
    assert r.savings_per_month_usd == 6732.0


def test_the_source_filter(table):
    only = build(table.rows(), "t", Filters(sources=("metrics",)))
    assert [j.job for j in only.job_lines] == ["ml/web", "ml/small", "ml/nosm"]
    assert only.bottlenecks == () and only.filters["sources"] == ["metrics"]
    traces = build(table.rows(), "t", Filters(sources=("trace",)))
    alone = FleetTable.open(table.root.parent / "alone", create=True)
    alone.append(ROWS)
    expected = build(alone.rows(), "t", Filters(sources=("trace",)))
    assert replace(traces, generated_at="") == replace(expected, generated_at="")


def test_a_workload_counts_once_at_its_newest_window(table):
    """The same workload over an older window (another key) is history, as an older recording
    of a trace job is: listed in its own week only."""
    from tests.fleet.rows import metrics_row

    table.append([metrics_row("mw-old", "ml/web", 10, 168, 4, sizing_verdict="right-sized",
                              confidence_level="high", usd_per_gpu_hour=2.0,
                              usd_per_month=5840.0)])
    r = build(table.rows(), "t")
    assert [j.key for j in r.job_lines if j.job == "ml/web"] == ["mw"]
    assert [(c.job, c.before, c.after) for c in r.changed] == [
        ("c", "host / over-provisioned", "compute / right-sized"),
        ("ml/web", "none / right-sized", "none / over-provisioned")]


def test_cli_source_filter_text_and_json(table):
    res = cli("fleet", "report", "--table", table.root, "--source", "metrics", "--format",
              "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [o["job"] for o in data["over_provisioned"]] == ["ml/web", "ml/small"]
    assert data["over_provisioned"][0]["savings_per_month_usd"] == 4380.0
    res = cli("fleet", "report", "--table", table.root)
    lines = res.stdout.splitlines()
    assert lines[1] == "8 jobs recorded 2026-11-18..2026-11-20: 7 ok, 1 bad inputs, 0 failed"
    assert ("Over-provisioned jobs, by savings per month (metrics workloads, their own), then "
            "per 1k steps (trace jobs: no --usage): 4, $6,570 a month in all") in lines
    assert [ln.split(None, 2)[2] for ln in lines if ln.startswith("  ml/")][:2] == [
        "saves  75%          $4,380/month  4 x A100 80GB SXM -> 1 x A100 80GB SXM",
        "saves  86%          $2,190/month  1 x A100 80GB SXM -> 1 x MIG 1g.10gb on A100 80GB SXM"]
    assert lines[lines.index("By source (trace, metrics)       jobs with hours  GPU-hours"
                             "       cost") + 1].split() == ["metrics", "3", "3", "720.0",
                                                             "$1,476"]
    res = cli("fleet", "report", "--table", table.root, "--source", "logs")
    assert res.returncode == 2 and "'logs' is not one of 'trace', 'metrics'" in res.stderr
