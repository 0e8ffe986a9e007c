"""`rightsize fleet scan`: one row per job, bad inputs as rows, incremental re-scans, jobs of
ranks grouped, labels, one writer at a time, and the table's atomic writes."""

from __future__ import annotations

import gzip
import json
import os
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from rightsize.analyzers.document import Document
from rightsize.engine import EngineOptions, Failed
from rightsize.fleet.analyze import Task
from rightsize.fleet.discover import Job
from rightsize.fleet.scan import ScanOptions, _row, scan
from rightsize.fleet.schema import SCHEMA
from rightsize.fleet.table import FleetTable
from rightsize.pipeline import analyze_document
from tests.conftest import SAMPLES, cli
from tests.fleet.jobs import BASE_NS, bad_inputs, fleet, trace, write

ONE = ScanOptions(engine=EngineOptions(workers=1))


def rows(table: Path) -> pl.DataFrame:
    return FleetTable(table).rows().collect().sort("job")


def test_a_row_per_job_and_a_row_per_bad_input(tmp_path):
    fleet(tmp_path / "in", 6)
    reasons = bad_inputs(tmp_path / "in" / "bad")
    res = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "t", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "9 jobs found, 0 already in the table, 9 analyzed" in res.stderr
    assert "6 ok, 3 bad inputs, 0 failed" in res.stderr
    df = rows(tmp_path / "t")
    assert df.height == 9 and df.schema == SCHEMA
    bad = df.filter(pl.col("status") == "bad-input")
    assert sorted(bad["job"]) == sorted(f"bad/{name}" for name in reasons)
    for job, reason in zip(bad["job"], bad["reason"], strict=True):
        name = job.removeprefix("bad/")
        assert reason.startswith(str(tmp_path / "in" / "bad" / name) + ": " + reasons[name])
        assert "\n" not in reason
    ok = df.filter(pl.col("status") == "ok")
    assert sorted(ok["job"]) == sorted(f"team-{'vision' if i % 2 == 0 else 'nlp'}/job{i:03d}"
                                       ".pt.trace.json.gz" for i in range(6))
    ok = ok.sort("paths")
    ok = ok.with_columns(pl.col("job").str.split("/").list.last().alias("name")).sort("name")
    # recorded on the trace's own clock: BASE_NS + i % 3 days, the first event 1 ms in
    assert ok["recorded_at_source"].unique().to_list() == ["trace"]
    assert [d.isoformat() for d in ok["recorded_at"].dt.date()] == [
        "2023-11-14", "2023-11-15", "2023-11-16"] * 2
    assert ok["step_ms"].to_list() == [1.0, 1.5, 2.0, 2.5, 1.0, 1.5]  # 1 ms steps, scaled
    assert ok["gpu"].to_list() == ["H100 SXM", "A100 80GB SXM"] * 3
    assert ok["gpus"].to_list() == [1] * 6 and ok["kind"].unique().to_list() == ["file"]
    # partitioned by the recorded day (Hive layout)
    days = sorted(p.name for p in (tmp_path / "t" / "table").iterdir())
    assert days[:3] == ["day=2023-11-14", "day=2023-11-15", "day=2023-11-16"]
    # the stored document is the analysis of the file
    first = ok.row(0, named=True)
    with gzip.open(tmp_path / "t" / first["document"], "rt") as fh:
        stored = Document.from_json(json.load(fh))
    assert stored == analyze_document([first["paths"][0]])


def test_a_rescan_analyzes_only_what_is_new_or_changed(tmp_path):
    files = fleet(tmp_path / "in", 4)
    table = FleetTable.open(tmp_path / "t", create=True)
    first = scan(table, [str(tmp_path / "in")], ONE)
    assert (first.jobs, first.analyzed, first.files_read) == (4, 4, 4)
    before = {p: p.stat().st_mtime_ns for p in table.files()}
    again = scan(table, [str(tmp_path / "in")], ONE)
    assert (again.jobs, again.known, again.analyzed, again.files_read) == (4, 4, 0, 0)
    assert {p: p.stat().st_mtime_ns for p in table.files()} == before  # nothing written
    write(files[1], trace(day=1, scale=3.0))  # changed content
    write(tmp_path / "in" / "new.json", trace(day=2))  # a new job
    third = scan(table, [str(tmp_path / "in")], ONE)
    assert (third.jobs, third.known, third.analyzed, third.files_read) == (5, 3, 2, 2)
    df = rows(tmp_path / "t")
    assert df.height == 6  # the changed file's earlier content keeps its row (history)
    assert sorted(df.filter(pl.col("job") == f"team-nlp/{files[1].name}")["step_ms"]) == [1.5, 3.0]


