"""The compiled Kineto batch parser (``_kscan``) against polars' reader, the rule it follows:
the same text where it takes a batch, None (polars parses it) where it does not, the same
frames on every shared trace and on generated hostile events, and no column left behind."""

from __future__ import annotations

import ctypes
import gc
import json
import locale
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rightsize.traces import jsonscan, kineto_scan, kscan
from rightsize.traces import kineto_frames as kf
from rightsize.traces.kineto import read_kineto
from rightsize.traces.schema import Trace
from tests.conftest import shared_path
from tests.traces.conftest import assert_same_trace as assert_same

built = pytest.mark.skipif(kscan.BUILT is None, reason="_kscan was not compiled")


def polars_events(ndjson: bytes, legacy: bool = False) -> pl.DataFrame:
    return pl.read_ndjson(ndjson, schema=kf.event_schema(legacy, typed=False))


def same_frames(fast: pl.DataFrame | None, slow: pl.DataFrame) -> bool:
    """The batch's frames from the compiled parser's columns equal those from polars' text."""
    if fast is None:
        return False
    a, b = kf.split_events(fast), kf.split_events(slow)
    return a.keys() == b.keys() and all(
        a[name].schema == b[name].schema and a[name].equals(b[name]) for name in a)



def polars_only(path, monkeypatch) -> Trace:
    with monkeypatch.context() as m:
        m.setenv(kscan.PARSER_ENV, "polars")
        return read_kineto(path)


def test_built_where_a_compiler_is():
    """An install with a C compiler must have built the parser (a silent build failure would
    leave every user on the slow path)."""
    if os.environ.get("RIGHTSIZE_NO_EXTENSION") or sys.platform != "linux" \
            or not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C toolchain here, or the extension was turned off")
    assert kscan.BUILT is not None


@built
@pytest.mark.shared
@pytest.mark.parametrize("index", range(20))
def test_shared_trace_same_frames_without_fallback(index, monkeypatch):
    traces = sorted(shared_path("traces", "kineto").glob("*.json*"))
    if index >= len(traces):
        pytest.skip("fewer shared traces")
    calls: list[bool] = []
    real = kineto_scan.read

    def counted(ndjson: bytes, legacy: bool, comms: bool = False) -> pl.DataFrame | None:
        out = real(ndjson, legacy, comms)
        calls.append(out is not None)
        return out

    with monkeypatch.context() as m:
        m.setattr(kineto_scan, "read", counted)
        fast = read_kineto(traces[index])
    assert calls and all(calls), "a real trace should never need the polars parser"
    assert_same(fast, polars_only(traces[index], monkeypatch))


@built
def test_text_as_polars_gives_it():
    lines = [
        (b'{"ph": "X", "cat": "kernel", "name": "void gemm<128>(\\"a\\\\b\\")", "pid": 0, '
        b'"tid": "stream 7", "ts": 17, "dur": 3, "args": {"External id": 5, "device": 0}}'),
        (b'{"name": "caf\\u00e9 \\ud83d\\ude80 \\n\\t\\/", "pid": -1, "tid": 12345678901234567890,'
        b' "args": {"Input Dims": [[2, 3], [], [1,4]], "Input type": ["float", "", "c10::Half"],'
        b' "Concrete Inputs": ["", "1", "[2, 2]"]}}'),
        b'{"ph": "f", "id": 42, "bp": "e", "cat": "ac2g", "args": null}',
        b'   ',  # a blank line holds no event
        (b'{"ph": "i", "s": "t", "name": "[memory]", "ts": 5, "args": {"Device Type": 0, '
        b'"Device Id": -1, "Bytes": -8, "bytes": 3, "Total Allocated": 100000000000000000000}}'),
        b'{"name": "first", "name": "second", "args": {"device": 1, "device": 2}, "args": {}}',
        (b'{"cat": true, "ph": false, "pid": null, "dur": true, "ts": [1], "args": {"stream": [true, null, false], '
        b'"Other": {"deep": [[[[1]]]], "x": 1.5e300}}}'),
        b'{}',
        # ids as text, as some AMD traces write them: polars' cast of the text decides
        (b'{"ph": "X", "cat": "cuda_runtime", "args": {"stream": "0x0", "External id": "+7", '
         b'"correlation": "-9223372036854775808", "device": "", "bytes": true, '
         b'"blocks per SM": [1], "Bytes": {"a": 1}, "Device Id": "9223372036854775808"}}'),
    ]
    ndjson = b"\n".join(lines) + b"\n"
    fast = kineto_scan.read(ndjson, legacy=False)
    assert same_frames(fast, polars_events(ndjson))
    assert fast is not None and fast["name"][1] == "café \U0001F680 \n\t/"
    assert fast["args"].struct.field("Input Dims")[1] == "[[2, 3], [], [1, 4]]"
    ids = fast["args"].struct.field("Total Allocated").to_list()
    assert ids[3] is None  # past int64: null, as polars' cast of its text
    assert fast["args"].struct.field("Bytes")[3] == -8  # row 3: the blank line holds none
    legacy = b'{"cat": "Kernel", "args": {"external id": 3, "theoretical occupancy %": 0.25}}\n'
    assert same_frames(kineto_scan.read(legacy, legacy=True), polars_events(legacy, legacy=True))


