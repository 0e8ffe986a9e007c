"""Kineto events -> normalized frames: the category table and the unit conversions.

Input: batches of raw events as polars frames (columns of :func:`event_schema`: ids, names
and times as text so that mixed int/str pids and int/float timestamps survive). Output: the frames
of :mod:`rightsize.traces.schema`. ``split_events`` runs per batch (so unused columns are
dropped early); ``finish`` concatenates and adds what needs the whole trace (the time base,
device properties).
"""

from __future__ import annotations

import functools
from typing import Any

import polars as pl

from rightsize.errors import InputError
from rightsize.traces import devices, schema
from rightsize.traces import kineto_build as kb
from rightsize.traces.schema import TraceMeta

S = pl.String()

# The args fields rightsize uses; every other arg is skipped by the reader (each field read
# costs parse time: launch geometry - grid, block, registers, shared memory, warps per SM - is
# used by no metric, so Kineto traces leave those columns null).
ARG_FIELDS = (
    "External id", "correlation", "device", "stream", "blocks per SM",
    "est. achieved occupancy %", "bytes", "Input Dims", "Input type", "Concrete Inputs",
    "Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved",
)
LEGACY_ARG_FIELDS = ("external id", "theoretical occupancy %")  # 2021 spellings
# The collective's metadata on NCCL kernels and record_param_comms ops (torch's profiler
# util.h names them; PyTorch 2.1+). Read as text: their types vary between torch versions.
# Only a batch that names "Collective name" is read with them (each field read costs every
# event of the batch a column: +16% parse time); 2021 traces never have them.
COMM_ARG_FIELDS = ("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size",
                   "Process Group Name", "Process Group Ranks", "Seq")
COMM_MARK = b'"Collective name"'


def mentions_comms(data: bytes | bytearray) -> bool:
    """True when a batch's bytes may hold collective args (read with :data:`COMM_ARG_FIELDS`)."""
    return COMM_MARK in data
INT_ARGS = {"External id", "external id", "correlation", "device", "stream", "bytes",
             "Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved"}
FLOAT_ARGS = {"blocks per SM", "est. achieved occupancy %", "theoretical occupancy %"}


def event_schema(legacy: bool = False, typed: bool = True,
                 int_times: bool = False, comms: bool = False) -> dict[str, pl.DataType]:
    """The schema events are parsed with.

    ``typed``: numeric args as numbers (faster); a trace that writes one differently (a string,
    a float id) fails it and is read with ``typed=False``, where everything is text: mixed
    int/str pids and int/float timestamps survive either way, and nested lists (shapes) arrive
    as their JSON text. ``legacy`` adds the 2021 spellings. ``int_times``: ``ts``/``dur`` as
    Int64, for traces that write whole microseconds (older Kineto): polars refuses any float,
    string or out-of-range value there, so a batch it accepts is exact without reading the
    numbers' text, and any other batch is read again with text times. ``comms`` adds the
    collective args (as text), for a batch that :func:`mentions_comms`.
    """
    fields = ARG_FIELDS + (LEGACY_ARG_FIELDS if legacy else ()) + (
        COMM_ARG_FIELDS if comms and not legacy else ())

    def kind(f: str) -> pl.DataType:
        if typed and f in INT_ARGS:
            return pl.Int64()
        if typed and f in FLOAT_ARGS:
            return pl.Float64()
        return S
    time = pl.Int64() if int_times else S
    return {"ph": S, "cat": S, "name": S, "pid": S, "tid": S, "ts": time, "dur": time, "id": S,
            "args": pl.Struct({f: kind(f) for f in fields})}


# Category names, current and 2021 legacy, folded to lower case -> role.
CATS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "runtime": "runtime",
    "cuda_driver": "driver",
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "python_function": "python_function",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_sync": "sync",
    "trace": "window",
}
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
LEGACY_CATS = {"Kernel", "Runtime", "Operator", "Memcpy", "Memset"}
EVENT_FRAMES = ("kernels", "transfers", "runtime", "cpu_ops", "gpu_annotations", "steps",
                "memory", "flows", "syncs", "windows", "comms")
