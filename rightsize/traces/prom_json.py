"""Prometheus range-query responses (``/api/v1/query_range`` JSON) -> labels and points.

Role: read the ``matrix`` result of a range query, as Prometheus sends it or as someone saved it,
into one labels mapping per series and a polars frame of ``series``, ``t_ns``, ``value``.

A week of one metric at 30 s for 1,000 pods is 20 million ``[1700000000,"12.5"]`` pairs; the
standard ``json`` module would build 60 million Python objects for them. So the values arrays
are cut out of the bytes as they stand and handed to polars' CSV parser as ``t,v`` lines (only
the small ``metric`` objects go through ``json``). The cut relies only on JSON's grammar (a
values array holds numbers and quoted numbers, never a bracket); any response that does not
look like that (another layout, a ``histograms`` key) is read by ``json`` instead, the same
rows either way.

Inputs: the response bytes. Outputs: :class:`RangeResult`. Errors: :class:`PromJsonError` (one
line): an ``error`` status with Prometheus' own message, a result that is not a matrix.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from rightsize.errors import RightsizeError


class PromJsonError(RightsizeError):
    """A range-query response that cannot be read (one line)."""


@dataclass(frozen=True, slots=True)
class RangeResult:
    labels: tuple[dict[str, str], ...]  # one per series, as the response names them
    points: pl.DataFrame  # series (u32), t_ns (i64), value (f64)


_RESULT = re.compile(rb'"result"\s*:\s*\[\s*')
_METRIC = re.compile(rb'\{\s*"metric"\s*:\s*')
# a JSON object of string -> string (a series' labels); possessive, so a run of pairs that
# does not end in "}" fails in one pass (with backtracking, the spaces around an optional comma
# split 2^n ways: 127 bytes took 3.3 s)
_LABELS = re.compile(rb'\{\s*+(?:"(?:[^"\\]|\\.)*+"\s*+:\s*+"(?:[^"\\]|\\.)*+"\s*+,?+\s*+)*+\}')
_VALUES = re.compile(rb'\s*,\s*"values"\s*:\s*\[\s*')
_VALUES_END = re.compile(rb'\]\s*\]')
_AFTER = re.compile(rb'\s*\}\s*(,|\])\s*')
_SPACE = re.compile(rb"\s+")
_TO_LINES = bytes.maketrans(b"]", b"\n")


def _check_status(head: bytes, body: bytes) -> None:
    if re.search(rb'"status"\s*:\s*"success"', head):
        return
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise PromJsonError("not a Prometheus API response (not JSON)") from None
    if isinstance(doc, dict) and doc.get("status") == "error":
        raise PromJsonError(f"Prometheus: {doc.get('errorType', 'error')}: "
                            f"{str(doc.get('error', ''))[:300]}")
    raise PromJsonError("not a Prometheus API response (no \"status\": \"success\")")


def _fast(body: bytes, start: int) -> tuple[list[dict[str, str]], list[bytes], list[int]] | None:
    """The series of a matrix as ``[t,"v"],...`` segments (whitespace removed) and their point
    counts, or None where the layout differs from Prometheus' own."""
    labels: list[dict[str, str]] = []
    chunks: list[bytes] = []
    counts: list[int] = []
    pos = start
    if body[pos:pos + 1] == b"]":
        return labels, chunks, counts
    while True:
        m = _METRIC.match(body, pos)
        lm = _LABELS.match(body, m.end()) if m else None
        vm = _VALUES.match(body, lm.end()) if lm else None
        if vm is None or lm is None:
            return None
        labels.append(json.loads(lm.group()))
        at = vm.end()
        if body[at:at + 1] == b"]":  # "values": [] (a saved file may have one)
            counts.append(0)
            after = _AFTER.match(body, at + 1)
        else:
            # compact JSON: the first "]]" ends the array (points are joined by "],[")
            close = body.find(b"]]", at)
            seg = body[at:close + 1] if close >= 0 else b""
            array_end = close + 2
            if close < 0 or b" " in seg or b"\n" in seg or b"\t" in seg or b"\r" in seg:
                end = _VALUES_END.search(body, at)  # pretty-printed: the slower way
                if end is None:
                    return None
                seg = _SPACE.sub(b"", body[at:end.start() + 1])
                array_end = end.end()
            if not seg.startswith(b"["):
                return None
            chunks.append(seg)
            counts.append(seg.count(b"["))
            after = _AFTER.match(body, array_end)
        if after is None:
            return None
        pos = after.end()
        if after.group(1) == b"]":
            return labels, chunks, counts


