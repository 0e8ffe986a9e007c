"""Reader for PyTorch Profiler (Kineto) Chrome-trace JSON: ``.json``, ``.json.gz``.

Input: one trace file as torch.profiler writes it (one process / rank). Output: a normalized
:class:`rightsize.traces.schema.Trace`. Events are streamed in batches (``jsonscan``) and parsed
by the compiled parser (``kineto_scan``, where it was built) or by polars' NDJSON reader against
a declared event schema -- the same frames either way -- so a multi-GB trace is read in bounded
memory. Every number is converted here, once: Kineto ``ts``/``dur`` are microseconds (floats
with ns precision in newer traces, integers in older ones) and become exact int64 nanoseconds by
decimal arithmetic on their text (a float64 cannot hold epoch nanoseconds). When the trace has
``baseTimeNanoseconds``, ``ts`` is relative and the base is added, so ``ts_ns`` is always epoch
time.

Handled: current and 2021 category names (``Kernel``/``Runtime``/``Memcpy``/``Operator``,
``external id``, ``"stream 7"`` tids), missing ``ph:"M"`` metadata, non-numeric pids, AMD/ROCm
traces, CPU-only traces, ``computeProperties`` (2021) for ``deviceProperties``.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import math
import zlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from rightsize.errors import InputError
from rightsize.traces import (
    budget,
    jsonbytes,
    kineto_head,
    kineto_meta,
    kineto_scan,
    kineto_steps,
    limits,
    window,
)
from rightsize.traces import kineto_frames as kf
from rightsize.traces.jsonscan import Batch, Scan, ScanError
from rightsize.traces.readers import TRACE, JobHead, Memory, Read, ReadOptions
from rightsize.traces.readers import Progress as Detail
from rightsize.traces.schema import Trace

GZIP_MAGIC = b"\x1f\x8b"
# Measured (budget.py): a make_job.py rank of 155 MB (617k events, compact JSON with collective
# args: 366 MB peak), make_big_trace.py traces of 175 MB and 1.05 GB (545k / 3.27M events:
# 288 / 866 MB); the largest ratios above the floor.
MEMORY = Memory(per_byte=1.1, per_event=270.0)

Progress = Callable[[int, int], None]  # (bytes read, events parsed)
T = TypeVar("T")


def looks_like_kineto(head: bytes) -> bool:
    """True when the first bytes (decompressed) look like a Chrome-trace JSON document."""
    text = head.lstrip()[:1]
    return text in (b"{", b"[")


class KinetoReader:
    """The loader's entry for Kineto JSON (:class:`rightsize.traces.readers.Reader`); the
    registry tries it last: any JSON object or array is taken for a trace."""

    name = "kineto"
    described = "PyTorch Profiler/Kineto JSON (.json, .json.gz)"
    contributes = TRACE
    memory = MEMORY
    suffixes = (".json", ".json.gz")

    def detect(self, path: Path, head: bytes) -> bool:
        return looks_like_kineto(head)

    def job_head(self, head: bytes) -> JobHead | None:
        return kineto_head.job_head(head)

    def read(self, path: Path, options: ReadOptions, progress: Detail | None) -> Read:
        return Read.of_trace(read_kineto(path, _ticker(progress), lean=options.lean,
                                         steps=options.steps,
                                         budget_bytes=options.memory_budget_bytes))


READER = KinetoReader()


def _ticker(progress: Detail | None) -> Progress | None:
    """The reader's (bytes read, events parsed) as the loader's progress detail; None stays
    None (no progress: no per-batch callback)."""
    if progress is None:
        return None
    report = progress

    def tick(done: int, events: int) -> None:
        report(f"{done / 1e6:,.0f} MB, {events:,} events")

    return tick


def read_kineto(path: str | Path, progress: Progress | None = None, *,
                lean: bool = False, steps: tuple[int, int] | None = None,
                budget_bytes: int | None = None) -> Trace:
    """Read one Kineto trace file into the normalized schema (raises InputError).

    ``lean``: only what rightsize's analyzers read -- the flows frame is left empty and the
    ``pid``, ``tid`` and ``api`` of runtime calls null (``kineto_frames.LEAN_*``).
    ``steps`` (first, last step number) reads only those steps, and ``budget_bytes`` a window
    of steps that fits when the whole trace would need more (``traces/window.py``; then
    ``meta.window`` says which): both cost a first pass over the file."""
    path = Path(path)
    plan = _window(path, steps, budget_bytes) if steps is not None or budget_bytes else None
    trace = _open(path, lambda stream: _read_stream(path, stream, progress, lean, plan))
    if plan is not None:
        trace = dataclasses.replace(trace, meta=dataclasses.replace(trace.meta, window=plan))
    return trace


def _window(path: Path, steps: tuple[int, int] | None,
            budget_bytes: int | None) -> window.StepWindow | None:
    """The window to read (None: the whole trace fits the budget)."""
    if steps is None and budget_bytes is not None \
            and budget.estimate(path, MEMORY).need_bytes <= budget_bytes:
        return None  # no first pass for a trace that surely fits
    table = _open(path, lambda stream: kineto_steps.step_table(path, stream))
    return window.plan(table, path, steps, lambda n: budget.need_for_events(MEMORY, n),
                       budget_bytes)


def _open(path: Path, read: Callable[[Any], T]) -> T:
    """``read`` of the file's bytes (inflated when gzip), its errors as InputErrors."""
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise InputError(path, f"cannot open: {exc.strerror or exc}") from None
    with raw:
        magic = raw.read(2)
        raw.seek(0)
        stream = _gunzip(raw) if magic == GZIP_MAGIC else raw
        try:
            return read(stream)
        except ScanError as exc:
            raise InputError(path, str(exc)) from None
        except _GZIP_ERRORS as exc:
            raise InputError(path, f"corrupt or truncated gzip data ({exc})") from None
        except OSError as exc:
            raise InputError(path, f"read failed: {exc}") from None
        except pl.exceptions.PolarsError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(path, f"malformed trace event ({first})") from None


