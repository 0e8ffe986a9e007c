"""The Kineto reader's fast paths give exactly the frames of the careful path, on every shared
trace and in every layout: Kineto's own (pretty, one key block per event), one event per line,
compact on one line, and small read chunks (many batch boundaries)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from rightsize.errors import InputError
from rightsize.traces import jsonbytes, jsonscan, kineto, kineto_frames
from rightsize.traces.kineto import read_kineto
from rightsize.traces.schema import Trace
from tests.conftest import shared_path
from tests.traces.conftest import assert_same_trace as assert_same

pytestmark = pytest.mark.usefixtures("both_parsers")  # compiled and polars-only

LAYOUT_MAX_BYTES = 12 * 1024 * 1024  # re-layouts of bigger traces take too long for the suite


def kineto_traces() -> list[Path]:
    return sorted(shared_path("traces", "kineto").glob("*.json*"))



def careful(path: Path, monkeypatch: pytest.MonkeyPatch) -> Trace:
    """The structural scan alone (no separator fast path), times read as text (no Int64
    attempt)."""
    with monkeypatch.context() as m:
        m.setattr(jsonbytes, "separator", lambda buf, depth: None)
        m.setattr(kineto, "_Parser", _TextTimes)
        return read_kineto(path)


class _TextTimes(kineto._Parser):
    def __init__(self, lean: bool = False) -> None:
        super().__init__(lean)
        self.int_times = False


def one_per_line(doc: dict) -> str:
    events = doc["traceEvents"]
    rest = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = ",\n".join(json.dumps(e) for e in events)
    return '{"traceEvents": [\n' + lines + "\n],\n" + json.dumps(rest)[1:]


@pytest.mark.shared
@pytest.mark.parametrize("index", range(20))
def test_fast_path_equals_careful_path_on_shared_trace(index, tmp_path, monkeypatch):
    traces = kineto_traces()
    if index >= len(traces):
        pytest.skip("fewer shared traces")
    path = traces[index]
    slow = careful(path, monkeypatch)
    assert_same(read_kineto(path), slow)
    with monkeypatch.context() as m:  # many batches: every boundary case of the fast path
        m.setattr(jsonscan.Scan.__init__, "__defaults__", (1 << 16,))
        assert_same(read_kineto(path), slow)
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if len(text) > LAYOUT_MAX_BYTES:
        return
    doc = json.loads(text)
    if not isinstance(doc, dict):
        return
    # Re-serializing may respell numbers, so the layouts are compared with each other.
    layouts = {
        "pretty": json.dumps(doc, indent=2),
        "lines": one_per_line(doc),
        "compact": json.dumps(doc, separators=(",", ":")),
        "spaced": json.dumps(doc),
    }
    files = {}
    for name, body in layouts.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(body)
    reference = careful(files["compact"], monkeypatch)
    for name, file in files.items():
        assert_same(read_kineto(file), reference)


def test_separator_of_each_layout():
    events = b'{"a": 1,\n "b": {"c": 2}},\n{"a": 3}'
    assert jsonbytes.separator(b' {"a": 1}, {"a": 2}]', 2) is None  # may occur in strings
    assert jsonbytes.separator(b'{"a": 1},{"a": 2}', 2) is None
    assert jsonbytes.separator(b'\n{"a": 1},\n{"a": 2}', 2) == b"},\n{"
    assert jsonbytes.separator(b'\n  {\n    "a": 1\n  },\n  {\n "a": 2}', 2) == b"\n  },\n  {"
    assert jsonbytes.separator(events, 2) is None  # the first event spans lines
    assert jsonbytes.separator(b'{"a": 1}]', 2) is None  # one event: nothing to learn from
    assert jsonbytes.separator(b'{"a": "},{"', 2) is None  # not two whole events


def test_compact_layout_with_separator_inside_strings(tmp_path):
    """A name holding ``},{`` (one-line documents take the structural scan)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op}},{{{i}", "pid": 1, "tid": 1,
               "ts": 10 + i, "dur": 1} for i in range(50)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}, separators=(",", ":")))
    ops = read_kineto(path).cpu_ops
    assert ops["name"].to_list() == [f"op}},{{{i}" for i in range(50)]
    assert ops["ts_ns"].to_list() == [(10 + i) * 1000 for i in range(50)]


