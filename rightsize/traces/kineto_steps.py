"""A first pass over a Kineto trace: its steps and each event's start, nothing else kept.

Role: before a trace too big for the memory budget is read over a window of steps
(``traces/window.py``), this pass finds the window: the host ``ProfilerStep#N`` ranges, their GPU
annotations (``gpu_user_annotation`` of the same name) and the start of every timed event (to
count the events each window holds). Each batch is parsed for five keys only (``ph``, ``cat``,
``name``, ``ts``, ``dur``; by the compiled parser where it was built, else polars) and dropped,
so memory stays at a batch plus 8 bytes an event. Times are as ``kineto_frames.split_events``
leaves them (before the trace's base time), so the window cuts the second pass's frames as they
are made.

Input: a path. Output: a :class:`~rightsize.traces.window.StepTable`. Errors as the reader's
(InputError naming the file); the second pass reports anything this one lets through.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from rightsize.errors import InputError
from rightsize.traces import kineto_frames as kf
from rightsize.traces import kscan, window
from rightsize.traces.jsonscan import Batch, Scan, ScanError

_KEYS = ("ph", "cat", "name", "ts", "dur")
_SCHEMA = {"ph": pl.String(), "cat": pl.String(), "name": pl.String(), "ts": pl.String(),
           "dur": pl.String()}
_STEP = r"^ProfilerStep#(\d+)$"
# The host categories a step range may carry, as the reader's (``kineto_frames.CATS``): traces of
# 2021 (torch 1.8-1.9, the TensorBoard plugin's samples) write ProfilerStep#N as an "Operator"
_HOST_CATS = tuple(cat for cat, role in kf.CATS.items()
                   if role in ("cpu_op", "user_annotation", "python_function"))
_GPU_CATS = ("gpu_user_annotation",)


def step_table(path: Path, stream: Any) -> window.StepTable:
    """The steps and event starts of the trace read from ``stream`` (the file's bytes,
    decompressed)."""
    scan = Scan(stream)
    steps: list[pl.DataFrame] = []
    starts: list[np.ndarray] = []
    try:
        for batch in scan.batches():
            events = _parse(scan, batch)
            timed = events.filter(pl.col("ts_ns").is_not_null()
                                  & (pl.col("ph").is_in(["X", "i", "I"])))
            starts.append(timed["ts_ns"].to_numpy())
            marks = timed.filter(pl.col("name").str.contains(_STEP))
            if marks.height:
                steps.append(marks.select(
                    "cat", "ts_ns", dur_ns=pl.col("dur_ns").fill_null(0).clip(lower_bound=0),
                    step=pl.col("name").str.extract(_STEP, 1).cast(pl.Int64)))
            del events, timed
    except ScanError as exc:
        raise InputError(path, str(exc)) from None
    marks = pl.concat(steps) if steps else pl.DataFrame(
        schema={"cat": pl.String(), "ts_ns": pl.Int64(), "dur_ns": pl.Int64(),
                "step": pl.Int64()})
    cat = pl.col("cat").str.to_lowercase()
    return window.step_table(marks.filter(cat.is_in(_HOST_CATS)),
                             marks.filter(cat.is_in(_GPU_CATS)),
                             np.concatenate(starts) if starts else np.zeros(0, np.int64))


def _parse(scan: Scan, batch: Batch) -> pl.DataFrame:
    """``ph``, ``cat``, ``name``, ``ts_ns``, ``dur_ns`` of a batch's events."""
    df = _compiled(batch)
    if df is not None:
        return df
    try:
        raw = pl.read_ndjson(batch.ndjson, schema=_SCHEMA)
    except pl.exceptions.PolarsError:
        if batch.raw is None:
            raise
        raw = pl.read_ndjson(scan.resplit(batch), schema=_SCHEMA)
    return raw.select("ph", "cat", "name", ts_ns=kf.us_series_to_ns(raw["ts"]),
                      dur_ns=kf.us_series_to_ns(raw["dur"]))


@functools.cache
def _kinds() -> tuple[int, ...]:
    from rightsize.traces.kineto_scan import TEXT, TIME

    return (TEXT, TEXT, TEXT, TIME, TIME)


def _compiled(batch: Batch) -> pl.DataFrame | None:
    """The five columns by the compiled parser (None: it is not built, or it leaves the
    batch to polars)."""
    from rightsize.traces.kineto_scan import _Column

    module = kscan.module()
    if module is None:
        return None
    data, array = (batch.raw, True) if batch.raw is not None else (batch.ndjson, False)
    columns = module.parse(data, _KEYS, (), _kinds(), array)
    if columns is None:
        return None
    names = ("ph", "cat", "name", "ts_ns", "dur_ns")
    return pl.DataFrame([pl.Series(_Column(c)).alias(n)
                         for n, c in zip(names, columns, strict=True)])