def _isal() -> Any:
    """python-isal (optional extra ``rightsize[fast-gzip]``: ISA-L inflates about 4x faster
    than zlib), or None."""
    try:
        return importlib.import_module("isal.igzip"), importlib.import_module("isal.isal_zlib")
    except ImportError:
        return None


_ISAL = _isal()
_GZIP_ERRORS: tuple[type[Exception], ...] = (gzip.BadGzipFile, zlib.error, EOFError) + (
    (_ISAL[1].error,) if _ISAL else ())


def _gunzip(raw: Any) -> Any:
    """A decompressing reader: python-isal's when installed, else the standard library's
    (same bytes, same errors: both raise BadGzipFile/EOFError, isal its own inflate error)."""
    if _ISAL is not None:
        return _ISAL[0].IGzipFile(fileobj=raw, mode="rb")
    return gzip.GzipFile(fileobj=raw, mode="rb")


def _read_stream(path: Path, stream: Any, progress: Progress | None, lean: bool,
                 plan: window.StepWindow | None = None) -> Trace:
    scan = Scan(stream)
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in kf.EVENT_FRAMES}
    cats: set[str] = set()
    n_events = 0
    # Splitting (bytes/numpy, holds the GIL) and parsing + partitioning (polars, releases it)
    # overlap: while batch N+1 is split, up to three earlier batches are parsed on worker
    # threads (:func:`_parse_threads`). Results are collected in file order; at most four
    # batches are held at once. The threads start with the second batch: a trace of one batch
    # (a few MB) is parsed here, without paying for them.
    parse = _Parser(lean)
    workers = _parse_threads()
    pool: ThreadPoolExecutor | None = None
    pending: deque[tuple[Future[Parsed] | None, Batch]] = deque()
    kineto_scan.keep_buffers(True)
    try:
        for batch in scan.batches():
            if pool is None and pending:
                pool = ThreadPoolExecutor(max_workers=workers)
                first = pending.pop()[1]
                pending.append((pool.submit(parse, first), first))
                del first
            if len(pending) == workers:
                n_events += _collect(_result(scan, parse, *pending.popleft()), parts, cats,
                                     plan)
            pending.append((pool.submit(parse, batch) if pool else None, batch))
            if progress is not None:
                progress(scan.bytes_read, n_events)
        batch = None  # type: ignore[assignment]  # free the last batch's bytes once parsed
        while pending:
            n_events += _collect(_result(scan, parse, *pending.popleft()), parts, cats, plan)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
        kineto_scan.keep_buffers(False)
    envelope = _envelope(path, scan.envelope)
    if n_events == 0:
        raise InputError(path, "the trace has no events (traceEvents is empty)")
    meta = kineto_meta.meta(path, envelope, cats, n_events)
    frames = kf.finish(parts, envelope, meta)
    if all(frames[name].height == 0 for name in kf.EVENT_FRAMES):
        raise InputError(path, f"none of the {n_events:,} events is a PyTorch Profiler event "
                               "(no known 'ph'/'cat' with a time)")
    _check_required(path, frames)
    return Trace(meta=meta, **frames)