def test_array_end_followed_by_long_metadata(tmp_path, monkeypatch):
    """After the last separator the scan must still find the array's end, however much
    metadata follows it."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": i, "dur": 1}
              for i in range(3)]
    doc = {"traceEvents": events, "note": "x" * 300_000}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("RIGHTSIZE_MAX_EVENT_BYTES", "200000")
    monkeypatch.setattr(jsonscan.Scan.__init__, "__defaults__", (1 << 16,))
    t = read_kineto(path)
    assert t.cpu_ops["ts_ns"].to_list() == [0, 1000, 2000]


def test_whole_then_fractional_times_switch_to_text(tmp_path, monkeypatch):
    """Batches of whole µs are read as Int64 until one holds a float: that batch and the rest
    are read as text, exactly."""
    whole = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000 + i,
              "dur": 2, "args": {"device": 0, "stream": 7}} for i in range(400)]
    text = ",\n".join(json.dumps(e) for e in whole)
    text += ',\n{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, ' \
            '"ts": 1700000000123456.789, "dur": 1.001, "args": {"device": 0, "stream": 7}}'
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + text + "\n]}")
    monkeypatch.setattr(jsonscan.Scan.__init__, "__defaults__", (1 << 12,))
    k = read_kineto(path).kernels
    assert k["ts_ns"].to_list() == [(1000 + i) * 1000 for i in range(400)] + [1700000000123456789]
    assert k["dur_ns"].to_list() == [2000] * 400 + [1001]


@pytest.mark.shared
def test_isal_gunzip_equals_stdlib(monkeypatch):
    """The optional ISA-L inflater gives the frames of the standard library's."""
    pytest.importorskip("isal")
    path = shared_path("traces", "kineto", "hta-trace_diff-control-control.json.gz")
    fast = read_kineto(path)
    monkeypatch.setattr(kineto, "_ISAL", None)
    assert_same(fast, read_kineto(path))


@pytest.mark.parametrize("inflater", ["isal", "stdlib"])
def test_corrupt_gzip_is_one_line_error_with_either_inflater(inflater, tmp_path, monkeypatch):
    if inflater == "isal":
        pytest.importorskip("isal")
    else:
        monkeypatch.setattr(kineto, "_ISAL", None)
    body = gzip.compress(json.dumps({"traceEvents": [{"ph": "X", "name": str(i)}
                                                     for i in range(2000)]}).encode())
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(body[:20] + b"\x00" * 50 + body[70:])
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(body[: len(body) // 2])
    for path in (corrupt, truncated):
        with pytest.raises(InputError, match="corrupt or truncated gzip data"):
            read_kineto(path)


def test_sorted_concat_equals_concat_then_stable_sort():
    """finish's column-at-a-time build gives exactly concat + sort(maintain_order=True): ties
    keep file order, nulls first, every dtype kept."""
    pieces = [
        pl.DataFrame({"ts_ns": [5, 3, None, 3], "name": ["a", "b", "c", "d"],
                      "x": [1.5, None, 2.5, 3.5]}),
        pl.DataFrame({"ts_ns": [3, None, 1], "name": ["e", None, "g"], "x": [4.5, 5.5, None]}),
        pl.DataFrame({"ts_ns": [5], "name": ["h"], "x": [6.5]}),
    ]
    expected = pl.concat(pieces).sort("ts_ns", maintain_order=True)
    got = kineto_frames._sorted_concat([p.clone() for p in pieces])
    assert got.equals(expected) and got.schema == expected.schema
    assert got["name"].to_list() == ["c", None, "g", "b", "d", "e", "a", "h"]


@pytest.mark.parametrize("sorted_already", [False, True])
def test_sorted_concat_keeps_columns_of_nulls_as_one_null(sorted_already):
    """A column that is null in every piece (a field the trace never records) comes out as
    one broadcast null -- same values, dtype and column order; one null in some pieces only
    is built like any other column."""
    ts = ([1, 2], [3]) if sorted_already else ([3, 1], [2])
    pieces = [
        kineto_frames._nulls_as_scalars(pl.DataFrame(
            {"a": [None, None], "ts_ns": ts[0], "n": [None, None], "m": [None, "x"]},
            schema={"a": pl.String, "ts_ns": pl.Int64, "n": pl.Int64, "m": pl.String})),
        kineto_frames._nulls_as_scalars(pl.DataFrame(
            {"a": [None], "ts_ns": ts[1], "n": [None], "m": [None]},
            schema={"a": pl.String, "ts_ns": pl.Int64, "n": pl.Int64, "m": pl.String})),
    ]
    expected = pl.concat(pieces).sort("ts_ns", maintain_order=True)
    got = kineto_frames._sorted_concat([p.clone() for p in pieces])
    assert got.equals(expected) and got.schema == expected.schema
    assert got.columns == ["a", "ts_ns", "n", "m"] and got.height == 3
    assert got["a"].null_count() == 3 and got["m"].to_list().count("x") == 1


def test_fast_path_batches_are_the_chunks_cut_in_place(tmp_path):
    """Each batch after the first is the read chunk itself, cut at its last separator (one
    copy of the chunk, not two); the events and their NDJSON are those of the whole array."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
               "dur": 1} for i in range(400)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    with path.open("rb") as fh:
        batches = list(jsonscan.Scan(fh, chunk_bytes=4096).batches())
    # the first read: its separator not known yet; the last: the array's end, by the scan
    assert len(batches) > 3 and isinstance(batches[0].raw, bytes)
    assert all(isinstance(b.raw, bytearray) for b in batches[1:-1])
    lines = [line for b in batches for line in b.ndjson.splitlines() if line.strip()]
    assert all(isinstance(b.ndjson, bytes) for b in batches)
    assert [json.loads(line)["name"] for line in lines] == [f"op{i}" for i in range(400)]
