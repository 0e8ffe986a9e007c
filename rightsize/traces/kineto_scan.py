"""The compiled Kineto batch parser (``_kscan``), where it was built, with polars as the rule.

Role: :func:`read` turns one NDJSON batch of events into the frame polars' NDJSON reader gives
with ``kineto_frames.event_schema(typed=False)`` (every field as text), several times faster:
a C pass over the bytes (``rightsize/traces/_kscan.c``, built when the package is installed
with a C compiler at hand; see ``hatch_build.py``) fills Arrow columns that polars adopts
through the Arrow C data interface. Timestamps arrive as the text written in the file, so they
are exact to the nanosecond without a second pass.

Whatever the C pass does not take as polars would (invalid JSON, a float id, a nested object,
an escaped key...) returns None, and the caller parses the batch with polars: the frames and
the errors are the same either way (``tests/traces/test_kscan.py`` checks every shared trace
both ways). ``RIGHTSIZE_KINETO_PARSER=polars`` turns the C pass off.

Inputs: one batch of whole events (:class:`rightsize.traces.jsonscan.Batch`, or NDJSON bytes).
Outputs: a polars frame or None.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import polars as pl

from rightsize.traces import kineto_frames as kf
from rightsize.traces.jsonscan import Batch

PARSER_ENV = "RIGHTSIZE_KINETO_PARSER"  # "polars": never use the compiled parser


def _load() -> Any:
    try:
        return importlib.import_module("rightsize.traces._kscan")
    except ImportError:  # built without a C compiler: polars parses every batch
        return None


_kscan = _load()
# Fields whose fractional numbers are kept as written: times (read exactly from their text)
# and the float args (cast to Float64: the same value from any spelling of it).
_DECIMAL = frozenset({"ts", "dur", *kf.FLOAT_ARGS})


def available() -> bool:
    return _kscan is not None and os.environ.get(PARSER_ENV, "").strip().lower() != "polars"


class _Column:
    """One column's capsules, handed to polars once (the Arrow PyCapsule interface)."""

    __slots__ = ("_capsules",)

    def __init__(self, capsules: tuple[Any, Any]) -> None:
        self._capsules = capsules

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        return self._capsules


def read(batch: Batch | bytes, legacy: bool) -> pl.DataFrame | None:
    """The batch's events as text columns, or None (then polars parses it). A fast-path batch
    is read from its document bytes (no NDJSON made); bytes are NDJSON."""
    if not available():
        return None
    if isinstance(batch, Batch):
        data, array = (batch.raw, True) if batch.raw is not None else (batch.ndjson, False)
    else:
        data, array = batch, False
    schema = kf.event_schema(legacy, typed=False)
    top = tuple(name for name in schema if name != "args")
    args = tuple(f.name for f in schema["args"].fields)  # type: ignore[attr-defined]
    columns = _kscan.parse(data, (*top, "args"), args, _DECIMAL, array)
    if columns is None:
        return None
    series = [pl.Series(name, _Column(c)) for name, c in zip(top + args, columns, strict=True)]
    df = pl.DataFrame(series[:len(top)]).with_columns(
        pl.DataFrame(series[len(top):]).to_struct("args"))
    if df.schema != pl.Schema(schema):  # a polars that adopts the columns another way
        return None
    return df