def test_the_same_content_twice_is_one_job(tmp_path):
    doc = trace()
    write(tmp_path / "in" / "a.json", doc)
    write(tmp_path / "in" / "copy" / "a.json", doc)
    summary = scan(FleetTable.open(tmp_path / "t", create=True), [str(tmp_path / "in")], ONE)
    assert (summary.jobs, summary.analyzed) == (1, 1)


def test_ranks_of_one_job_are_one_row(tmp_path):
    for r in (0, 1):
        write(tmp_path / "in" / "job" / f"rank{r}.json", trace(rank=r, world=2))
    # two recordings of rank 0 a day apart, and a folder with rank 0 twice at once
    write(tmp_path / "in" / "runs" / "rank0.a.json", trace(day=0, scale=1.2, rank=0, world=2))
    write(tmp_path / "in" / "runs" / "rank0.b.json", trace(day=1, rank=0, world=2))
    write(tmp_path / "in" / "dup" / "r0.json", trace(rank=0, world=2))
    write(tmp_path / "in" / "dup" / "r0-again.json", trace(scale=1.1, rank=0, world=2))
    scan(FleetTable.open(tmp_path / "t", create=True), [str(tmp_path / "in")], ONE)
    df = rows(tmp_path / "t")
    job = df.filter(pl.col("kind") == "ranks").row(0, named=True)
    assert job["job"] == "job" and job["gpus"] == 2 and job["files"] == 2
    assert [Path(p).name for p in job["paths"]] == ["rank0.json", "rank1.json"]
    singles = df.filter(pl.col("kind") == "file")
    assert sorted(singles["job"]) == ["dup/r0-again.json", "dup/r0.json", "runs/rank0.a.json",
                                      "runs/rank0.b.json"]
    dup = singles.filter(pl.col("job") == "dup/r0.json").row(0, named=True)
    assert dup["reason"] == (f"rank 0 of world size 2 appears twice in {tmp_path / 'in' / 'dup'}"
                             " in one recording: its traces are analyzed one at a time")


def test_labels_from_patterns_and_from_a_run_directory(tmp_path):
    fleet(tmp_path / "in", 2)
    labels = tmp_path / "labels.csv"
    labels.write_text("pattern,team,project\n*/team-vision/*,vision,resnet\n*/team-nlp/*,nlp,\n")
    run = SAMPLES / "runs" / "train_dataloader-cpu"
    res = cli("fleet", "scan", tmp_path / "in", run, "--table", tmp_path / "t",
              "--labels", labels, "--workers", "1")
    assert res.returncode == 0, res.stderr
    df = rows(tmp_path / "t").select("job", "kind", "team", "project", "labels_source",
                                     "recorded_at_source", "run_gpu_hours", "gpus")
    assert df.rows() == [
        ("team-nlp/job001.pt.trace.json.gz", "file", "nlp", None, "labels-file", "trace", None,
         1),
        ("team-vision/job000.pt.trace.json.gz", "file", "vision", "resnet", "labels-file",
         "trace", None, 1),
        ("train_dataloader-cpu", "run", None, "train_dataloader", "command", "manifest", None,
         0),  # a CPU run: no GPU, so no GPU-hours
    ]


def test_bad_labels_file_and_bad_paths_are_one_line_errors(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("path,team\nx,y\n")
    fleet(tmp_path / "in", 1)
    res = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "t", "--labels", labels)
    assert res.returncode == 1
    assert res.stderr == (f"rightsize: error: {labels}: the first line must be the header "
                          "pattern,team,project (got 'path,team')\n")
    res = cli("fleet", "scan", tmp_path / "nope", "--table", tmp_path / "t")
    assert (res.returncode, res.stderr) == (
        1, f"rightsize: error: {tmp_path / 'nope'}: no such file or directory\n")
    res = cli("fleet", "scan", str(tmp_path / "*.nothing"), "--table", tmp_path / "t")
    assert res.returncode == 1 and "the pattern matches nothing" in res.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    res = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "other")
    assert res.returncode == 1
    assert res.stderr == (f"rightsize: error: {tmp_path / 'other'} is not empty and not a fleet "
                          "table (no FLEET.json): pick another --table folder\n")


