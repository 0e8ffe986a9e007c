"""`rightsize fleet scan` of object-store URLs through fsspec (docs/fleet.md, "Object stores").

fsspec's own ``memory://`` filesystem, filled here (a real fsspec implementation, no network;
the scan in this process, one worker, which sees the same memory), and ``file://`` through the
real CLI with two spawned workers, each downloading its job. Checked: the jobs and rows as a
local scan of the same files gives them (the same document columns), URLs in the rows and the
documents, keys from the listing (a re-scan reads and analyzes nothing; a rewritten object is a
new job), keys from the bytes where the store gives neither ETag nor time, the download cap,
names that would leave the temporary folder, no temporary folder left behind, and one-line
errors without fsspec, without the protocol's package, for an unknown protocol or nothing there.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

from rightsize.engine import EngineOptions
from rightsize.fleet.analyze import read_document
from rightsize.fleet.discover import Job
from rightsize.fleet.keys import FileCache
from rightsize.fleet.remote import (
    TMP_PREFIX,
    RemoteError,
    RemoteFile,
    RemoteFiles,
    RemoteJob,
    fetch,
    tmp_folder,
)
from rightsize.fleet.scan import ScanOptions, scan
from rightsize.fleet.table import FleetTable
from tests.conftest import SAMPLES, cli
from tests.fleet.jobs import trace

fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed "
                                              "(pip install 'rightsize[fsspec]')")

RUN = SAMPLES / "runs" / "train_dataloader-cpu"
ONE = ScanOptions(engine=EngineOptions(workers=1))
# every column the document gives a row (tests/serve/test_serve_fleet.py lists the same)
DOCUMENT_COLUMNS = ("device", "gpu", "gpu_reported", "gpus", "nodes", "steps", "step_ms",
                    "bound", "confidence", "compute_pct", "memory_pct", "pcie_pct",
                    "dataloader_pct", "communication_pct", "host_pct", "idle_pct",
                    "gpu_util_pct", "sm_efficiency_pct", "peak_memory_bytes", "precision",
                    "sizing_verdict", "recommended_gpu", "sizing_reason", "usd_per_1k_steps",
                    "rules", "run_gpu_hours", "team", "project", "labels_source")


def corpus() -> dict[str, bytes]:
    """Relative path -> bytes: one trace, the two ranks of one job, a run directory (with a
    report rightsize wrote into it, which its key does not cover), a bad input, a file that is
    not an input name, a hidden folder."""
    files = {"team/one.pt.trace.json": json.dumps(trace(day=0)).encode(),
             "team/empty.json": b"", "team/readme.txt": b"notes",
             ".hidden/x.json": b"{}"}
    for r in range(2):
        files[f"dist/rank{r}.json"] = json.dumps(trace(day=1, rank=r, world=2)).encode()
    for f in sorted(RUN.rglob("*")):
        if f.is_file():
            files[f"runs/{RUN.name}/{f.relative_to(RUN)}"] = f.read_bytes()
    return files


@pytest.fixture()
def memory():
    """A fresh bucket in fsspec's memory filesystem, removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/bucket-{os.getpid()}-{id(fs)}"
    for rel, data in corpus().items():
        fs.pipe(f"{root}/{rel}", data)
    yield fs, root
    fs.rm(root, recursive=True)


def table_rows(table: Path) -> pl.DataFrame:
    return FleetTable(table).rows().collect().sort("job")


def local_rows(tmp: Path) -> pl.DataFrame:
    """The same corpus scanned from a local folder."""
    for rel, data in corpus().items():
        (tmp / "local" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "local" / rel).write_bytes(data)
    scan(FleetTable.open(tmp / "local-table", create=True), [str(tmp / "local")], ONE)
    return table_rows(tmp / "local-table")


def our_tmp_folders() -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}{os.getpid()}-*"))