# What rightsize's analyzers never read, left out by a lean read: whole frames (left empty) and
# columns (left null, ``kineto_build.LEAN_COLUMNS``). Flow events are a sixth of a trace's frames.
LEAN_FRAMES = frozenset({"flows"})
LABELS = {"kernels": "kernel", "transfers": "memcpy/memset", "runtime": "runtime",
          "cpu_ops": "cpu op", "steps": "ProfilerStep"}

# What an event is, as one byte: a batch is partitioned by it (a text key costs twice the time).
# Host events (cpu ops, annotations, Python calls) are one kind, so they keep their file order.
_HOST = "host"
_HOST_ROLES = frozenset({"cpu_op", "user_annotation", "python_function"})
_KINDS = ("kernel", "memcpy", "memset", "runtime", "driver", _HOST, "gpu_annotation", "sync",
          "window", "memory", "flow")
_KIND_CODE = {kind: code for code, kind in enumerate(_KINDS)}

def us_to_ns(col: pl.Expr) -> pl.Expr:
    """Exact microseconds-as-text -> int64 ns (rounded half up at the ns digit).

    The general path; :func:`us_series_to_ns` takes cheaper exact paths when a batch allows.
    """
    txt = col.str.strip_chars()
    sign = pl.when(txt.str.starts_with("-")).then(-1).otherwise(1)
    digits = txt.str.strip_chars_start("-+")
    whole = digits.str.extract(r"^(\d+)", 1).cast(pl.Int64, strict=False)
    frac = digits.str.extract(r"^\d*\.(\d+)$", 1).fill_null("")
    frac4 = (frac + "0000").str.slice(0, 4).cast(pl.Int64)
    frac_ns = (frac4 + 5) // 10  # round the 4th fractional digit (0.1 ns)
    exact = sign * (whole * 1000 + frac_ns)
    # Exponent notation (rare, e.g. 1e-05): float is exact enough at that magnitude.
    floaty = (col.cast(pl.Float64, strict=False) * 1000).round(0).cast(pl.Int64, strict=False)
    plain = digits.str.contains(r"^\d+(\.\d*)?$")
    return pl.when(plain).then(exact).otherwise(floaty)


def us_series_to_ns(s: pl.Series) -> pl.Series:
    """Exact µs text -> int64 ns for one batch, via the cheapest exact path that applies.

    Integer µs (older traces) and Kineto's three-decimal floats (newer ones) are converted by
    integer parsing alone; anything else goes through the general decimal path. A batch read
    with ``int_times`` arrives as Int64 already.
    """
    if s.dtype == pl.Int64:
        return s * 1000
    as_int = s.cast(pl.Int64, strict=False)
    if as_int.null_count() == s.null_count():
        return as_int * 1000
    if s.drop_nulls().str.contains(r"^-?\d+\.\d{3}$").all():
        return s.str.replace(".", "", literal=True).cast(pl.Int64, strict=False)
    return pl.select(us_to_ns(pl.lit(s))).to_series()