def _frame(counts: list[int], t_s: pl.Series, values: pl.Series) -> pl.DataFrame:
    ids = np.repeat(np.arange(len(counts), dtype=np.uint32), counts)
    # Prometheus' timestamps are whole milliseconds written as seconds with decimals
    t_ns = (t_s * 1000).round(0).cast(pl.Int64) * 1_000_000
    return pl.DataFrame({"series": pl.Series(ids, dtype=pl.UInt32), "t_ns": t_ns,
                         "value": values.cast(pl.Float64)})


def _values(v: Any) -> float:
    return float(v)  # "NaN", "+Inf", "-Inf" included


def _slow(body: bytes) -> RangeResult:
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PromJsonError(f"not valid JSON ({exc})") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise PromJsonError(f"not a range query result (resultType {kind!r}, want 'matrix': "
                            "save a /api/v1/query_range response)")
    labels: list[dict[str, str]] = []
    ts: list[float] = []
    vs: list[float] = []
    counts: list[int] = []
    for item in data.get("result") or []:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise PromJsonError("a result item without a 'metric' object")
        pairs = item.get("values") or []
        if "histograms" in item:
            raise PromJsonError("native histograms are not GPU metrics; query gauges")
        labels.append({str(k): str(v) for k, v in item["metric"].items()})
        try:
            ts.extend(float(p[0]) for p in pairs)
            vs.extend(_values(p[1]) for p in pairs)
        except (TypeError, ValueError, IndexError):
            raise PromJsonError("a 'values' item is not [time, \"value\"]") from None
        counts.append(len(pairs))
    return RangeResult(tuple(labels), _frame(counts, pl.Series(ts, dtype=pl.Float64),
                                             pl.Series(vs, dtype=pl.Float64)))


def parse_range(body: bytes) -> RangeResult:
    """A ``query_range`` response's series (see the module docstring)."""
    _check_status(body[:4096], body)
    rm = _RESULT.search(body)
    found = _fast(body, rm.end()) if rm and re.search(rb'"resultType"\s*:\s*"matrix"',
                                                     body[:rm.start()]) else None
    if found is None:
        return _slow(body)
    labels, chunks, counts = found
    if not any(chunks):
        return RangeResult((), pl.DataFrame(schema={"series": pl.UInt32, "t_ns": pl.Int64,
                                                    "value": pl.Float64}))
    # one pass: '[t,"v"],[t,"v"]' -> ',t,v\n,t,v\n' (a CSV whose first column is empty)
    text = b"," + b",".join(c for c in chunks if c).translate(_TO_LINES, b'["')
    try:
        table = pl.read_csv(io.BytesIO(text), has_header=False, new_columns=["_", "t", "v"],
                            schema_overrides={"_": pl.String, "t": pl.Float64, "v": pl.String})
    except pl.exceptions.PolarsError:
        return _slow(body)
    values = table.get_column("v")
    numeric = values.cast(pl.Float64, strict=False)
    if numeric.null_count():  # "+Inf" and the like: Python reads what polars does not
        numeric = pl.Series([_values(v) for v in values], dtype=pl.Float64)
    if table.height != sum(counts):
        return _slow(body)
    return RangeResult(tuple(labels), _frame(counts, table.get_column("t"), numeric))