def test_memory_urls_give_the_rows_a_local_scan_gives(memory, tmp_path):
    fs, root = memory
    table = FleetTable.open(tmp_path / "t", create=True)
    summary = scan(table, [f"memory://{root}"], ONE)
    assert (summary.jobs, summary.analyzed, summary.ok, summary.bad_input, summary.not_inputs) \
        == (4, 4, 3, 1, 2)  # readme.txt and the hidden folder's file are left out
    # keys from the listing: only the heads of the files named .json (the two ranks,
    # one.pt.trace.json, empty.json) were read, for their ranks; nothing else
    assert summary.files_read == 4
    df = table_rows(tmp_path / "t")
    url = f"memory://{root}"
    assert df.select("job", "kind", "paths", "status").rows() == [
        ("dist", "ranks", [f"{url}/dist/rank0.json", f"{url}/dist/rank1.json"], "ok"),
        ("team/empty.json", "file", [f"{url}/team/empty.json"], "bad-input"),
        ("team/one.pt.trace.json", "file", [f"{url}/team/one.pt.trace.json"], "ok"),
        (RUN.name, "run", [f"{url}/runs/{RUN.name}"], "ok")]
    assert df["reason"].to_list()[1] == f"{url}/team/empty.json: the file is empty"
    files = corpus()
    run_bytes = sum(len(d) for rel, d in files.items() if rel.startswith("runs/")
                    and rel.split("/")[2] in ("manifest.json", "traces", "samples"))
    assert df["bytes"].to_list() == [len(files["dist/rank0.json"]) * 2, 0,
                                     len(files["team/one.pt.trace.json"]), run_bytes]
    assert df["recorded_at_source"].to_list() == ["trace", "mtime", "trace", "manifest"]
    created = fs.info(f"{root}/team/empty.json")["created"]
    assert df["recorded_at"].to_list()[1].timestamp() == pytest.approx(created.timestamp())

    # the same analysis as the local scan of the same files, column for column
    local = local_rows(tmp_path)
    assert local["job"].to_list() == df["job"].to_list()
    for column in DOCUMENT_COLUMNS:
        assert df[column].to_list() == local[column].to_list(), column
    assert df.filter(pl.col("status") == "ok")["recorded_at"].to_list() == \
        local.filter(pl.col("status") == "ok")["recorded_at"].to_list()

    # the documents name the URLs, never the worker's temporary folder
    doc = read_document(tmp_path / "t" / df.row(0, named=True)["document"])
    assert [i["path"] for i in doc["inputs"]] == [f"{url}/dist/rank0.json",
                                                 f"{url}/dist/rank1.json"]
    run_doc = gzip.decompress((tmp_path / "t" / df.row(3, named=True)["document"]).read_bytes())
    assert f"{url}/runs/{RUN.name}/traces/".encode() in run_doc
    assert TMP_PREFIX.encode() not in run_doc and tempfile.gettempdir().encode() not in run_doc
    assert our_tmp_folders() == []

    # a re-scan reads nothing and analyzes nothing; an object written again is a new job
    again = scan(table, [f"memory://{root}"], ONE)
    assert (again.known, again.analyzed, again.files_read) == (4, 0, 0)
    fs.pipe(f"{root}/team/one.pt.trace.json", json.dumps(trace(day=2, tag="v2")).encode())
    third = scan(table, [f"memory://{root}/team/*.json"], ONE)
    assert (third.jobs, third.known, third.analyzed) == (2, 1, 1)


def test_the_download_cap_and_names_that_would_leave_the_folder(memory, tmp_path):
    _, root = memory
    table = FleetTable.open(tmp_path / "t", create=True)
    cap = ScanOptions(engine=EngineOptions(workers=1), max_download_bytes=10_000)
    summary = scan(table, [f"memory://{root}/dist", f"memory://{root}/team"], cap)
    df = table_rows(tmp_path / "t")
    size = len(corpus()["dist/rank0.json"]) * 2
    assert size > 10_000 > len(corpus()["team/one.pt.trace.json"])
    assert df.select("job", "status").rows() == [("dist", "bad-input"),
                                                 ("team/empty.json", "bad-input"),
                                                 ("team/one.pt.trace.json", "ok")]
    assert df["reason"][0] == (f"memory://{root}/dist/rank0.json: the job's files are "
                               f"{size:,} bytes, over the download cap of 10,000 bytes "
                               "(--max-download-mb)")
    assert summary.bad_input == 2
    escape = Job("r", "run", (f"memory://{root}/runs/r",),
                 (f"memory://{root}/runs/r/traces/../../../../etc/passwd",))
    with pytest.raises(RemoteError, match="not a plain path inside its run directory"):
        fetch(escape, RemoteJob((1,), None, 100), tmp_path)
    assert not (tmp_path.parent / "etc").exists()