@built
def test_times_are_exact_nanoseconds_from_their_digits():
    """polars' float would round 1700000000123456.789 µs (the careful path re-reads its text);
    the digits give it exactly, rounded half up at the 4th decimal like us_to_ns."""
    line = (b'{"ts": 1700000000123456.789, "dur": 1.500, "args": {"blocks per SM": 0.50}}\n'
            b'{"ts": -2.00049, "dur": 0.00051, "args": {"est. achieved occupancy %": 12}}\n'
            b'{"ts": 17, "dur": 0}\n')
    fast = kineto_scan.read(line, legacy=False)
    assert fast is not None
    assert fast["ts_ns"].to_list() == [1700000000123456789, -2000, 17000]
    assert fast["dur_ns"].to_list() == [1500, 1, 0]
    assert fast["args"].struct.field("blocks per SM").to_list() == [0.5, None, None]
    assert fast["args"].struct.field("est. achieved occupancy %")[1] == 12.0
    text = pl.Series(["1700000000123456.789", "-2.00049", "0.00051", "17"])
    assert kf.us_series_to_ns(text).to_list() == [1700000000123456789, -2000, 1, 17000]


@built
@pytest.mark.parametrize("line", [
    b'{"ts": 1e3}',  # an exponent: polars' spelling of it is its own
    b'{"pid": 1.0}',  # a float where the text is kept: polars prints "1"
    b'{"ts": "17"}',  # a time as a string: polars' cast of the text decides
    b'{"ts": 90071992547409930}',  # past int64 nanoseconds
    b'{"args": {"blocks per SM": "0.5"}}',
    b'{"args": {"External id": 2.5}}',  # a float id: polars' typed read refuses it
    b'{"pid": -0}',
    b'{"name": {"a": 1}}',  # an object where text is expected
    b'{"args": {"Input Dims": [{"a": 1}]}}',
    b'{"args": {"Input Dims": [1.5]}}',
    b'{"args": {"Input type": ["a\\"b"]}}',  # polars re-escapes it
    b'{"args": "text"}',
    b'{"args": [1]}',
    b'{"name": "\\ud800"}',  # a lone surrogate
    b'{"name": "\\udc00x"}',
    b'{"name": "tab\there"}',  # a raw control character
    b'{"name": "\xff"}',  # not UTF-8
    b'{"name": "\xed\xa0\x80"}',  # an encoded surrogate
    b'{"na\\u006de": "x"}',  # an escaped key
    b'{"name": "x"',
    b'{"name": "x"} trailing',
    b'[1, 2]',
    b'{"name": 01}',
    b'{"name": tru}',
    b'{"x": ' + b"[" * 100 + b"]" * 100 + b"}",
])
def test_falls_back_to_polars(line):
    assert kineto_scan.read(line + b"\n", legacy=False) is None


@built
def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setenv(kscan.PARSER_ENV, "polars")
    assert kineto_scan.read(b'{"name": "x"}\n', legacy=False) is None


@built
def test_columns_are_released_with_the_frames(tmp_path):
    gc.collect()
    before = kscan.BUILT.live()
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i,
               "dur": 1, "args": {"device": 0, "stream": 7, "correlation": i}} for i in range(500)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_kineto(path)
    assert trace.kernels.height == 500
    del trace
    gc.collect()
    assert kscan.BUILT.live() == before


@built
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mapped buffers: Linux only")
def test_freed_buffers_kept_only_while_a_trace_is_read(tmp_path):
    lines = b"".join(json.dumps({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1,
                                 "tid": 1, "ts": i, "dur": 1}).encode() + b"\n"
                     for i in range(20_000))
    gc.collect()
    kineto_scan.keep_buffers(True)
    try:
        first = kineto_scan.read(lines, legacy=False)
        del first
        gc.collect()
        kept = kscan.BUILT.pooled()
        assert 0 < kept <= 16 << 20
        again = kineto_scan.read(lines, legacy=False)  # built from the kept buffers
        assert again["name"][19_999] == "op19999" and again["ts_ns"][5] == 5000
        assert kscan.BUILT.pooled() < kept
        del again
    finally:
        kineto_scan.keep_buffers(False)
    assert kscan.BUILT.pooled() == 0
    left = kineto_scan.read(lines, legacy=False)
    del left
    gc.collect()
    assert kscan.BUILT.pooled() == 0  # closed: a freed column is unmapped at once
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + lines.decode().strip().replace("\n", ",") + "]}")
    assert read_kineto(path).cpu_ops.height == 20_000
    assert kscan.BUILT.pooled() == 0  # the reader closes the pool when it is done


# Hostile and odd events, written as a trace: whatever the C pass takes or leaves to polars,
# the frames (or the one-line error) must be the ones polars alone gives.
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["stream 7", "ProfilerStep#3", "Memcpy HtoD (Pageable -> Device)", "kernel",
                     "cpu_op", "cuda_runtime", "gpu_memcpy", "Kernel", "Runtime", "ac2g"]),
)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
# Mostly what Kineto writes in args (ids, text, shapes), sometimes anything.
_arg_values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8),
                        st.lists(st.lists(st.integers(0, 4096), max_size=3), max_size=3),
                        st.lists(st.sampled_from(["", "float", "c10::Half", "1", "[2, 2]"])),
                        _values)
_keys = st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "s", "bp"])
_arg_keys = st.sampled_from([*kf.ARG_FIELDS, "Trace name", "Call stack", "bytes", "Bytes"])
_events = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "s", "f", "M"]),
     "cat": st.sampled_from(["kernel", "cpu_op", "gpu_memcpy", "cuda_runtime", "ac2g",
                             "user_annotation", "Kernel", "Runtime"]),
     "name": st.one_of(st.text(max_size=20), st.sampled_from(["ProfilerStep#1", "[memory]"])),
     "pid": st.one_of(st.integers(-3, 5), st.text(max_size=5)),
     "tid": st.one_of(st.integers(0, 9), st.just("stream 7")),
     "ts": st.one_of(st.integers(0, 2**53), st.decimals(0, 10**16, places=3).map(float)),
     "dur": st.one_of(st.integers(0, 1000), st.floats(0, 1e4))},
    optional={"args": st.dictionaries(_arg_keys, _arg_values, max_size=5), "id": _scalars},
).flatmap(lambda base: st.dictionaries(_keys, _values, max_size=2).map(
    lambda extra: {**extra, **base}))


def _outcome(path, monkeypatch, engine: str) -> Trace | str:
    from rightsize.errors import InputError
    with monkeypatch.context() as m:
        m.setenv(kscan.PARSER_ENV, engine)
        try:
            return read_kineto(path)
        except InputError as exc:
            return str(exc)


@built
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(_events, min_size=1, max_size=25))
def test_generated_events_same_outcome(events, tmp_path, monkeypatch):
    path = tmp_path / "gen.json"
    path.write_text(json.dumps({"traceEvents": events}, allow_nan=False))
    fast = _outcome(path, monkeypatch, "c")
    slow = _outcome(path, monkeypatch, "polars")
    if isinstance(slow, str) or isinstance(fast, str):
        assert fast == slow
    else:
        assert_same(fast, slow)


@built
def test_document_bytes_read_as_the_file_has_them():
    """A fast-path batch is read from the event array's own bytes: objects separated by a
    comma and any whitespace; anything else is left to polars (via the NDJSON)."""
    sep = b"\n  },\n  {\n    "
    raw = b'\n  {\n    "name": "a", "ts": 1' + sep + b'"name": "b",\n    "ts": 2.5\n  }'
    fast = kineto_scan.read(jsonscan.Batch(None, raw, -1, sep), legacy=False)
    assert fast is not None
    assert fast["name"].to_list() == ["a", "b"] and fast["ts_ns"].to_list() == [1000, 2500]
    for bad in (b'{"name": "a"} {"name": "b"}', b'{"name": "a"},', b', {"name": "a"}',
                b'{"name": "a"},, {"name": "b"}', b'{"name": "a"}, [1]'):
        assert kineto_scan.read(jsonscan.Batch(None, bad, -1, b"},\n{"), legacy=False) is None


