"""Nsight Systems SQLite reader: ``nsys export --type sqlite`` -> normalized :class:`Trace`.

Role: the entry point for nsys exports. Opens the file read-only and immutable (it stays
byte-identical), checks it is an nsys export, and assembles the normalized frames from
:mod:`rightsize.traces.nsys_gpu` (devices, kernels, memcpy/memset) and
:mod:`rightsize.traces.nsys_host` (runtime/driver calls, NVTX ranges, steps, syncs, window).
With the ADBC reader and two or more CPUs the kernel table is read on a second thread (its own
connection) beside the other tables. GPU_METRICS samples (``--gpu-metrics-devices``) come from
:func:`read_nsys_gpu_metrics` in the :data:`rightsize.traces.samples.GPU_SAMPLES` shape,
because :class:`Trace` has no samples frame.

Inputs: a path (schema 2.x to 3.2x; missing tables mean missing data, not an error).
Outputs: a :class:`Trace` with ``meta.format == "nsys"``. Clock: nsys stores ns on the session
clock; when ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` exists every ``ts_ns`` is shifted to
epoch ns (``meta.profiler["clock"] == "utc_epoch_ns"``), else it stays session-relative
(``"session_relative_ns"``). Errors: :class:`rightsize.errors.InputError`, one line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from rightsize.errors import InputError
from rightsize.traces import budget, limits, nsys_gpu, nsys_host, window
from rightsize.traces.nsys_db import SQLITE_MAGIC, NsysDb, is_nsys_sqlite, one_line, open_nsys
from rightsize.traces.readers import TRACE, JobHead, Memory, Progress, Read, ReadOptions, Refused
from rightsize.traces.samples import conform_samples, empty_samples
from rightsize.traces.schema import Trace, TraceMeta, empty

__all__ = [
    "looks_like_nsys",
    "nsys_kernel_short_names",
    "read_nsys",
    "read_nsys_gpu_metrics",
]

# Measured (budget.py): a kernel-heavy export of 155 MB (nsys_large.py, 2.5M rows: 745 MB peak)
# and an NVTX-heavy one of 267 MB with 256 steps (memory_budget.py nsys-steps, 3.7M rows:
# 880 MB); the largest ratios above the floor. Events: rows of the kernel, runtime, memcpy,
# memset and NVTX tables.
MEMORY = Memory(per_byte=3.6, per_event=220.0)

# Metadata keys copied into meta.profiler (paths and user names are left out).
_META_KEYS = (
    "EXPORT_PRODUCT_VERSION",
    "EXPORT_SCHEMA_VERSION",
    "EXPORT_PLATFORM",
    "EXPORT_TIME_UTC",
)

# GPU_METRICS metric-name prefixes (case-insensitive) -> GPU_SAMPLES columns (percent 0-100).
_GPU_METRIC_COLUMNS = {
    "sms active": "gpm_sm_util_pct",
    "gr active": "gpm_graphics_util_pct",
    "tensor active": "gpm_tensor_util_pct",
    "compute warps in flight": "gpm_sm_occupancy_pct",
    "dram bandwidth": "gpm_dram_bw_util_pct",
    "dram read bandwidth": "gpm_dram_bw_util_pct",
    "dram write bandwidth": "gpm_dram_bw_util_pct",
}


# What a damaged export raises while its values are converted: SQLite's own errors, polars'
# schema errors, and Python's conversion errors for values of the wrong type or range
# (UnicodeDecodeError is a ValueError).
CORRUPT = (sqlite3.Error, pl.exceptions.PolarsError, ValueError, TypeError, OverflowError)


_EVENT_FRAMES = ("kernels", "transfers", "runtime", "cpu_ops", "gpu_annotations", "steps",
                 "memory", "syncs")


def looks_like_nsys(path: str | Path, head: bytes) -> bool:
    """True when the file is SQLite (``head`` = its first bytes) with nsys export tables."""
    return is_nsys_sqlite(path, head)


class NsysReader:
    """The loader's entry for nsys exports (:class:`rightsize.traces.readers.Reader`), imported
    through ``registry.NSYS`` only for SQLite files: an SQLite file is an nsys export or
    refused (no other reader takes SQLite)."""

    name = "nsys"
    described = "Nsight Systems SQLite (nsys export --type sqlite)"
    contributes = TRACE
    memory = MEMORY
    suffixes = (".sqlite", ".sqlite3")

    def job_head(self, head: bytes) -> JobHead | None:
        return None  # an export's rank is in its tables, not its first bytes

    def detect(self, path: Path, head: bytes) -> bool:
        if not head.startswith(SQLITE_MAGIC):
            return False
        if looks_like_nsys(path, head):
            return True
        raise Refused("an SQLite file that is not an Nsight Systems export")

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        return Read.of_trace(read_nsys(path, step_range=options.step_range,
                                       steps=options.steps,
                                       budget_bytes=options.memory_budget_bytes))


READER = NsysReader()


def _session_start_ns(db: NsysDb) -> int | None:
    if "utcEpochNs" not in db.columns("TARGET_INFO_SESSION_START_TIME"):
        return None
    row = db.conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    if not row or row[0] is None:
        return None
    value = row[0]
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 63:
        raise InputError(db.path, f"TARGET_INFO_SESSION_START_TIME.utcEpochNs is not a time "
                                  f"in int64 nanoseconds: {str(value)[:40]!r}")
    return value


def _profiler_meta(db: NsysDb, start_ns: int | None, dropped: list[str]) -> dict[str, Any]:
    info = db.key_values("META_DATA_EXPORT") or db.key_values("EXPORT_META_DATA")
    meta: dict[str, Any] = {
        "name": "Nsight Systems",
        "clock": "utc_epoch_ns" if start_ns is not None else "session_relative_ns",
        "session_start_utc_ns": start_ns,
        "metadata_table": (
            "META_DATA_EXPORT"
            if db.has("META_DATA_EXPORT")
            else "EXPORT_META_DATA"
            if db.has("EXPORT_META_DATA")
            else None
        ),
        "has_gpu_metrics": db.has("GPU_METRICS"),
    }
    for key in _META_KEYS:
        if key in info:
            meta[key.removeprefix("EXPORT_").lower()] = info[key]
    if dropped:
        meta["non_cuda_adapters"] = dropped
    return meta


_cpus = limits.usable_cpus  # a module attribute, so that tests can pretend another count


def _kernels_apart(path: Path, offset: int, devices: pl.DataFrame,
                   where: str | None) -> pl.DataFrame:
    """The kernel table through a connection of its own (one connection serves one thread)."""
    db = open_nsys(path)
    try:
        return nsys_gpu.read_kernels(db, offset, devices, where)
    finally:
        db.close()


_ACTIVITY_TABLES = (nsys_gpu.KERNEL_TABLE, nsys_host.RUNTIME_TABLE, nsys_gpu.MEMCPY_TABLE,
                    nsys_gpu.MEMSET_TABLE, nsys_host.NVTX_TABLE)
BUCKETS = 1 << 16  # time buckets the rows are counted in, to size a window by


def _window(db: NsysDb, offset: int, steps: pl.DataFrame, asked: tuple[int, int] | None,
            budget_bytes: int | None) -> window.StepWindow | None:
    """The window of steps to read: the steps are the NVTX step ranges, the events the rows
    of the activity tables and NVTX, counted in time buckets by SQLite (nothing per row
    comes back: a 4 GB export holds 60 million rows)."""
    spans = [db.conn.execute(f'SELECT min("start"), max("start") FROM "{t}"').fetchone()
             for t in _ACTIVITY_TABLES if db.columns(t)]
    spans = [(a, b) for a, b in spans if a is not None]
    edges, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if spans:
        lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
        width = max(1, (hi - lo) // BUCKETS + 1)
        got = [db.frame(f'SELECT ("start" - {lo}) / {width}, count(*) FROM "{t}" '
                        'WHERE "start" IS NOT NULL GROUP BY 1', {"b": pl.Int64(), "n": pl.Int64()})
               for t in _ACTIVITY_TABLES if db.columns(t)]
        hist = pl.concat(got).group_by("b").agg(pl.col("n").sum()).sort("b")
        edges = (hist["b"] * width + lo + offset).to_numpy()
        counts = hist["n"].to_numpy()
    table = window.step_table(steps.select("ts_ns", "dur_ns", "step"),
                              steps.clear().select("ts_ns", "dur_ns", "step"), edges, counts)
    return window.plan(table, db.path, asked, lambda n: budget.need_for_events(MEMORY, n),
                       budget_bytes)


def _where(plan: window.StepWindow, offset: int) -> str | None:
    """The window as an SQL condition on a table's session-clock ``start``/``end`` (rows
    without an end stay, so that a damaged row is still reported)."""
    cond = []
    if plan.lo_ns is not None:
        lo = plan.lo_ns - offset
        cond.append(f'("end" IS NULL OR "end" > {lo} OR "start" >= {lo})')
    if plan.hi_ns is not None:
        cond.append(f'"start" < {plan.hi_ns - offset}')
    return " AND ".join(cond) or None


def _build(db: NsysDb, step_range: str | None, asked: tuple[int, int] | None = None,
           budget_bytes: int | None = None) -> Trace:
    start_ns = _session_start_ns(db)
    offset = start_ns or 0
    devices, dropped = nsys_gpu.read_devices(db)
    plan = where = first_steps = None
    if asked is not None or (budget_bytes and budget.estimate(db.path, MEMORY).need_bytes > budget_bytes):
        # A window: the NVTX step ranges first, then only the window's rows of every table.
        first_steps = nsys_host.select_steps(nsys_host.step_ranges(db, offset, step_range),
                                             step_range, db.path)
        plan = _window(db, offset, first_steps, asked, budget_bytes)
        if plan is None:
            first_steps = None  # the whole export after all: its steps as usual
        else:
            where = _where(plan, offset)
            first_steps = first_steps.filter(pl.col("step").is_in(plan.numbers))
    # With ADBC and two or more CPUs the kernel table (the biggest) is read on a second thread
    # while this one reads the rest: SQLite, the ADBC driver and polars run without the GIL
    # (404 MiB export, quiet 2-core VM: 3.67 -> 2.19 s). The standard-library path turns
    # SQLite's text into Python strings under the GIL, so there a second thread cost 15%.
    pool = ThreadPoolExecutor(max_workers=1) if db.fast is not None and _cpus() > 1 else None
    try:
        pending = pool.submit(_kernels_apart, db.path, offset, devices, where) if pool else None
        readers: dict[str, Callable[[], pl.DataFrame]] = {
            "kernels": lambda: nsys_gpu.read_kernels(db, offset, devices, where),
            "runtime": lambda: nsys_host.read_runtime(db, offset, where),
            "cpu_ops": lambda: nsys_host.read_nvtx_ranges(db, offset, where),
            "transfers": lambda: nsys_gpu.read_transfers(db, offset, where),
        }
        # On one thread the biggest tables go first: the memory their reads freed is reused by
        # the smaller ones (the allocators keep freed pages a while; 404 MiB export: peak RSS
        # 929 -> 828 MiB against transfers, runtime, NVTX, kernels). Beside the kernel thread
        # the small transfers table goes first, so that the two big reads peak apart.
        order = ("transfers", "runtime", "cpu_ops") if pending else tuple(readers)
        got = {name: readers[name]() for name in order}
        syncs = nsys_host.read_syncs(db, offset)
        windows = nsys_host.read_windows(db, offset)
        kernels = pending.result() if pending is not None else got["kernels"]
        transfers, runtime, cpu_ops = got["transfers"], got["runtime"], got["cpu_ops"]
    finally:
        if pool:
            pool.shutdown(wait=True)
    steps = first_steps if first_steps is not None else \
        nsys_host.select_steps(cpu_ops, step_range, db.path)
    if plan is not None:
        syncs = window.keep(syncs, plan.lo_ns, plan.hi_ns)
    frames = (kernels, transfers, runtime, cpu_ops, syncs)
    meta = TraceMeta(
        path=str(db.path),
        format="nsys",
        vendor="nvidia",
        host_ops=False,  # runtime calls and NVTX ranges, no torch operators
        base_time_ns=start_ns,
        profiler=_profiler_meta(db, start_ns, dropped),
        event_count=sum(f.height for f in frames),
        window=plan,
    )
    return Trace(
        meta=meta,
        kernels=kernels,
        transfers=transfers,
        runtime=runtime,
        cpu_ops=cpu_ops,
        gpu_annotations=empty("gpu_annotations"),  # nsys has no GPU projection of NVTX
        steps=steps,
        memory=empty("memory"),
        flows=empty("flows"),  # launches link by correlation id instead
        syncs=syncs,
        devices=devices,
        windows=windows,
    )


def read_nsys(path: str | Path, step_range: str | None = None,
              steps: tuple[int, int] | None = None, budget_bytes: int | None = None) -> Trace:
    """Read an nsys SQLite export into a :class:`Trace` (see the module docstring).

    ``step_range``: the NVTX range name that marks a step (``--step-range``); None picks
    ranges that look like steps (rule in :mod:`rightsize.traces.nsys_host`), else no steps.
    ``steps`` (first, last step number) reads only those steps' rows, and ``budget_bytes`` a
    window of steps that fits when the whole export would need more (``traces/window.py``;
    ``meta.window`` says which).
    """
    db = open_nsys(path)
    try:
        trace = _build(db, step_range, steps, budget_bytes)
    except CORRUPT as exc:
        raise InputError(path, f"unreadable or damaged nsys export ({one_line(exc)})") from exc
    finally:
        db.close()
    for name in ("kernels", "transfers", "runtime", "cpu_ops", "steps"):
        frame = trace.frame(name)
        missing = frame.filter(pl.col("ts_ns").is_null() | pl.col("dur_ns").is_null()).height
        if missing:  # a damaged row: an activity without a time cannot be placed
            what = name.replace("_", " ").rstrip("s")
            raise InputError(path, f"{missing} {what} row(s) without a start or end time "
                                   "(a damaged export)")
    if all(trace.frame(name).is_empty() for name in _EVENT_FRAMES):
        raise InputError(path, "an Nsight Systems export without kernels, copies, runtime "
                               "calls or NVTX ranges")
    return trace


def nsys_kernel_short_names(path: str | Path) -> pl.DataFrame:
    """Distinct (``name``, ``short_name``): demangled kernel name -> nsys ``shortName``.

    A join key for Nsight Compute results beside :func:`rightsize.traces.ncu.normalize_kernel_name`.
    """
    db = open_nsys(path)
    try:
        return nsys_gpu.kernel_short_names(db)
    except CORRUPT as exc:
        raise InputError(path, f"unreadable or damaged nsys export ({one_line(exc)})") from exc
    finally:
        db.close()


def read_nsys_gpu_metrics(path: str | Path) -> pl.DataFrame:
    """GPU_METRICS samples (``--gpu-metrics-devices``) as GPU_SAMPLES rows, source "nsys".

    Joins GPU_METRICS(timestamp, typeId, metricId, value) with TARGET_INFO_GPU_METRICS on both
    typeId and metricId, maps metric names by case-insensitive prefix ("SMs Active",
    "Tensor Active", "DRAM Bandwidth"... see ``_GPU_METRIC_COLUMNS``; read+write DRAM bandwidth
    are summed) and pivots to one row per (timestamp, GPU). ``gpu_index`` is the metrics
    ``sourceId`` (nsys's GPU id). Empty when the export has no GPU_METRICS (the usual case).
    """
    db = open_nsys(path)
    try:
        return _gpu_metrics(db)
    except CORRUPT as exc:
        raise InputError(path, f"unreadable or damaged nsys export ({one_line(exc)})") from exc
    finally:
        db.close()


def _gpu_metrics(db: NsysDb) -> pl.DataFrame:
    info = db.columns("TARGET_INFO_GPU_METRICS")
    if not db.has("GPU_METRICS") or not {"typeId", "metricId", "metricName"} <= info:
        return empty_samples("gpu")
    source = '"sourceId"' if "sourceId" in info else "0"
    names = db.frame(
        f'SELECT DISTINCT "typeId", "metricId", {source}, "metricName" FROM TARGET_INFO_GPU_METRICS',
        {
            "type_id": pl.Int64(),
            "metric_id": pl.Int64(),
            "gpu_index": pl.Int32(),
            "metric": pl.String(),
        },
    )
    lower = pl.col("metric").str.to_lowercase()
    column = pl.lit(None, dtype=pl.String())
    for prefix, target in reversed(_GPU_METRIC_COLUMNS.items()):
        column = pl.when(lower.str.starts_with(prefix)).then(pl.lit(target)).otherwise(column)
    names = names.with_columns(column=column).drop_nulls("column")
    if names.is_empty():
        return empty_samples("gpu")
    values = db.frame(
        'SELECT "timestamp", "typeId", "metricId", "value" FROM GPU_METRICS',
        {"t": pl.Int64(), "type_id": pl.Int64(), "metric_id": pl.Int64(), "value": pl.Float64()},
    )
    offset = _session_start_ns(db) or 0
    long = values.join(names, on=["type_id", "metric_id"], how="inner")
    wide = (
        long.group_by("t", "gpu_index", "column")
        .agg(pl.col("value").sum())
        .pivot(on="column", index=["t", "gpu_index"], values="value")
        .with_columns(t_ns=pl.col("t") + offset, source=pl.lit("nsys"))
        .sort("t_ns", "gpu_index")
    )
    return conform_samples("gpu", wide)
