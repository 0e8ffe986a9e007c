"""Schema version 2 of the fleet table: a version-1 table (files without ``source`` or
``confidence_level``, ``FLEET.json`` at 1) read as version 2 without a change on disk, migrated
by the first writer (also after a migration killed midway), a newer table refused, and
``FleetTable.replace``: the same key again replaces its row on disk."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import polars as pl
import pytest

from rightsize.fleet.report import build
from rightsize.fleet.schema import COLUMNS, SCHEMA, level
from rightsize.fleet.table import FleetTable, TableError
from tests.fleet.rows import METRICS, ROWS, metrics_row

ADDED = ("source", "window_start", "confidence_level", "recommended", "usd_per_month",
         "recommended_usd_per_month")
V1 = [c for c in COLUMNS if c not in ADDED]
# the diagnosis' numbers of the hand-made jobs, and the words they read as (0.7 and 0.4 are
# the lower bounds of high and medium)
CONFIDENCE = {"ka": (0.85, "high"), "kb": (0.5, "medium"), "kc1": (0.39, "low"),
              "kc2": (0.7, "high"), "kd": (None, None), "ke": (0.4, "medium")}


def v1_table(root):
    """A table as rightsize with schema 1 wrote it: one file per recorded day."""
    (root / "table").mkdir(parents=True)
    (root / "FLEET.json").write_text(json.dumps({"format": "rightsize-fleet",
                                                 "schema_version": 1}))
    rows = [{**r, "confidence": CONFIDENCE[r["key"]][0]} for r in ROWS]
    df = pl.DataFrame(rows, schema=SCHEMA).select(V1)
    for (day,), part in df.group_by(pl.col("recorded_at").dt.date()):
        (root / "table" / f"day={day}").mkdir()
        part.write_parquet(root / "table" / f"day={day}" / "part-v1.parquet")
    return FleetTable.open(root, create=False)


def snapshot(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_version_1_table_reads_as_trace_rows_with_their_levels(tmp_path):
    t = v1_table(tmp_path / "t")
    before = snapshot(t.root)
    df = t.rows().collect()
    assert df.schema == SCHEMA and df.height == 6
    assert set(df["source"]) == {"trace"}
    assert dict(zip(df["key"], df["confidence_level"], strict=True)) == {
        k: words for k, (_, words) in CONFIDENCE.items()}
    assert [level(c) for c, _ in CONFIDENCE.values()] == [w for _, w in CONFIDENCE.values()]
    assert set(df["schema_version"]) == {1}
    # the report of a version-1 table is the version-2 table's of the same rows
    v2 = FleetTable.open(tmp_path / "v2", create=True)
    v2.append([{**r, "confidence": CONFIDENCE[r["key"]][0],
                "confidence_level": CONFIDENCE[r["key"]][1]} for r in ROWS])
    assert replace(build(t.rows(), "t"), generated_at="") == replace(
        build(v2.rows(), "t"), generated_at="")
    assert snapshot(t.root) == before  # reading changed nothing
    assert t.version() == 1


def test_the_first_writer_migrates_a_version_1_table(tmp_path):
    t = v1_table(tmp_path / "t")
    read = t.rows().collect().sort("key")
    with t.writer():
        pass
    assert t.version() == 2
    assert json.loads((t.root / "FLEET.json").read_text())["schema_version"] == 2
    files = t.files()
    assert len(files) == 4  # one per recorded day, merged
    for f in files:
        assert pl.read_parquet(f).columns == list(COLUMNS)
    assert t.rows().collect().sort("key").equals(read)  # the same rows, their levels stored
    assert set(pl.read_parquet(files)["source"]) == {"trace"}
    # a metrics row joins the migrated table
    with t.writer():
        t.replace(METRICS)
    assert sorted(t.rows().collect()["source"]) == ["metrics"] * 3 + ["trace"] * 6


def test_a_migration_killed_midway_reads_right_and_is_finished(tmp_path):
    """One day merged into version-2 columns, the mark still 1 (killed before the end)."""
    t = v1_table(tmp_path / "t")
    read = t.rows().collect().sort("key")
    assert t.compact(days={"2026-11-19"}) == 1
    assert t.version() == 1
    mixed = {f.parent.name: pl.read_parquet(f).columns == list(COLUMNS) for f in t.files()}
    assert mixed == {"day=2026-11-12": False, "day=2026-11-18": False, "day=2026-11-19": True,
                     "day=2026-11-20": False}
    assert t.rows().collect().sort("key").equals(read)
    with t.writer():
        pass
    assert t.version() == 2 and t.rows().collect().sort("key").equals(read)
    assert all(pl.read_parquet(f).columns == list(COLUMNS) for f in t.files())


def test_a_newer_table_is_refused_in_one_line(tmp_path):
    t = FleetTable.open(tmp_path / "t", create=True)
    (t.root / "FLEET.json").write_text('{"format": "rightsize-fleet", "schema_version": 3}')
    with pytest.raises(TableError, match=r"schema_version 3 is newer than this rightsize reads "
                                         r"\(2\): upgrade rightsize$"):
        FleetTable.open(t.root, create=False)


def test_replace_keeps_one_row_per_key_on_disk(tmp_path):
    t = FleetTable.open(tmp_path / "t", create=True)
    later = datetime(2026, 11, 22, tzinfo=UTC)
    with t.writer():
        t.replace(METRICS)
        t.replace([{**METRICS[0], "scanned_at": later, "usd_per_month": 5000.0}])
    raw = t.raw().collect()
    assert raw.height == 3 and sorted(raw["key"]) == ["mn", "ms", "mw"]
    assert raw.filter(pl.col("key") == "mw")["usd_per_month"].to_list() == [5000.0]
    # another window of the same workload: another key, both kept
    with t.writer():
        t.replace([metrics_row("mw2", "ml/web", 27, 168, 4, scanned_at=later)])
    assert t.raw().collect().height == 4


def test_scanned_rows_say_their_source_and_level(tmp_path):
    """Two sample runs of the repository (samples/runs): their diagnosis' numbers in words."""
    from tests.conftest import REPO, cli

    runs = [REPO / "samples" / "runs" / n for n in ("train_dataloader-h100", "train_compute-h100")]
    res = cli("fleet", "scan", *runs, "--table", tmp_path / "t", "--workers", "1")
    assert res.returncode == 0, res.stderr
    df = FleetTable(tmp_path / "t").rows().collect().sort("job")
    assert df.select("job", "source", "schema_version", "bound", "confidence",
                     "confidence_level", "sizing_verdict", "recommended").rows() == [
        ("train_compute-h100", "trace", 2, "compute", 0.69, "medium", "right-sized",
         "1 x H100 SXM"),
        # 0.81: its Optimizer.step ranges are recorded host time, not nothing (issue 38)
        ("train_dataloader-h100", "trace", 2, "dataloader", 0.81, "high", "over-provisioned",
         "1 x L4")]
    assert df["window_start"].null_count() == df["usd_per_month"].null_count() == 2


def test_the_month_is_fleet_metrics_month():
    from rightsize.analyzers.fleet_metrics.thresholds import HOURS_PER_MONTH as METRICS_MONTH
    from rightsize.fleet.schema import HOURS_PER_MONTH

    assert HOURS_PER_MONTH == METRICS_MONTH == 730.0
