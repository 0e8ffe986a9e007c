"""A scan killed with SIGKILL resumes with no duplicate and no missing row.

The real CLI runs in a subprocess (its own process group, so its pool workers die with it) and
is killed twice while it writes, each row in its own file (``--batch-rows 1``); a third run
finishes. The table then holds every job exactly once, the same keys and statuses as a scan that
was never interrupted, and no temporary file.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from rightsize.fleet.table import FleetTable
from tests.conftest import cli
from tests.fleet.jobs import bad_inputs, fleet, kill_group, rightsize_popen

JOBS = 60


def _row_files(table: Path) -> int:
    return len(list((table / "table").glob("day=*/*.parquet")))


def _kill_after(table: Path, rows: int, workers: int) -> None:
    """Start a scan and SIGKILL it once ``rows`` row files exist (bounded: 120 s)."""
    proc = rightsize_popen("fleet", "scan", table.parent / "in", "--table", table,
                           "--batch-rows", "1", "--workers", workers, "-q")
    deadline = time.monotonic() + 120
    try:
        while _row_files(table) < rows:
            assert proc.poll() is None, f"the scan ended before it was killed: {proc.stderr}"
            assert time.monotonic() < deadline, "no rows within 120 s"
            time.sleep(0.01)
    finally:
        kill_group(proc)


def _raw(table: Path) -> pl.DataFrame:
    return FleetTable(table).raw().collect()


def test_a_scan_killed_twice_resumes_without_duplicates_or_gaps(tmp_path):
    fleet(tmp_path / "in", JOBS - 3)
    bad_inputs(tmp_path / "in" / "bad")
    table = tmp_path / "t"
    _kill_after(table, 3, workers=1)
    first = _raw(table)
    assert 3 <= first.height < JOBS and first["key"].n_unique() == first.height
    _kill_after(table, _row_files(table) + 5, workers=2)
    second = _raw(table)
    assert first.height + 5 <= second.height < JOBS
    assert second["key"].n_unique() == second.height  # no key twice, even mid-run
    res = cli("fleet", "scan", tmp_path / "in", "--table", table, "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert (f"{JOBS} jobs found, {second.height} already in the table, "
            f"{JOBS - second.height} analyzed") in res.stderr
    done = _raw(table)
    assert done.height == JOBS and done["key"].n_unique() == JOBS
    assert not list(table.rglob(".*.tmp"))
    # the same table as a scan nobody interrupted
    clean = tmp_path / "clean"
    res = cli("fleet", "scan", tmp_path / "in", "--table", clean, "--workers", "1")
    assert res.returncode == 0, res.stderr
    cols = ["key", "job", "status", "reason", "step_ms", "bound", "recorded_at"]
    assert done.select(cols).sort("key").equals(_raw(clean).select(cols).sort("key"))
    assert done["status"].value_counts().sort("status").rows() == [("bad-input", 3),
                                                                   ("ok", JOBS - 3)]
    # every ok row's document is in place
    for doc in done.filter(pl.col("status") == "ok")["document"]:
        assert (table / doc).is_file()