def test_one_writer_at_a_time(tmp_path):
    fleet(tmp_path / "in", 1)
    table = FleetTable.open(tmp_path / "t", create=True)
    with table.writer():
        res = cli("fleet", "scan", tmp_path / "in", "--table", tmp_path / "t")
    assert res.returncode == 1
    assert res.stderr == (f"rightsize: error: {tmp_path / 't'}: another scan (pid {os.getpid()})"
                          " is writing this table; wait for it to finish\n")
    assert table.files() == []


def test_a_failed_job_is_a_row_and_retry_failed_analyzes_it_again(tmp_path):
    [f] = fleet(tmp_path / "in", 1)
    table = FleetTable.open(tmp_path / "t", create=True)
    from rightsize.fleet.keys import FileCache, job_key

    job = Job(f.name, "file", (str(f),), (str(f),))
    key = job_key(job, FileCache())
    row = _row(table, Task(key, job), Failed(0, "WorkerDied", "its worker process died"))
    assert (row["status"], row["reason"]) == ("failed", "WorkerDied: its worker process died")
    table.append([row])
    assert scan(table, [str(f)], ONE).analyzed == 0  # a failed row is a row: not redone
    again = scan(table, [str(f)], ScanOptions(engine=EngineOptions(workers=1),
                                              retry_failed=True))
    assert again.analyzed == again.ok == 1
    assert rows(tmp_path / "t")["status"].to_list() == ["ok"]  # the latest scan's row


def test_an_interrupted_merge_is_finished_by_the_next_writer(tmp_path, monkeypatch):
    fleet(tmp_path / "in", 4, days=1)
    table = FleetTable.open(tmp_path / "t", create=True)
    scan(table, [str(tmp_path / "in")], ScanOptions(engine=EngineOptions(workers=1),
                                                   batch_rows=1))
    assert len(table.files()) == 4
    real_unlink = Path.unlink

    def die(self, *a, **k):  # the process dies after the merged file is in place
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "unlink", die)
    with pytest.raises(KeyboardInterrupt):
        table.compact(at_files=2)
    monkeypatch.setattr(Path, "unlink", real_unlink)
    raw = table.raw().collect()
    assert raw.height == 8 and raw["key"].n_unique() == 4  # parts and the merged file
    assert table.rows().collect().height == 4  # readers drop the key seen twice
    with table.writer():  # the next scan finishes the merge first
        pass
    raw = table.raw().collect()
    assert raw.height == 4 and raw["key"].n_unique() == 4
    assert [p.name.startswith("compact-") for p in table.files()] == [True]
    assert not list((tmp_path / "t").rglob(".compact-*"))


def test_rows_read_with_a_hive_reader(tmp_path):
    fleet(tmp_path / "in", 3)
    scan(FleetTable.open(tmp_path / "t", create=True), [str(tmp_path / "in")], ONE)
    df = pl.read_parquet(tmp_path / "t" / "table" / "**" / "*.parquet", hive_partitioning=True)
    assert df.height == 3
    assert sorted(df["day"].cast(pl.Date).to_list()) == [date(2023, 11, 14), date(2023, 11, 15),
                                                          date(2023, 11, 16)]
    assert BASE_NS  # the days follow from tests.tracebuilder.BASE_NS (2023-11-14 22:13:20)


def test_a_pipe_on_the_command_line_is_refused_and_a_vanished_file_is_a_row(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    res = cli("fleet", "scan", fifo, "--table", tmp_path / "t")
    assert (res.returncode, res.stderr) == (
        1, f"rightsize: error: {fifo}: not a regular file (a pipe, device or socket)\n")
    from rightsize.fleet.keys import FileCache, job_key

    gone = tmp_path / "gone.json"
    job = Job("x/gone.json", "file", (str(gone),), (str(gone),))
    cache = FileCache()
    assert cache.probe(gone).problem == "cannot read: No such file or directory"
    key = job_key(job, cache)
    table = FleetTable.open(tmp_path / "t2", create=True)
    from rightsize.fleet.analyze import analyze_job

    res2 = analyze_job(Task(key, job))
    assert res2.row["status"] == "bad-input" and res2.document is None
    assert res2.row["reason"].startswith(str(gone))
    assert table.files() == []