def split_events(events: pl.DataFrame, lean: bool = False) -> dict[str, pl.DataFrame]:
    """One batch of raw events -> partial frames (times still relative to the trace's base):
    those of the frames the batch has events of; ``lean``, less :data:`LEAN_FRAMES` and with
    ``kineto_build.LEAN_COLUMNS`` null.

    The args struct is unnested into a column per field (no copy), and each frame's rows are
    gathered with only the columns it reads (``kineto_build.READS``): a partition of the whole
    batch would copy every field of every event, flows included.
    """
    if isinstance(events.schema.get("args"), pl.Struct):
        events = events.select(pl.exclude("args"),
                               pl.col("args").struct.unnest().name.prefix(kb.ARG))
    roles = _roles(tuple(c for c in events["cat"].unique().sort().to_list() if c is not None))
    times: dict[str, pl.Expr | pl.Series]
    if "ts_ns" in events.columns:  # the compiled parser converted them already
        times = {"dur_ns": pl.col("dur_ns").clip(lower_bound=0)}
    else:
        times = {"ts_ns": us_series_to_ns(events["ts"]),
                 "dur_ns": us_series_to_ns(events["dur"]).clip(lower_bound=0)}
    ev = events.with_columns(*(_NULL_ARGS[f] for f in LEGACY_ARG_FIELDS
                               if kb.ARG + f not in events.columns), kind=_kind(roles), **times)
    code = ev["kind"]
    present = {_KINDS[c] for c in code.unique().to_list() if c is not None}  # None: instants,
    # metadata, unknown categories

    def rows(frame: str, *kinds: str) -> list[tuple[str, pl.DataFrame]]:
        kinds = tuple(k for k in kinds if k in present)
        if not kinds or (lean and frame in LEAN_FRAMES):
            return []
        cols = ev[list(kb.READS[frame])]
        return [(k, cols.filter(code == _KIND_CODE[k])) for k in kinds]

    raw = {"kernels": rows("kernels", "kernel"), "transfers": rows("transfers", "memcpy", "memset"),
           "runtime": rows("runtime", "runtime", "driver"),
           "gpu_annotations": rows("gpu_annotations", "gpu_annotation"),
           "syncs": rows("syncs", "sync"), "windows": rows("windows", "window"),
           "memory": rows("memory", "memory"), "flows": rows("flows", "flow")}
    host = rows("cpu_ops", _HOST)  # one gather: cpu ops, annotations and Python calls
    if host:
        is_step = host[0][1]["name"].str.contains(kb.STEP)
        raw["cpu_ops"] = [(_HOST, host[0][1].filter(~is_step))]
        raw["steps"] = [(_HOST, host[0][1].filter(is_step))] if is_step.any() else []
    # A batch lacks most kinds (no memory events, syncs...): only the frames it has events of
    # are built.
    host_roles = tuple((c, r) for c, r in roles if r in _HOST_ROLES)
    frames = {name: kb.build(name, [(k, df) for k, df in pieces if df.height], lean, host_roles)
              for name, pieces in raw.items() if any(df.height for _, df in pieces)}
    comms = _comm_rows(ev, dict(roles))  # only the collectives read their args
    if comms is not None:
        frames["comms"] = kb.comms(comms)
    return frames


_nulls_as_scalars = kb.nulls_as_scalars  # finish and the tests use it by this name
_NULL_ARGS = {f: pl.lit(None, pl.String).alias(kb.ARG + f) for f in LEGACY_ARG_FIELDS}