@built
def test_cut_finds_whole_elements():
    cut = kscan.BUILT.cut
    data = b' {"a": 1}, {"b": "}\\"{"} , {"c": [1'
    assert cut(data, False) == (False, 1, data.index(b"} ,") + 1, -1, 2)
    closed = b'{"a": {"b": []}}\n]}'
    assert cut(closed, False) == (True, 0, 16, 17, 1)
    assert cut(b', {"a": 1}]', True) == (True, 2, 10, 10, 1)
    assert cut(b"  ]", False) == (True, -1, -1, 2, 0)
    assert cut(b"]", True) == (True, -1, -1, 0, 0)
    assert cut(b'{"a": "no end', False) == (False, 0, -1, -1, 0)
    for odd, after in ((b"[1]", False), (b'{"a": 1} {"b": 2}', False), (b'{"a": 1},]', False),
                       (b", ]", True), (b'{"a": 1}', True), (b"1, 2", False)):
        assert cut(odd, after) is None, odd  # the structural scan decides (and says why)


# Locales that write 4,47: the first one this machine has is used. CI needs one generated
# (Debian/Ubuntu: the "locales" package, then `localedef -i de_DE -f UTF-8 de_DE.UTF-8`).
COMMA_LOCALES = ("de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "nl_NL.UTF-8", "ru_RU.UTF-8",
                 "es_ES.UTF-8", "it_IT.UTF-8", "pt_BR.UTF-8")


@contextmanager
def comma_decimal_locale() -> Iterator[str]:
    """The process in a comma-decimal locale (LC_ALL, as `setlocale(LC_ALL, "")` under
    LC_ALL=de_DE.UTF-8 puts it), the saved one restored after; a skip where none can be set."""
    saved = locale.setlocale(locale.LC_ALL)
    try:
        for name in COMMA_LOCALES:
            try:
                locale.setlocale(locale.LC_ALL, name)
            except locale.Error:
                continue
            if locale.localeconv()["decimal_point"] == ",":
                yield name
                return
        pytest.skip("no comma-decimal locale can be set here (Debian: apt-get install locales; "
                    "localedef -i de_DE -f UTF-8 de_DE.UTF-8)")
    finally:
        locale.setlocale(locale.LC_ALL, saved)


@built
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libc's strtod via ctypes")
def test_floats_do_not_follow_a_comma_decimal_locale(tmp_path, monkeypatch):
    """JSON writes 4.47 whatever the locale: a program that set a comma-decimal one (de_DE)
    read SM efficiency 75.99% instead of 88.57% from the shared Qwen trace, the C parser's
    strtod stopping at the '.'. The frames must be polars' (which ignores the locale)."""
    lines = (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.25, '
             b'"dur": 3.5, "args": {"blocks per SM": 4.47, "est. achieved occupancy %": 12.5, '
             b'"theoretical occupancy %": 0.1, "device": 0, "stream": 7, "correlation": 1}}\n'
             b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5.0625, "dur": 0.5, '
             b'"args": {"blocks per SM": -0.000123, '
             b'"est. achieved occupancy %": 99.99999999999999, "theoretical occupancy %": 1.0}}\n')
    events = [json.loads(line) for line in lines.splitlines()]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with comma_decimal_locale():
        libc = ctypes.CDLL(None)
        libc.strtod.restype = ctypes.c_double
        libc.strtod.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        assert libc.strtod(b"4.47", None) == 4.0  # the locale the old parser went wrong in
        fast = kineto_scan.read(lines, legacy=False)
        assert same_frames(fast, polars_events(lines))
        assert fast is not None
        assert fast["args"].struct.field("blocks per SM").to_list() == [4.47, -0.000123]
        assert fast["args"].struct.field("est. achieved occupancy %")[1] == 99.99999999999999
        assert_same(read_kineto(path), polars_only(path, monkeypatch))
    assert locale.localeconv()["decimal_point"] == "."