def _parse_threads() -> int:
    """Parser threads: three where two CPUs are usable, else one. A batch's parse waits for a
    core or the GIL for ~10 ms of its ~25 (its polars steps, the splitter's copies), so on a
    2-core machine a third thread keeps both cores busier: the 175 MB Kineto trace's read
    0.759 -> 0.679 s (medians of 15 alternating reads, load ~8), the same CPU, its peak
    +11 MiB (one batch more in flight) below the analysis' own."""
    return 3 if limits.usable_cpus() > 1 else 1


def _envelope(path: Path, raw: bytes) -> dict[str, Any]:
    """The metadata outside the event array, as a dict with only valid strings and finite
    numbers (``Infinity``/``NaN`` become None; lone surrogates U+FFFD); a base time that is
    not finite is an error."""
    nesting = limits.cap(limits.NESTING)
    if jsonbytes.max_depth(raw) > nesting:
        raise InputError(path, str(limits.LimitError(limits.NESTING)))
    try:
        envelope = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InputError(path, f"not valid JSON outside the event array ({why})") from None
    if isinstance(envelope, list):
        envelope = {}
    if not isinstance(envelope, dict):
        raise InputError(path, "not a Chrome/Kineto trace (top level is not an object)")
    base = envelope.get("baseTimeNanoseconds")
    if isinstance(base, float) and not math.isfinite(base):
        raise InputError(path, f"baseTimeNanoseconds is {base}, not a time")
    return _clean(envelope)


def _clean(value: Any) -> Any:
    """Strings without lone surrogates (they cannot be written as UTF-8 later), and
    ``Infinity``/``NaN`` as None (strict JSON out)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


Parsed = tuple[dict[str, pl.DataFrame], set[str], int]  # frames, categories, events


class _Parser:
    """Parses batches on the worker threads (and a rejected fast-path batch, split again, on
    the main thread).

    Whole-microsecond times (older Kineto) are tried as Int64 first: no number text to convert
    and no second pass for the exact text (:func:`_raw_field`). The first batch polars refuses
    that way (float or quoted times, an arg of another type) turns it off for the rest of the
    trace, so a trace with float times pays a failed read for at most one batch per thread.
    Likewise the first batch with 2021 category names is read a second time with the legacy
    arg spellings, and every later batch with those directly."""

    def __init__(self, lean: bool = False) -> None:
        self.int_times = True
        self.legacy = False
        self.lean = lean  # only what the analyzers read (kineto_frames.LEAN_*)

    def __call__(self, batch: Batch | bytes) -> Parsed:
        # Two threads may parse at once: each decides from the flags as it read them (the
        # flags only ever turn one way, so a stale value costs a second read, never a wrong one).
        legacy = self.legacy
        comms = not legacy and kf.mentions_comms(_bytes(batch))  # collective args, rarely
        scanned = kineto_scan.read(batch, legacy, comms)  # the compiled parser: exact ns times
        if scanned is not None:
            events = scanned
        elif legacy:
            events = pl.read_ndjson(_ndjson(batch),
                                    schema=kf.event_schema(legacy=True, typed=False))
        else:
            events = self._read(_ndjson(batch), comms)
        cats = {c for c in events["cat"].unique().to_list() if c is not None}
        if cats & kf.LEGACY_CATS and not legacy:  # 2021 trace: read with the legacy args
            self.legacy = True
            scanned = kineto_scan.read(batch, True)
            events = scanned if scanned is not None else pl.read_ndjson(
                _ndjson(batch), schema=kf.event_schema(legacy=True, typed=False))
        if scanned is None and events["ts"].dtype == pl.String and _rounded_by_float(events["ts"]):
            events = events.with_columns(ts=_raw_field(_ndjson(batch), "ts", events.height))
        return kf.split_events(events, self.lean), cats, events.height

    def _read(self, ndjson: bytes, comms: bool) -> pl.DataFrame:
        if self.int_times:
            try:
                return pl.read_ndjson(ndjson,
                                      schema=kf.event_schema(int_times=True, comms=comms))
            except pl.exceptions.PolarsError:
                self.int_times = False
        try:
            return pl.read_ndjson(ndjson, schema=kf.event_schema(comms=comms))
        except pl.exceptions.PolarsError:  # an arg of another type somewhere: read all as text
            return pl.read_ndjson(ndjson, schema=kf.event_schema(typed=False, comms=comms))


def _ndjson(batch: Batch | bytes) -> bytes:
    return batch.ndjson if isinstance(batch, Batch) else batch


def _bytes(batch: Batch | bytes) -> bytes | bytearray:
    """The batch's bytes as read (document bytes where the batch has them, else NDJSON)."""
    if isinstance(batch, Batch):
        return batch.raw if batch.raw is not None else batch.ndjson
    return batch