@functools.lru_cache(maxsize=64)
def _roles(cats: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    """A batch's categories, as written -> role."""
    return tuple((cat, CATS.get(cat.lower())) for cat in cats)


@functools.lru_cache(maxsize=64)
def _kind(roles: tuple[tuple[str, str | None], ...]) -> pl.Expr:
    """What each event is, as a code of :data:`_KINDS` (null: none of them)."""
    codes = {cat: _KIND_CODE[_HOST if role in _HOST_ROLES else role]
             for cat, role in roles if role is not None}
    return (
        pl.when(pl.col("name") == "[memory]").then(pl.lit(_KIND_CODE["memory"], pl.UInt8))
        .when(pl.col("ph") == "X").then(
            pl.col("cat").replace_strict(codes, default=None, return_dtype=pl.UInt8))
        .when(pl.col("ph").is_in(["s", "f", "t"])).then(pl.lit(_KIND_CODE["flow"], pl.UInt8))
    )


def _comm_rows(ev: pl.DataFrame, roles: dict[str, str | None]) -> pl.DataFrame | None:
    """The batch's kernels and cpu ops that carry collective args (None: none)."""
    present = [f for f in COMM_ARG_FIELDS
               if kb.ARG + f in ev.columns and ev[kb.ARG + f].null_count() < ev.height]
    if not present:
        return None
    role = pl.when(pl.col("kind") == _KIND_CODE["kernel"]).then(pl.lit("kernel")).when(
        (pl.col("kind") == _KIND_CODE[_HOST]) & pl.col("cat").replace_strict(
            roles, default=None, return_dtype=pl.String).eq("cpu_op")).then(pl.lit("cpu_op"))
    comms = ev.filter(pl.any_horizontal([pl.col(kb.ARG + f).is_not_null() for f in present])) \
        .with_columns(role=role).filter(pl.col("role").is_not_null())
    return comms if comms.height else None


def finish(
    parts: dict[str, list[pl.DataFrame]], envelope: dict[str, Any], meta: TraceMeta
) -> dict[str, pl.DataFrame]:
    """Concatenate the batches, move times onto the epoch clock, add device properties.

    Consumes ``parts``: each frame's pieces are released once that frame is built, not all at
    the end."""
    base = meta.base_time_ns or 0
    frames: dict[str, pl.DataFrame] = {}
    for name in EVENT_FRAMES:
        chunks = parts.pop(name, [])  # the last reference to this frame's pieces
        if not chunks:
            df = schema.empty(name)
        elif name == "flows":  # file order
            df = pl.concat(chunks, how="vertical")
        else:
            df = _sorted_concat(chunks)
        del chunks
        if base and "ts_ns" in df.columns:
            _check_no_wrap(df, base, meta)
            df = df.with_columns(pl.col("ts_ns") + base)
        frames[name] = df
    frames.update(devices.numbered(envelope, frames["kernels"], frames["memory"]))
    return frames


def _sorted_concat(chunks: list[pl.DataFrame]) -> pl.DataFrame:
    """The pieces as one frame in ``ts_ns`` order, exactly as ``concat`` then
    ``sort("ts_ns", maintain_order=True)`` (ties keep file order, nulls first), built one column
    at a time: each column of the pieces is released once its sorted copy exists, so the peak
    is the frame plus one column of it, not the frame twice. A column of nulls only stays one
    broadcast null (``kineto_build.nulls_as_scalars``). Empties the pieces."""
    ts = pl.concat([c.get_column("ts_ns") for c in chunks], rechunk=False)
    order: pl.Series | None = None
    if ts.null_count() or not ts.is_sorted():  # in time order already: the sort is the identity
        order = pl.DataFrame({"ts": ts}).with_row_index("i").sort("ts", maintain_order=True)["i"]
    del ts
    names, dtypes = chunks[0].columns, chunks[0].schema
    counts = [c.null_count().row(0) for c in chunks]
    columns = []
    for i, col in enumerate(names):
        if col != "ts_ns" and all(n[i] == c.height for n, c in zip(counts, chunks, strict=True)):
            continue  # nulls only: one broadcast null, below (none is materialized here)
        pieces = pl.concat([c.drop_in_place(col) for c in chunks], rechunk=False)
        columns.append(pieces.rechunk() if order is None else pieces.gather(order))
        del pieces
    df = pl.DataFrame(columns)  # ts_ns is always there: the frame has its height
    nulls = [pl.lit(None, dtypes[c]).alias(c) for c in names if c not in df.columns]
    return df.with_columns(nulls).select(names) if nulls else df


def _check_no_wrap(df: pl.DataFrame, base: int, meta: TraceMeta) -> None:
    """Relative times plus the base must stay inside int64 nanoseconds (polars would wrap)."""
    latest = df["ts_ns"].max()
    if isinstance(latest, int) and latest > (1 << 63) - 1 - base:
        raise InputError(meta.path, "event times plus baseTimeNanoseconds overflow int64 "
                                    "nanoseconds")
