"""The compiled Kineto batch parser (``_kscan``), where it was built, with polars as the rule.

Role: :func:`read` turns one batch of events into the frame the polars path builds before
``kineto_frames.split_events`` (:func:`scanned_schema`), several times faster: a C pass over the
bytes (``rightsize/traces/_kscan.c``, built when the package is installed with a C compiler at
hand; see ``hatch_build.py``) fills Arrow columns that polars adopts through the Arrow C data
interface without copying. Times are converted from their digits to int64 nanoseconds
exactly as ``kineto_frames.us_to_ns`` converts their text, so they are exact without a second
pass; numeric args are the numbers polars' cast of their text gives.

Whatever the C pass does not take as polars would (invalid JSON, a float id, a nested object,
an escaped key...) returns None, and the caller parses the batch with polars: the frames and
the errors are the same either way (``tests/traces/test_kscan.py`` checks every shared trace
both ways). ``RIGHTSIZE_KINETO_PARSER=polars`` turns the C pass off.

Inputs: one batch of whole events (:class:`rightsize.traces.jsonscan.Batch`, or NDJSON bytes).
Outputs: a polars frame or None.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import polars as pl

from rightsize.traces import kineto_frames as kf
from rightsize.traces import kscan
from rightsize.traces.jsonscan import Batch

TEXT, TIME, INT, FLOAT = 0, 1, 2, 3  # column kinds, as _kscan.c numbers them
# Times come as exact int64 ns (converted from their digits as us_to_ns converts the text);
# numeric args as the numbers polars' cast of their text gives; the rest as text.
_TIMES = {"ts": "ts_ns", "dur": "dur_ns"}


def _kind(name: str) -> int:
    return INT if name in kf.INT_ARGS else FLOAT if name in kf.FLOAT_ARGS else TEXT


def scanned_schema(legacy: bool, comms: bool = False) -> dict[str, pl.DataType]:
    """What :func:`read` gives: ``event_schema(typed=True)`` with ``ts``/``dur`` as Int64
    nanoseconds named ``ts_ns``/``dur_ns`` (``kineto_frames.split_events`` takes either)."""
    schema = kf.event_schema(legacy, typed=True, comms=comms)
    return {_TIMES.get(name, name): pl.Int64() if name in _TIMES else dtype
            for name, dtype in schema.items()}


class _Layout(NamedTuple):
    """What the C module is asked for and what polars gets back, for one ``legacy`` flag."""

    keys: tuple[str, ...]  # top-level keys, "args" last
    args: tuple[str, ...]  # the args fields
    kinds: tuple[int, ...]  # one per column: top-level ones but "args", then the args fields
    names: tuple[str, ...]  # the columns' names in the frame
    schema: pl.Schema  # the frame's (scanned_schema)


@functools.cache
def _layout(legacy: bool, comms: bool) -> _Layout:
    schema = kf.event_schema(legacy, typed=False, comms=comms)
    top = tuple(name for name in schema if name != "args")
    args = tuple(f.name for f in schema["args"].fields)  # type: ignore[attr-defined]
    kinds = tuple(TIME if n in _TIMES else TEXT for n in top) + tuple(_kind(n) for n in args)
    names = tuple(_TIMES.get(n, n) for n in top) + args
    return _Layout((*top, "args"), args, kinds, names,
                   pl.Schema(scanned_schema(legacy, comms)))


def available() -> bool:
    return kscan.module() is not None


def keep_buffers(on: bool) -> None:
    """While a trace is read (True), the compiled parser keeps the column buffers polars frees
    for the next batch's columns (up to 16 MiB: no page faults and no unmapping for most
    batches); False gives them back and keeps none from then on. The pool is the process's:
    where two traces are read at once, the first to finish closes it for both (the other's
    buffers are then unmapped as they are freed, as without it)."""
    module = kscan.module()
    if module is not None:
        module.pool(on)


class _Column:
    """One column's capsules, handed to polars once (the Arrow PyCapsule interface)."""

    __slots__ = ("_capsules",)

    def __init__(self, capsules: tuple[Any, Any]) -> None:
        self._capsules = capsules

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        return self._capsules


def read(batch: Batch | bytes, legacy: bool, comms: bool = False) -> pl.DataFrame | None:
    """The batch's events with :func:`scanned_schema`, or None (then polars parses it). A batch
    with document bytes (``raw``) is read from them, no NDJSON made; bytes are NDJSON.
    ``comms``: with the collective args too."""
    module = kscan.module()
    if module is None:
        return None
    if isinstance(batch, Batch):
        data, array = (batch.raw, True) if batch.raw is not None else (batch.ndjson, False)
    else:
        data, array = batch, False
    layout = _layout(legacy, comms)
    columns = module.parse(data, layout.keys, layout.args, layout.kinds, array)
    if columns is None:
        return None
    series = [pl.Series(_Column(c)).alias(name)
              for name, c in zip(layout.names, columns, strict=True)]
    top = len(layout.keys) - 1
    df = pl.DataFrame(series[:top]).with_columns(pl.DataFrame(series[top:]).to_struct("args"))
    if df.schema != layout.schema:  # a polars that adopts the columns otherwise
        return None
    return df