# polars parses a JSON number to a float64 before rightsize sees its text: a fractional µs
# value at or above 2**53 / 1000 (about 104 days: absolute epoch µs) loses nanoseconds there.
_FLOAT_EXACT_US = 2.0**53 / 1000


def _rounded_by_float(ts: pl.Series) -> bool:
    """True when some ``ts`` is too large for a float64 to keep its nanoseconds, had it been
    written with decimals (polars' text no longer tells: it prints 1700000000123457.001 as
    ``1700000000123457``, like the integer)."""
    return bool((ts.cast(pl.Float64, strict=False).abs() >= _FLOAT_EXACT_US).any())


def _raw_field(ndjson: bytes, key: str, height: int) -> pl.Series:
    """A top-level number of each event as written in the file (one event per NDJSON line):
    the first ``"key": <number>`` of the line, read as text; a quoted value is kept."""
    lines = pl.read_csv(ndjson, has_header=False, separator="\x1f", quote_char=None,
                        schema={"line": pl.String()})["line"]
    text = lines.str.extract(rf'"{key}"\s*:\s*"?(-?[0-9][0-9.eE+-]*)', 1)
    if text.len() != height:  # an empty line somewhere: cannot align, keep polars' text
        raise pl.exceptions.ComputeError("NDJSON lines do not align with the events")
    return text.alias(key)


def _result(scan: Scan, parse: _Parser, future: Future[Parsed] | None, batch: Batch) -> Parsed:
    """The parsed batch (parsed here when no thread has it); a fast-path batch polars rejects
    is split again the careful way."""
    try:
        return future.result() if future is not None else parse(batch)
    except pl.exceptions.PolarsError:
        if batch.raw is None:
            raise
    return parse(scan.resplit(batch))


def _collect(parsed: Parsed, parts: dict[str, list[pl.DataFrame]], cats: set[str],
             plan: window.StepWindow | None = None) -> int:
    """File a parsed batch's frames (within the window, when reading one)."""
    frames, batch_cats, height = parsed
    cats.update(batch_cats)
    for name, df in frames.items():
        if plan is not None:
            df = df.filter(pl.col("step").is_in(plan.numbers)) if name == "steps" \
                else window.keep(df, plan.lo_ns, plan.hi_ns)
        if df.height:
            parts[name].append(df)
    return height


def _check_required(path: Path, frames: dict[str, pl.DataFrame]) -> None:
    """GPU activities and host ranges without a time are unusable: say so, do not guess."""
    for name in ("kernels", "transfers", "runtime", "cpu_ops", "steps"):
        df = frames[name]
        for col in ("ts_ns", "dur_ns"):
            missing = df[col].null_count()
            if missing:
                what = "ts" if col == "ts_ns" else "dur"
                raise InputError(
                    path, f"{missing} {kf.LABELS[name]} event(s) have no numeric '{what}' field"
                )