def test_keys_from_etag_time_or_bytes(memory):
    _, root = memory
    url = f"memory://{root}/team/one.pt.trace.json"
    data = corpus()["team/one.pt.trace.json"]
    by_bytes = RemoteFiles([RemoteFile(url, len(data), None, None)], FileCache())
    assert by_bytes.digest(url) == hashlib.sha256(data).hexdigest()  # the content's own
    assert by_bytes.read == 1
    tagged = [RemoteFiles([RemoteFile(url, len(data), 5, etag)], FileCache()).digest(url)
              for etag in ("abc", "abc", "abd")]
    timed = [RemoteFiles([RemoteFile(url, len(data), t, None)], FileCache()).digest(url)
             for t in (5, 5, 6)]
    assert tagged[0] == tagged[1] != tagged[2] and timed[0] == timed[1] != timed[2]
    assert tagged[0] != timed[0] != by_bytes.digest(url)


def test_folders_of_dead_workers_are_swept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    left = Path(tempfile.gettempdir()) / f"{TMP_PREFIX}{dead.pid}-x"
    (left / "0").mkdir(parents=True)
    with tmp_folder() as tmp:
        assert Path(tmp).name.startswith(f"{TMP_PREFIX}{os.getpid()}-")
        assert not left.exists()
    assert not Path(tmp).exists()


def test_file_urls_through_the_cli_with_two_workers(tmp_path):
    for rel, data in corpus().items():
        (tmp_path / "store" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "store" / rel).write_bytes(data)
    url = (tmp_path / "store").as_uri()
    res = cli("fleet", "scan", url, "--table", tmp_path / "t", "--workers", "2")
    assert res.returncode == 0, res.stderr
    assert "4 jobs found, 0 already in the table, 4 analyzed" in res.stderr
    assert "3 ok, 1 bad inputs, 0 failed" in res.stderr
    df = table_rows(tmp_path / "t")
    assert df["paths"].to_list()[2] == [f"{url}/team/one.pt.trace.json"]
    mtime = (tmp_path / "store" / "team" / "empty.json").stat().st_mtime
    assert df["recorded_at"].to_list()[1].timestamp() == pytest.approx(mtime)
    res = cli("fleet", "scan", tmp_path / "store", "--table", tmp_path / "local", "--workers", "1")
    assert res.returncode == 0, res.stderr
    local = table_rows(tmp_path / "local")
    for column in DOCUMENT_COLUMNS:
        assert df[column].to_list() == local[column].to_list(), column
    res = cli("fleet", "scan", url, "--table", tmp_path / "t", "--workers", "2")
    assert "4 jobs found, 4 already in the table, 0 analyzed" in res.stderr


def one_line_error(*args: str, block_fsspec: bool = False) -> str:
    code = ("import sys\n" + ("sys.modules['fsspec'] = None\n" if block_fsspec else "")
            + "from rightsize.cli import main\nmain(sys.argv[1:])")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_one_line_errors(tmp_path):
    table = str(tmp_path / "t")
    assert one_line_error("fleet", "scan", "memory://b/x", "--table", table,
                          block_fsspec=True) == (
        "rightsize: error: memory://b/x: object-store URLs need fsspec: pip install "
        "'rightsize[fsspec]' (and the store's package: s3fs for s3://, gcsfs for gs://)")
    if importlib.util.find_spec("s3fs") is None:
        assert one_line_error("fleet", "scan", "s3://bucket/traces/", "--table", table) == \
            "rightsize: error: s3://bucket/traces/: Install s3fs to access S3"
    assert one_line_error("fleet", "scan", "zzz://bucket/x", "--table", table) == \
        "rightsize: error: zzz://bucket/x: Protocol not known: zzz"
    assert one_line_error("fleet", "scan", "memory://nothing/here", "--table", table) == \
        "rightsize: error: memory://nothing/here: no such file or folder"
    assert one_line_error("fleet", "scan", f"{tmp_path.as_uri()}/*.json", "--table", table) == \
        f"rightsize: error: {tmp_path.as_uri()}/*.json: the pattern matches nothing"
