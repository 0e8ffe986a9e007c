"""Kineto events -> normalized frames: the category table and the unit conversions.

Input: batches of raw events as polars frames (columns of :func:`event_schema`: ids, names
and times as text so that mixed int/str pids and int/float timestamps survive). Output: the frames
of :mod:`rightsize.traces.schema`. ``split_events`` runs per batch (so unused columns are
dropped early); ``finish`` concatenates and adds what needs the whole trace (the time base,
device properties).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from rightsize.errors import InputError
from rightsize.traces import devices, schema
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


def mentions_comms(data: bytes) -> bool:
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
FLOW_CATS = {"ac2g": "launch", "async": "launch", "async_cpu_to_gpu": "launch",
             "fwdbwd": "fwdbwd"}
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
LEGACY_CATS = {"Kernel", "Runtime", "Operator", "Memcpy", "Memset"}
EVENT_FRAMES = ("kernels", "transfers", "runtime", "cpu_ops", "gpu_annotations", "steps",
                "memory", "flows", "syncs", "windows", "comms")
# What rightsize's analyzers never read, left out by a lean read: whole frames (left empty) and
# columns (left null). Flow events are a sixth of a trace's frames; a runtime call's pid, tid and
# api are text, 16 bytes a value each (~180 MB at 5 GB of trace).
LEAN_FRAMES = frozenset({"flows"})
LEAN_COLUMNS = {"runtime": ("pid", "tid", "api")}
LABELS = {"kernels": "kernel", "transfers": "memcpy/memset", "runtime": "runtime",
          "cpu_ops": "cpu op", "steps": "ProfilerStep"}

# What an event is, as one byte: a batch is partitioned by it (a text key costs twice the time).
# Host events (cpu ops, annotations, Python calls) are one kind, so they keep their file order.
_HOST = "host"
_HOST_ROLES = frozenset({"cpu_op", "user_annotation", "python_function"})
_KINDS = ("kernel", "memcpy", "memset", "runtime", "driver", _HOST, "gpu_annotation", "sync",
          "window", "memory", "flow")
_KIND_CODE = {kind: code for code, kind in enumerate(_KINDS)}

_STEP = r"^ProfilerStep#(\d+)$"
# "Memcpy HtoD (Pageable -> Device)"; older and other profilers write "Memcpy HtoD" alone: the
# direction is still known then, the memory kinds are not (null).
_MEMCPY = r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?$"


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


def _int(col: pl.Expr) -> pl.Expr:
    return col.cast(pl.Int64, strict=False)


def _arg(name: str) -> pl.Expr:
    return pl.col("args").struct.field(name)


def _external_id() -> pl.Expr:
    return pl.coalesce(_int(_arg("External id")), _int(_arg("external id")))


def _digits(col: pl.Expr) -> pl.Expr:
    """The first integer in a text such as "stream 7" or "7"."""
    return col.str.extract(r"(-?\d+)", 1).cast(pl.Int64, strict=False)


def split_events(events: pl.DataFrame, lean: bool = False) -> dict[str, pl.DataFrame]:
    """One batch of raw events -> partial frames (times still relative to the trace's base):
    those of the frames the batch has events of; ``lean``, less :data:`LEAN_FRAMES` and with
    :data:`LEAN_COLUMNS` null.

    The batch is partitioned once by what each event is (the args struct is wide: filtering the
    whole batch once per frame would copy it many times).
    """
    present = {f.name for f in events.schema["args"].fields}  # type: ignore[attr-defined]
    missing = [f for f in LEGACY_ARG_FIELDS if f not in present]
    if missing:
        events = events.with_columns(pl.col("args").struct.with_fields(
            [pl.lit(None, pl.String).alias(f) for f in missing]))
    roles = {cat: CATS.get(cat.lower()) for cat in events["cat"].unique().to_list()
             if cat is not None}  # this batch's categories, as written -> role
    codes = {cat: _KIND_CODE[_HOST if role in _HOST_ROLES else role]
             for cat, role in roles.items() if role is not None}
    kind = (
        pl.when(pl.col("name") == "[memory]").then(pl.lit(_KIND_CODE["memory"], pl.UInt8))
        .when(pl.col("ph") == "X").then(
            pl.col("cat").replace_strict(codes, default=None, return_dtype=pl.UInt8))
        .when(pl.col("ph").is_in(["s", "f", "t"])).then(pl.lit(_KIND_CODE["flow"], pl.UInt8))
    )
    times: dict[str, pl.Expr | pl.Series]
    if "ts_ns" in events.columns:  # the compiled parser converted them already
        times = {"dur_ns": pl.col("dur_ns").clip(lower_bound=0)}
    else:
        times = {"ts_ns": us_series_to_ns(events["ts"]),
                 "dur_ns": us_series_to_ns(events["dur"]).clip(lower_bound=0)}
    ev = events.with_columns(kind=kind, **times)
    comms, ev = _split_comm_args(ev, roles)  # the other frames never read them
    kinds = {_KINDS[key[0]]: df for key, df in
             ev.partition_by("kind", as_dict=True, include_key=False).items()
             if key[0] is not None}  # None: instants, metadata, unknown categories

    def of(*keys: str) -> pl.DataFrame | None:
        pieces = [kinds[k].with_columns(role=pl.lit(k)) for k in keys if k in kinds]
        return None if not pieces else pieces[0] if len(pieces) == 1 else pl.concat(pieces)

    raw = {"kernels": of("kernel"), "transfers": of("memcpy", "memset"),
           "runtime": of("runtime", "driver"), "gpu_annotations": of("gpu_annotation"),
           "syncs": of("sync"), "windows": of("window"), "memory": of("memory"),
           "flows": of("flow")}
    host = kinds.get(_HOST)
    if host is not None:  # one partition: cpu ops, annotations and Python calls keep file order
        host = host.with_columns(role=pl.col("cat").replace_strict(
            {cat: role for cat, role in roles.items() if role in _HOST_ROLES}, default=None,
            return_dtype=pl.String))
        is_step = host["name"].str.contains(_STEP)
        raw["cpu_ops"], raw["steps"] = host.filter(~is_step), host.filter(is_step)
    raw["comms"] = comms
    # A batch lacks most kinds (no memory events, syncs...): only the frames it has events of
    # are built (each builder is a dozen polars calls, an empty frame a few: ~14 ms and ~1 ms
    # of fixed cost per batch).
    return {name: _nulls_as_scalars(_lean(name, _BUILD[name](df), lean))
            for name, df in raw.items()
            if df is not None and df.height and not (lean and name in LEAN_FRAMES)}


def _lean(name: str, df: pl.DataFrame, lean: bool) -> pl.DataFrame:
    drop = LEAN_COLUMNS.get(name) if lean else None
    return df.with_columns(pl.lit(None, df.schema[c]).alias(c) for c in drop) if drop else df


def _nulls_as_scalars(df: pl.DataFrame) -> pl.DataFrame:
    """The frame with each column that holds only nulls as one null value broadcast (polars
    keeps a scalar column as one value and its length): a field the trace does not record
    (``Concrete Inputs`` before torch 2.1, a kernel's grid in 2022 traces) costs nothing,
    where a text column of nulls costs 16 bytes a row (98 MB in the cpu_ops of a 5 GB trace).
    """
    counts = df.null_count().row(0)
    nulls = [pl.lit(None, df.schema[name]).alias(name)
             for name, n in zip(df.columns, counts, strict=True) if n == df.height]
    return df.with_columns(nulls) if nulls else df


def _device_stream(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        device=_arg_or_digits(df, "device", "pid"),
        stream=_arg_or_digits(df, "stream", "tid"),
        correlation=_int(_arg("correlation")),
        external_id=_external_id(),
    )


def _arg_or_digits(df: pl.DataFrame, arg: str, column: str) -> pl.Expr:
    """The arg as an integer, else the first integer in ``column`` (older traces): the text is
    searched only in a batch where some event lacks the arg (a regex per event otherwise)."""
    value = df["args"].struct.field(arg)
    if value.dtype == pl.Int64 and not value.null_count():
        return _arg(arg)
    return pl.coalesce(_int(_arg(arg)), _digits(pl.col(column)))


def _split_comm_args(ev: pl.DataFrame, roles: dict[str, str | None]
                     ) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """The batch's kernels and cpu ops that carry collective args (None: none), and the batch
    without those args: partitioning copies every args field, and most batches have none."""
    fields = [f.name for f in ev.schema["args"].fields]  # type: ignore[attr-defined]
    if not any(f in fields for f in COMM_ARG_FIELDS):
        return None, ev
    args = ev["args"].struct
    present = [f for f in COMM_ARG_FIELDS if f in fields
               and args.field(f).null_count() < ev.height]
    comms = None
    if present:
        role = pl.when(pl.col("kind") == _KIND_CODE["kernel"]).then(pl.lit("kernel")).when(
            (pl.col("kind") == _KIND_CODE[_HOST]) & pl.col("cat").replace_strict(
                roles, default=None, return_dtype=pl.String).eq("cpu_op")).then(pl.lit("cpu_op"))
        comms = ev.filter(pl.any_horizontal([_arg(f).is_not_null() for f in present])) \
            .with_columns(role=role).filter(pl.col("role").is_not_null())
    kept = [f for f in fields if f not in COMM_ARG_FIELDS]
    ev = ev.with_columns(pl.struct([_arg(f) for f in kept]).alias("args"))
    return (comms if comms is not None and comms.height else None), ev


def _comms(df: pl.DataFrame) -> pl.DataFrame:
    kernel = pl.col("role") == "kernel"
    df = df.with_columns(
        kind=pl.when(kernel).then(pl.lit("kernel")).otherwise(pl.lit("cpu_op")),
        device=pl.when(kernel).then(pl.coalesce(_int(_arg("device")), _digits(pl.col("pid")))),
        stream=pl.when(kernel).then(pl.coalesce(_int(_arg("stream")), _digits(pl.col("tid")))),
        correlation=_int(_arg("correlation")),
        external_id=_external_id(),
        collective=_text(_arg("Collective name")),
        in_nelems=_int(_text(_arg("In msg nelems"))),
        out_nelems=_int(_text(_arg("Out msg nelems"))),
        dtype=_text(_arg("dtype")),
        group_size=_int(_text(_arg("Group size"))),
        pg_name=_text(_arg("Process Group Name")),
        pg_ranks=_text(_arg("Process Group Ranks")),
        seq=_int(_text(_arg("Seq"))),
    )
    return schema.conform("comms", df)


def _text(col: pl.Expr) -> pl.Expr:
    """An arg read as text, without the quotes a JSON string keeps in some parses."""
    return col.cast(pl.String).str.strip_chars('"')


def _kernels(df: pl.DataFrame) -> pl.DataFrame:
    df = _device_stream(df).with_columns(
        blocks_per_sm=_arg("blocks per SM").cast(pl.Float64, strict=False),
        occupancy_pct=pl.coalesce(
            _arg("est. achieved occupancy %").cast(pl.Float64, strict=False),
            _arg("theoretical occupancy %").cast(pl.Float64, strict=False),
        ),
    )
    return schema.conform("kernels", df)


def _transfers(df: pl.DataFrame) -> pl.DataFrame:
    parts = pl.col("name").str.extract_groups(_MEMCPY)
    df = _device_stream(df).with_columns(
        kind=pl.col("role"),
        direction=parts.struct.field("1"),
        src_memory=parts.struct.field("2").str.to_lowercase(),
        dst_memory=parts.struct.field("3").str.to_lowercase(),
        bytes=_int(_arg("bytes")),
    )
    df = df.with_columns(
        bandwidth_gbps=pl.when(pl.col("dur_ns") > 0)
        .then(pl.col("bytes") / pl.col("dur_ns"))
        .otherwise(None)
    )
    return schema.conform("transfers", df)


def _runtime(df: pl.DataFrame) -> pl.DataFrame:
    df = df.with_columns(
        api=pl.col("role"), correlation=_int(_arg("correlation")), external_id=_external_id()
    )
    return schema.conform("runtime", df)


def _cpu_ops(df: pl.DataFrame) -> pl.DataFrame:
    df = df.with_columns(
        cat=pl.col("role"),
        external_id=_external_id(),
        input_dims=_arg("Input Dims"),
        input_types=_arg("Input type"),
        concrete_inputs=_arg("Concrete Inputs"),
    )
    return schema.conform("cpu_ops", df)


def _steps(df: pl.DataFrame) -> pl.DataFrame:
    df = df.with_columns(step=pl.col("name").str.extract(_STEP, 1).cast(pl.Int64))
    return schema.conform("steps", df)


def _gpu_annotations(df: pl.DataFrame) -> pl.DataFrame:
    return schema.conform("gpu_annotations", _device_stream(df))


def _syncs(df: pl.DataFrame) -> pl.DataFrame:
    return schema.conform("syncs", _device_stream(df))


def _memory(df: pl.DataFrame) -> pl.DataFrame:
    names = {"device_type": "Device Type", "device": "Device Id", "delta_bytes": "Bytes",
             "total_allocated_bytes": "Total Allocated", "total_reserved_bytes": "Total Reserved"}
    return schema.conform("memory", df.with_columns(
        **{col: _int(_arg(arg)) for col, arg in names.items()}))


def _flows(df: pl.DataFrame) -> pl.DataFrame:
    df = df.filter(pl.col("cat").is_in(list(FLOW_CATS)))
    df = df.with_columns(cat=pl.col("cat").replace_strict(FLOW_CATS), phase=pl.col("ph"),
                         id=_int(pl.col("id")))
    return schema.conform("flows", df)


def _windows(df: pl.DataFrame) -> pl.DataFrame:
    return schema.conform("windows", df)


_BUILD = {"kernels": _kernels, "transfers": _transfers, "runtime": _runtime, "cpu_ops": _cpu_ops,
          "steps": _steps, "gpu_annotations": _gpu_annotations, "syncs": _syncs,
          "windows": _windows, "memory": _memory, "flows": _flows, "comms": _comms}


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
    broadcast null (:func:`_nulls_as_scalars`). Empties the pieces."""
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
