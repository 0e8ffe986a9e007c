"""The real `rightsize analyze` command in a subprocess: contract, output files, bad input."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest

from tests.conftest import cli, shared_path
from tests.tracebuilder import two_step_trace

CONTRACT_METRICS = {"gpu_util_pct", "sm_efficiency_pct", "achieved_occupancy_pct",
                    "tensor_core_kernel_pct", "breakdown_ms", "hta", "peak_memory_bytes"}
BREAKDOWN = {"kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec",
             "other", "step"}


def rightsize(*args, cwd=None):
    """The real CLI in a subprocess, by default in a fresh directory (reports land there),
    removed afterwards: a test that looks at what was written passes its own ``cwd``."""
    if cwd is not None:
        return cli(*args, cwd=cwd)
    with tempfile.TemporaryDirectory(prefix="rightsize-cli-") as scratch:
        return cli(*args, cwd=scratch)


@pytest.fixture
def trace_file(tmp_path):
    return two_step_trace().write(tmp_path / "two.pt.trace.json")


def test_json_contract_on_hand_built_trace(trace_file):
    res = rightsize("analyze", trace_file, "--format", "json", "-q")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1
    assert doc["inputs"][0]["path"] == str(trace_file) and doc["inputs"][0]["format"] == "kineto"
    [dev] = doc["devices"]
    assert (dev["index"], dev["name"], dev["sm_count"], dev["memory_bytes"]) == (
        0, "NVIDIA H100 80GB HBM3", 132, 85018279936)
    assert dev["metrics"]["gpu_util_pct"] == 42.5
    assert doc["steps"] == {**doc["steps"], "count": 2, "mean_ms": 1.0, "min_ms": 1.0,
                            "max_ms": 1.0}
    m = doc["metrics"]
    assert CONTRACT_METRICS <= m.keys()
    assert m["breakdown_ms"] == {"kernel": 0.35, "memcpy": 0.025, "memset": 0.005,
                                 "communication": 0.05, "runtime": 0.015, "dataloader": 0.1,
                                 "cpu_exec": 0.06, "other": 0.395, "step": 1.0}
    assert (m["sm_efficiency_pct"], m["achieved_occupancy_pct"]) == (31.25, 33.3333)
    assert m["tensor_core_kernel_pct"] == 0.0
    assert m["hta"]["idle_pct"] == 0.0 and m["hta"]["compute_pct"] == 72.7273
    assert m["peak_memory_bytes"] == 5000


def test_unknown_metrics_are_null_not_zero(tmp_path):
    path = shared_path("traces", "kineto", "hta-cpu_only-rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    res = rightsize("analyze", path, "--format", "json", "-q")
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout)["metrics"]
    assert m["gpu_util_pct"] is None and m["sm_efficiency_pct"] is None
    assert m["hta"] is None and m["peak_memory_bytes"] is None
    assert m["breakdown_ms"]["communication"] > 0  # gloo collectives on the CPU


def test_text_output(trace_file):
    res = rightsize("analyze", trace_file)
    assert res.returncode == 0, res.stderr
    assert "GPU: utilization 42.5%" in res.stdout
    assert "dataloader" in res.stdout
    # Quick work on a non-terminal prints no progress: only where the report went and what next.
    lines = res.stderr.splitlines()
    assert lines[0] == "report: two.pt.trace.rightsize.html" and lines[1].startswith("next: ")


def test_output_file_is_never_overwritten_without_force(tmp_path, trace_file):
    out = tmp_path / "a.json"
    out.write_text("precious")
    res = rightsize("analyze", trace_file, "--format", "json", "-o", out)
    assert res.returncode == 1 and "already exists; pass --force" in res.stderr
    assert out.read_text() == "precious"
    res = rightsize("analyze", trace_file, "--format", "json", "-o", out, "--force")
    assert res.returncode == 0 and json.loads(out.read_text())["schema_version"] == 1
    assert f"report: {tmp_path / 'a.report.html'}" in res.stderr
    assert (tmp_path / "a.report.html").stat().st_size > 10_000


def test_directory_of_rank_traces(tmp_path):
    for rank in (0, 1):
        b = two_step_trace()
        b.extra["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        b.write(tmp_path / f"rank{rank}.json")
    res = rightsize("analyze", tmp_path, "--format", "json", "-q")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert len(doc["devices"]) == 2


BAD = {
    "not_json": ("bad.json", b"hello world", "not a supported format"),
    "truncated_json": ("trunc.json", b'{"traceEvents": [{"ph": "X", "ts": 1, "dur"', "truncated"),
    "gzip_garbage": ("g.json.gz", b"\x1f\x8b\x08\x00garbage-not-deflate", "gzip"),
    "json_not_a_trace": ("cfg.json", b'{"model": "bert", "layers": 12}', "no traceEvents array"),
    "empty_trace_events": ("e.json", b'{"traceEvents": []}', "no events"),
    "events_missing_fields": ("m.json", (b'{"traceEvents": [{"ph": "X", "cat": "kernel", '
                              b'"name": "k", "pid": 0, "tid": 7}]}'), "have no numeric 'ts'"),
    "empty_file": ("z.json", b"", "empty"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_1(tmp_path, case):
    name, content, problem = BAD[case]
    path = tmp_path / name
    path.write_bytes(content)
    res = rightsize("analyze", path)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"rightsize: error: {path}: ") and problem in lines[0]
    assert "Traceback" not in res.stderr
    assert path.read_bytes() == content


def test_directory_without_traces(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    res = rightsize("analyze", tmp_path)
    assert res.returncode == 1
    assert res.stderr.strip() == f"rightsize: error: {tmp_path}: directory holds no trace files " \
                                 "(*.json, *.json.gz, *.sqlite, *.sqlite3)"


def test_missing_path(tmp_path):
    res = rightsize("analyze", tmp_path / "nope.json")
    assert res.returncode == 1
    assert res.stderr.strip() == f"rightsize: error: {tmp_path / 'nope.json'}: no such file or directory"


def test_unreadable_path(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    from rightsize.cli import main
    path = two_step_trace().write(tmp_path / "locked.json")
    real_open = Path.open

    def deny(self, *a, **k):
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *a, **k)
    monkeypatch.setattr(Path, "open", deny)
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", str(path)])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err == f"rightsize: error: {path}: cannot read: Permission denied"


def test_gzip_compressed_trace_file(tmp_path):
    raw = json.dumps(two_step_trace().document()).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(raw))
    res = rightsize("analyze", path, "--format", "json", "-q")
    assert res.returncode == 0 and json.loads(res.stdout)["steps"]["count"] == 2


def test_reports_are_named_after_their_input_and_never_silently_kept(tmp_path, trace_file):
    other = tmp_path / "other.json"
    other.write_bytes(Path(trace_file).read_bytes())
    stem = Path(trace_file).name.removesuffix(".gz").removesuffix(".json")
    assert rightsize("analyze", trace_file, cwd=tmp_path).returncode == 0
    page = tmp_path / f"{stem}.rightsize.html"
    assert page.is_file()
    page.write_bytes(page.read_bytes().replace(b"</body>", b"<!-- old --></body>"))
    res = rightsize("analyze", trace_file, cwd=tmp_path)  # its own page: replaced
    assert res.returncode == 0 and res.stderr.startswith("report: ")
    assert res.stderr.splitlines()[0].endswith(page.name)
    assert b"<!-- old -->" not in page.read_bytes()
    res = rightsize("analyze", other, cwd=tmp_path)  # another input: another page
    assert "report: other.rightsize.html" in res.stderr
    assert (tmp_path / "other.rightsize.html").is_file()
    mine = tmp_path / "mine.rightsize.html"
    mine.write_text("my notes")
    (tmp_path / "mine.json").write_bytes(Path(trace_file).read_bytes())
    res = rightsize("analyze", tmp_path / "mine.json", cwd=tmp_path)
    assert "kept the existing report mine.rightsize.html (it is not a report" in res.stderr


def test_mixed_inputs_trace_ncu_and_metrics_log(tmp_path, trace_file):
    ncu = shared_path("traces", "ncu", "llmperfopt-dsocr-kernel_0002-gemv-ncu.details.csv")
    smi = tmp_path / "smi.csv"
    smi.write_text("timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
                   "2023/11/14 22:13:20.000, 0, 40 %, 1000 MiB\n")
    res = rightsize("analyze", trace_file, ncu, smi, "--format", "json", "-q", "--no-report")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [i["format"] for i in doc["inputs"]] == ["kineto", "ncu", "metrics-log"]
    assert doc["inputs"][1]["kernels"] == 1 and doc["inputs"][2]["samples"] == 1


@pytest.mark.parametrize("name,content,problem", [
    ("a.sqlite", b"SQLite format 3\x00" + b"\x00" * 200, "SQLite"),
    ("b.csv", b"name,value\nx,1\n", "not a supported format"),
    ("c.sqlite", b"", "empty"),
])
def test_other_formats_bad_input(tmp_path, name, content, problem):
    path = tmp_path / name
    path.write_bytes(content)
    res = rightsize("analyze", path)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert problem in res.stderr and path.read_bytes() == content


def test_truncated_nsys_export_is_one_line_and_unchanged(tmp_path):
    src = shared_path("traces", "nsys", "fuser-8fa9ec2-h100-report1.sqlite").read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(src[: len(src) // 3])
    res = rightsize("analyze", path)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr and path.read_bytes() == src[: len(src) // 3]


def test_definitions_tb_plugin_on_the_command_line(trace_file):
    res = rightsize("analyze", trace_file, "--definitions", "tb-plugin", "--format", "json",
                    "--no-report")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert "defects reproduced" in doc["definitions"]["steps"]
    # the hand-built trace uses current category names: the plugin sees no runtime calls
    assert doc["metrics"]["breakdown_ms"]["runtime"] == 0.0
    res = rightsize("analyze", trace_file, "--definitions", "nope", "--no-report")
    assert res.returncode == 2 and "'nope' is not one of" in res.stderr

