"""One pipeline: every front end reads, analyzes and reduces a new format the same way.

A toy trace reader, registered exactly as docs/formats.md prescribes (its module and one
registry entry), reads two ranks of one job. Every front end -- ``rightsize analyze`` and
``report``, :func:`rightsize.analyze`, serve's worker function, ``fleet scan`` and
``compare`` -- gives both ranks, the job section, and inputs entries with the keys the reader
gave (rank and events; no ``samples: null``). Before there was one pipeline, ``analyze`` dropped
rank 0 without a word and every front end wrote ``samples: null`` for a format it did not know.
"""

from __future__ import annotations

import gzip
import importlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rightsize.traces import registry
from tests.toy_readers import TOY_TRACE_MAGIC, toy_fixture  # noqa: F401 - the fixture "toy"


def _toy_rank(folder: Path, rank: int) -> Path:
    """Rank ``rank`` of a two-step job (1 ms steps): an op and a kernel per step; rank 1's
    kernels run 100 us longer."""
    kernel_us = 600 + 100 * rank
    path = folder / f"rank{rank}.toy"
    path.write_text(f"{TOY_TRACE_MAGIC} rank={rank} world_size=2 backend=nccl\n"
                    "step,ProfilerStep#1,1000,1000\nstep,ProfilerStep#2,2000,1000\n"
                    "op,aten::mm,1100,100\nop,aten::mm,2100,100\n"
                    f"kernel,gemm,1200,{kernel_us}\nkernel,gemm,2200,{kernel_us}\n")
    return path


@pytest.fixture
def job(tmp_path, monkeypatch, toy):
    """The toy trace reader registered (before Kineto, which takes any JSON) and a folder with
    the two ranks of one job."""
    reader = importlib.import_module(toy).TRACE_READER
    monkeypatch.setattr(registry, "READERS", (*registry.READERS[:-1], reader,
                                              registry.READERS[-1]))
    folder = tmp_path / "job"
    folder.mkdir()
    return folder, [_toy_rank(folder, 0), _toy_rank(folder, 1)]


def _check(doc: dict, paths: list[Path], shown: list[str] | None = None) -> None:
    """Both ranks, the job of the two, and the inputs entries with the reader's keys."""
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["job"] is not None and doc["job"]["rank_count"] == 2
    # each rank's compute share is its kernel time per step: 600 and 700 us of 1 ms steps
    assert [(r["rank"], r["shares_ms"]["compute"]) for r in doc["job"]["ranks"]] == [
        (0, 0.6), (1, 0.7)]
    names = shown or [str(p) for p in paths]
    assert doc["inputs"] == [
        {"path": names[i], "format": "toy-trace", "bytes": p.stat().st_size, "rank": i,
         "events": 6} for i, p in enumerate(paths)]


def _invoke(*args: str) -> str:
    from rightsize.cli import cli

    res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_cli_analyze(job):
    _, paths = job
    _check(json.loads(_invoke("analyze", *paths, "--format", "json", "--no-report", "-q")),
           paths)


def test_cli_report(job):
    _, paths = job
    _check(json.loads(_invoke("report", *paths, "--format", "json", "-q")), paths)


def test_python_api(job):
    import rightsize

    _, paths = job
    a = rightsize.analyze(*paths)
    _check(a.to_json(), paths)
    assert [r.rank for r in a.ranks] == [0, 1] and a.ranks[1].kernels.height == 2


def test_serve_worker(job, tmp_path):
    from rightsize.serve.worker import ANALYSIS_JSON, analyze_run

    _, paths = job
    run = tmp_path / "run"
    summary = analyze_run(str(run), [(str(p), p.name) for p in paths])
    assert "error" not in summary, summary
    _check(json.loads((run / ANALYSIS_JSON).read_text()), paths, [p.name for p in paths])


def test_fleet_scan(job, tmp_path):
    from rightsize.engine import EngineOptions
    from rightsize.fleet.scan import ScanOptions, scan
    from rightsize.fleet.table import FleetTable

    folder, paths = job
    table = FleetTable.open(tmp_path / "t", create=True)
    summary = scan(table, [str(folder)], ScanOptions(engine=EngineOptions(workers=1)))
    assert (summary.jobs, summary.analyzed) == (1, 1)  # the two ranks grouped as one job
    row = table.rows().collect().row(0, named=True)
    assert (row["kind"], row["status"], row["gpus"]) == ("ranks", "ok", 2)
    with gzip.open(tmp_path / "t" / row["document"], "rt") as fh:
        _check(json.load(fh), [p.absolute() for p in paths])


def test_compare(job):
    from rightsize.cli.compare import load_side

    folder, paths = job
    side = load_side(folder)  # a directory of traces: the reader's suffix finds them
    _check(side.document.to_json(), paths)
    out = json.loads(_invoke("compare", folder, folder, "--format", "json", "-q"))
    assert (out["a"]["source"], out["a"]["steps"]) == ("trace", 2)


def test_a_toy_rank_beside_a_kineto_rank(job, tmp_path):
    """The issue's case: rank 0 in the new format, rank 1 a Kineto trace (``analyze`` read the
    Kineto trace alone, as the only trace it knew)."""
    from tests.tracebuilder import TraceBuilder, two_step_trace

    _, paths = job
    b = two_step_trace(TraceBuilder())
    b.extra["distributedInfo"]["rank"] = 1
    kineto = b.write(tmp_path / "rank1.json")
    doc = json.loads(_invoke("analyze", paths[0], kineto, "--format", "json", "--no-report",
                             "-q"))
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["job"]["rank_count"] == 2
    assert [(i["format"], i["rank"]) for i in doc["inputs"]] == [("toy-trace", 0),
                                                                 ("kineto", 1)]


def test_a_reader_without_a_memory_need_is_said_to_escape_the_budget(job):
    from rightsize.cli import cli

    _, paths = job
    res = CliRunner().invoke(cli, ["analyze", str(paths[0]), "--memory-budget", "1G", "-q",
                                   "--no-report", "--format", "json"])
    assert res.exit_code == 0
    assert res.stderr.splitlines() == [
        (f"rightsize: warning: {paths[0]}: its reader declares no memory need, so the memory "
        "budget (1.00 GB) cannot be kept for it: it is read whole")]
