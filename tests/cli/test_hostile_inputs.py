"""Hostile inputs (issue 12): memory bombs under a memory cap, FIFOs and stdin, BOMs, files
without events of their format, and the values that used to be internal errors. Bombs are made
at test time (multi-member gzip: a few MB on disk, GBs decompressed)."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import time

import pytest

from tests.cli.hostile import cli, one_line_error
from tests.tracebuilder import two_step_trace

GiB, MiB = 1 << 30, 1 << 20


def _member(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9)


def gzip_bomb(path, prefix: bytes, filler: bytes, filler_bytes: int, suffix: bytes):
    """prefix + filler repeated to filler_bytes + suffix, as concatenated gzip members."""
    block = filler * (64 * MiB // len(filler))
    member = _member(block)
    with open(path, "wb") as fh:
        fh.write(_member(prefix))
        fh.writelines(member for _ in range(filler_bytes // len(block)))
        fh.write(_member(suffix))
    return path


@pytest.fixture
def events_json() -> bytes:
    return json.dumps(two_step_trace().document()["traceEvents"]).encode()


@pytest.mark.slow
def test_huge_string_after_the_events(tmp_path, events_json):
    bomb = gzip_bomb(tmp_path / "b.json.gz", b'{"traceEvents":' + events_json + b', "x": "',
                     b"a", 4 * GiB, b'"}')
    assert bomb.stat().st_size < 8 * MiB
    start = time.monotonic()
    err = one_line_error(cli("analyze", bomb, "-q", "--no-report", cwd=tmp_path))
    assert err == (f"rightsize: error: {bomb}: trace metadata outside the event array exceeds "
                   "the limit of 64 MiB (raise it with RIGHTSIZE_MAX_ENVELOPE_BYTES=N bytes)")
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_one_huge_event(tmp_path):
    bomb = gzip_bomb(tmp_path / "e.json.gz", b'{"traceEvents":[{"ph":"X","name":"', b"k",
                     4 * GiB, b'","ts":1,"dur":1}]}')
    err = one_line_error(cli("analyze", bomb, "-q", "--no-report", cwd=tmp_path))
    assert err.endswith("size of one trace event exceeds the limit of 4 MiB "
                        "(raise it with RIGHTSIZE_MAX_EVENT_BYTES=N bytes)")


def test_stream_of_valid_events_stops_at_the_input_cap(tmp_path):
    event = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":1},'
    bomb = gzip_bomb(tmp_path / "s.json.gz", b'{"traceEvents":[', event, 128 * MiB,
                     event[:-1] + b"]}")
    res = cli("analyze", bomb, "-q", "--no-report", cwd=tmp_path,
              env={"RIGHTSIZE_MAX_INPUT_BYTES": str(64 * MiB)})
    assert one_line_error(res).endswith(
        "decompressed size of one input file exceeds the limit of 64 MiB "
        "(raise it with RIGHTSIZE_MAX_INPUT_BYTES=N bytes)")


def test_deep_nesting_outside_the_events(tmp_path, events_json):
    path = tmp_path / "deep.json"
    path.write_bytes(b'{"traceEvents":' + events_json + b', "x":' + b"[" * 100_000
                     + b"]" * 100_000 + b"}")
    assert one_line_error(cli("analyze", path, "-q", "--no-report")).endswith(
        "JSON nesting depth outside the events exceeds the limit of 128 levels "
        "(raise it with RIGHTSIZE_MAX_NESTING=N levels)")


def test_dcgm_label_costs_linear_memory(tmp_path):
    label = "x" * (20 * MiB)
    path = tmp_path / "scrape.prom"
    path.write_text(f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-1",big="{label}"}} 50\n')
    err = one_line_error(cli("analyze", path, "-q", "--no-report"))
    assert err.endswith("one line or field of a CSV or metrics log exceeds the limit of 1 MiB "
                        "(raise it with RIGHTSIZE_MAX_LINE_BYTES=N bytes)")
    start = time.monotonic()  # allowed through: the label regex must stay linear
    res = cli("analyze", path, "--format", "json", "-q", "--no-report",
              env={"RIGHTSIZE_MAX_LINE_BYTES": str(64 * MiB)})
    assert res.returncode == 0, res.stderr[-500:]
    assert json.loads(res.stdout)["schema_version"] == 1
    assert time.monotonic() - start < 30


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)
    err = one_line_error(cli("analyze", fifo, "-q", "--no-report", timeout=20))
    assert err == (f"rightsize: error: {fifo}: not a regular file (a pipe, device or socket); "
                   "to read standard input, pass '-'")


def test_dash_reads_stdin(tmp_path):
    data = two_step_trace().write(tmp_path / "t.json").read_bytes()
    res = cli("analyze", "-", "--format", "json", "-q", "--no-report", stdin=data)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["steps"]["count"] == 2


@pytest.mark.parametrize("prefix", [b"\xef\xbb\xbf", b" \n" * 3000, b"\xef\xbb\xbf\n\t "])
def test_bom_and_leading_whitespace(tmp_path, prefix):
    path = tmp_path / "t.json"
    path.write_bytes(prefix + json.dumps(two_step_trace().document()).encode())
    res = cli("analyze", path, "--format", "json", "-q", "--no-report")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["steps"]["count"] == 2


NCU_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
              '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
              '"Metric Unit","Metric Value"\n')


def _fake_nsys(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("empty.json", b'{"traceEvents":[{},{}]}',
     "none of the 2 events is a PyTorch Profiler event (no known 'ph'/'cat' with a time)"),
    ("ncu.csv", NCU_HEADER.encode(), "an Nsight Compute CSV without kernel rows"),
    ("dmon.log", b"#Entity   SMACT  DRAMA\nID\n", "a GPU metrics log without samples"),
    ("nsys.sqlite", None, ("an Nsight Systems export without kernels, copies, runtime calls "
                          "or NVTX ranges")),
])
def test_no_events_of_its_format_is_an_error(tmp_path, name, content, problem):
    path = tmp_path / name
    if content is None:
        _fake_nsys(path)
    else:
        path.write_bytes(content)
    assert one_line_error(cli("analyze", path, "-q", "--no-report")) == (
        f"rightsize: error: {path}: {problem}")


def _with_envelope(tmp_path, text_after_events: str):
    doc = json.dumps(two_step_trace().document())
    path = tmp_path / "t.json"
    path.write_text(doc[:-1] + ", " + text_after_events + "}")
    return path


@pytest.mark.parametrize(("extra", "problem"), [
    ('"baseTimeNanoseconds": Infinity', "baseTimeNanoseconds is inf, not a time"),
    ('"baseTimeNanoseconds": 9223372036854775000',
     "event times plus baseTimeNanoseconds overflow int64 nanoseconds"),
    ('"baseTimeNanoseconds": 1e300', "baseTimeNanoseconds 1e+300 is outside int64 nanoseconds"),
    ('"baseTimeNanoseconds": "soon"', "baseTimeNanoseconds is not a whole number: 'soon'"),
])
def test_bad_base_time_is_an_error(tmp_path, extra, problem):
    path = _with_envelope(tmp_path, extra)
    err = one_line_error(cli("analyze", path, "-q", "--no-report"))
    assert err == f"rightsize: error: {path}: {problem}"


@pytest.mark.parametrize("extra", [
    '"deviceProperties": 5', '"distributedInfo": {"rank": Infinity, "world_size": NaN}',
    '"deviceProperties": [{"id": 0, "name": "A\\ud800"}]', '"distributedInfo": 7',
])
def test_odd_metadata_is_tolerated(tmp_path, extra):
    doc = two_step_trace().document()
    doc.pop("deviceProperties", None)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc)[:-1] + ", " + extra + "}")
    res = cli("analyze", path, "--format", "json", "-q", "--no-report")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))
    assert out["steps"]["count"] == 2


@pytest.mark.parametrize("text", [
    'DCGM_FI_DEV_GPU_UTIL{UUID="x"} 50\n',  # no gpu label
    'DCGM_FI_DEV_GPU_UTIL{gpu="abc",UUID="x"} 50\n',  # unparseable index
    'DCGM_FI_DEV_GPU_UTIL{gpu="\u00b2",UUID="x"} 50\n',  # superscript digit
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="x"} 50 99999999999999999999\n',  # ts beyond int64
])
def test_unattributable_metric_samples_are_skipped(tmp_path, text):
    path = tmp_path / "m.prom"
    path.write_text(text)
    assert one_line_error(cli("analyze", path, "-q", "--no-report")).endswith(
        "a GPU metrics log without samples")


def test_nan_and_inf_metric_values_are_missing(tmp_path):
    path = tmp_path / "m.prom"
    path.write_text('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="x"} NaN\n'
                    'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="y"} +Inf\n'
                    'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="x"} 100\n')
    res = cli("analyze", path, "--format", "json", "-q", "--no-report")
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))


SMI_HEADER = "timestamp, name, index, utilization.gpu [%], memory.used [MiB]\n"


def _smi_rows(index: str, util: str) -> str:
    return "".join(f"2024/01/01 10:00:0{i}.000, NVIDIA H100 80GB HBM3, {index}, {util}, "
                   "1000 MiB\n" for i in range(6))


def test_nvidia_smi_index_that_is_not_a_number_is_one_line(tmp_path):
    """Issue 29: an index column holding 'x' ended in an internal error (exit 2)."""
    path = tmp_path / "smi.csv"
    path.write_text(SMI_HEADER + _smi_rows("x", "50 %"))
    assert one_line_error(cli("analyze", path, "-q", "--no-report")) == (
        f"rightsize: error: {path}: no row has a GPU index: the index column holds 'x', "
        "not a number")
    path.write_text(SMI_HEADER + _smi_rows("x", "50 %") + _smi_rows("0", "70 %"))
    res = cli("analyze", path, "--format", "json", "-q", "--no-report")  # the 'x' rows dropped
    assert res.returncode == 0, res.stderr
    nvml = json.loads(res.stdout)["diagnosis"]["utilization"]["nvml"]
    assert (nvml["samples"], nvml["gpu_util_pct_mean"]) == (6, 70.0)


def test_nvidia_smi_full_width_digits_are_read_as_digits(tmp_path):
    """Issue 29: full-width digits ('５０ %', also as the index) ended in an internal error."""
    path = tmp_path / "smi.csv"
    path.write_text(SMI_HEADER + _smi_rows("０", "５０ %"), encoding="utf-8")
    res = cli("analyze", path, "--format", "json", "-q", "--no-report")
    assert res.returncode == 0, res.stderr
    nvml = json.loads(res.stdout)["diagnosis"]["utilization"]["nvml"]
    assert (nvml["samples"], nvml["gpu_util_pct_mean"]) == (6, 50.0)


def test_ncu_grid_beyond_int64_and_huge_field(tmp_path):
    row = ('"0","1","python","h","k","1","7","(128, 1, 1)","({grid}, 1, 1)","0","9.0",'
           '"GPU Speed Of Light Throughput","Duration","nsecond","{value}"\n')
    path = tmp_path / "n.csv"
    path.write_text(NCU_HEADER + row.format(grid="9" * 30, value="1" + "0" * 200_000))
    res = cli("analyze", path, "--format", "json", "-q", "--no-report")
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))


def test_nsys_text_in_utc_epoch(tmp_path):
    path = _fake_nsys(tmp_path / "r.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs, utcTime)")
    conn.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES ('soon', 'x')")
    conn.commit()
    conn.close()
    assert one_line_error(cli("analyze", path, "-q", "--no-report")) == (
        f"rightsize: error: {path}: TARGET_INFO_SESSION_START_TIME.utcEpochNs is not a time "
        "in int64 nanoseconds: 'soon'")


def test_corrupt_gzip_is_one_line(tmp_path):
    path = tmp_path / "t.json.gz"
    data = bytearray(gzip.compress(json.dumps(two_step_trace().document()).encode()))
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    one_line_error(cli("analyze", path, "-q", "--no-report"))


def test_reading_leaves_inputs_unchanged(tmp_path):
    path = two_step_trace().write(tmp_path / "t.json")
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    assert cli("analyze", path, "-q", "--no-report").returncode == 0
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime

