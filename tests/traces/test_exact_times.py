"""Timestamps exact to the nanosecond as written, also where a float64 cannot hold them."""

from __future__ import annotations

import pytest

from rightsize.traces.kineto import read_kineto

pytestmark = pytest.mark.usefixtures("both_parsers")  # compiled and polars-only

EVENT = ('{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {ts}, '
         '"dur": {dur}, "args": {{"device": 0, "stream": 7, "correlation": {c}}}}}')


def write(tmp_path, times, sep=",\n  "):
    events = sep.join(EVENT.format(ts=ts, dur=dur, c=i) for i, (ts, dur) in enumerate(times))
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n  ' + events + "\n]}")
    return path


def test_epoch_microseconds_beyond_float_precision(tmp_path):
    # 1700000000123456.789 is 1700000000123456.75 as a float64: three decimals beyond it.
    times = [("1700000000123456.789", "1.001"), ("1700000000123457.001", "2"),
             ("1700000000123458", "0.5")]
    for sep in (",\n  ", ", "):  # the fast path and the structural scan
        t = read_kineto(write(tmp_path, times, sep))
        assert t.kernels["ts_ns"].to_list() == [1700000000123456789, 1700000000123457001,
                                                1700000000123458000]
        assert t.kernels["dur_ns"].to_list() == [1001, 2000, 500]


def test_small_relative_times_need_no_raw_text(tmp_path):
    t = read_kineto(write(tmp_path, [("4458676983543.183", "1.888"), ("5.5", "0.001")]))
    assert t.kernels["ts_ns"].to_list() == [5500, 4458676983543183]
    assert t.kernels["dur_ns"].to_list() == [1, 1888]
