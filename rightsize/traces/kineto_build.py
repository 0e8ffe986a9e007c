"""One batch's Kineto events of one kind -> rows of a normalized frame, in one select.

Input: rows of a batch (``kineto_frames.split_events``) with the args as a column per field
(``args.<field>``: :data:`ARG`), ``ts_ns``/``dur_ns`` and only the columns the frame reads
(:data:`READS`). Output: the rows in the frame's columns and dtypes (``schema.FRAMES``), a
column of nulls only as one broadcast null.

A batch holds a few thousand events of each kind, so making polars expressions costs about as
much as evaluating them: each frame's expressions are made once per shape (the frame, the
role of its rows, lean or not, whether the device and stream args are clean integers, the
batch's host categories) and kept (:func:`_plan`), and the rows are built by one ``select``.
"""

from __future__ import annotations

import functools

import polars as pl

from rightsize.traces import schema

ARG = "args."  # an args field's column once the struct is unnested: "args.External id"
STEP = r"^ProfilerStep#(\d+)$"
FLOW_CATS = {"ac2g": "launch", "async": "launch", "async_cpu_to_gpu": "launch",
             "fwdbwd": "fwdbwd"}
# What rightsize's analyzers never read, left null by a lean read (a runtime call's pid, tid
# and api are text, 16 bytes a value each: ~180 MB at 5 GB of trace).
LEAN_COLUMNS = {"runtime": ("pid", "tid", "api")}
# "Memcpy HtoD (Pageable -> Device)"; older and other profilers write "Memcpy HtoD" alone: the
# direction is still known then, the memory kinds are not (null).
_MEMCPY = r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?$"

_T, _IDS = ("name", "ts_ns", "dur_ns"), (ARG + "correlation", ARG + "External id",
                                         ARG + "external id")
_GPU = (*_T, "pid", "tid", ARG + "device", ARG + "stream", *_IDS)
# The columns each frame reads: a batch's rows of one kind are gathered with these only.
READS = {
    "kernels": (*_GPU, ARG + "blocks per SM", ARG + "est. achieved occupancy %",
                ARG + "theoretical occupancy %"),
    "transfers": (*_GPU, ARG + "bytes"), "gpu_annotations": _GPU, "syncs": _GPU,
    "runtime": (*_T, "pid", "tid", *_IDS), "windows": _T,
    "cpu_ops": (*_T, "pid", "tid", "cat", *_IDS, ARG + "Input Dims", ARG + "Input type",
                ARG + "Concrete Inputs"),
    "memory": ("ts_ns", *(ARG + f for f in ("Device Type", "Device Id", "Bytes",
                                            "Total Allocated", "Total Reserved"))),
    "flows": ("cat", "ph", "id", "pid", "tid", "ts_ns"),
}
READS["steps"] = READS["cpu_ops"]  # host rows are gathered once and split by name


def _arg(name: str) -> pl.Expr:
    return pl.col(ARG + name)


def _int(col: pl.Expr) -> pl.Expr:
    return col.cast(pl.Int64, strict=False)


def _digits(col: pl.Expr) -> pl.Expr:
    """The first integer in a text such as "stream 7" or "7"."""
    return col.str.extract(r"(-?\d+)", 1).cast(pl.Int64, strict=False)


def _external_id() -> pl.Expr:
    return pl.coalesce(_int(_arg("External id")), _int(_arg("external id")))


def _text(col: pl.Expr) -> pl.Expr:
    """An arg read as text, without the quotes a JSON string keeps in some parses."""
    return col.cast(pl.String).str.strip_chars('"')


def _arg_or_digits(arg: str, column: str, clean: bool) -> pl.Expr:
    """The arg as an integer, else the first integer in ``column`` (older traces): ``clean``
    (every row has it as an integer) spares the text search (a regex per event)."""
    return _arg(arg) if clean else pl.coalesce(_int(_arg(arg)), _digits(pl.col(column)))


def _clean(rows: pl.DataFrame, arg: str) -> bool:
    value = rows[ARG + arg]
    return value.dtype == pl.Int64 and not value.null_count()


def _gpu(clean: tuple[bool, bool]) -> dict[str, pl.Expr]:
    return {"device": _arg_or_digits("device", "pid", clean[0]),
            "stream": _arg_or_digits("stream", "tid", clean[1]),
            "correlation": _int(_arg("correlation")), "external_id": _external_id()}


def _kernels(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
             ) -> dict[str, pl.Expr]:
    return {**_gpu(clean),
            "blocks_per_sm": _arg("blocks per SM").cast(pl.Float64, strict=False),
            "occupancy_pct": pl.coalesce(
                _arg("est. achieved occupancy %").cast(pl.Float64, strict=False),
                _arg("theoretical occupancy %").cast(pl.Float64, strict=False))}


def _transfers(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
               ) -> dict[str, pl.Expr]:
    parts = pl.col("name").str.extract_groups(_MEMCPY)
    nbytes = _int(_arg("bytes"))
    return {**_gpu(clean), "kind": pl.lit(role), "direction": parts.struct.field("1"),
            "src_memory": parts.struct.field("2").str.to_lowercase(),
            "dst_memory": parts.struct.field("3").str.to_lowercase(), "bytes": nbytes,
            "bandwidth_gbps": pl.when(pl.col("dur_ns") > 0).then(nbytes / pl.col("dur_ns"))
            .otherwise(None)}


def _runtime(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
             ) -> dict[str, pl.Expr]:
    return {"api": pl.lit(role), "correlation": _int(_arg("correlation")),
            "external_id": _external_id()}


def _cpu_ops(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
             ) -> dict[str, pl.Expr]:
    return {"cat": pl.col("cat").replace_strict(dict(host), default=None,
                                                return_dtype=pl.String),
            "external_id": _external_id(), "input_dims": _arg("Input Dims"),
            "input_types": _arg("Input type"), "concrete_inputs": _arg("Concrete Inputs")}


def _steps(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
           ) -> dict[str, pl.Expr]:
    return {"step": pl.col("name").str.extract(STEP, 1).cast(pl.Int64)}


def _gpu_only(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
              ) -> dict[str, pl.Expr]:
    return _gpu(clean)


def _memory(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
            ) -> dict[str, pl.Expr]:
    names = {"device_type": "Device Type", "device": "Device Id", "delta_bytes": "Bytes",
             "total_allocated_bytes": "Total Allocated", "total_reserved_bytes": "Total Reserved"}
    return {col: _int(_arg(arg)) for col, arg in names.items()}


def _flows(role: str, clean: tuple[bool, bool], host: tuple[tuple[str, str], ...]
           ) -> dict[str, pl.Expr]:
    return {"cat": pl.col("cat").replace_strict(FLOW_CATS), "phase": pl.col("ph"),
            "id": _int(pl.col("id"))}


_EXPRS = {"kernels": _kernels, "transfers": _transfers, "runtime": _runtime,
          "cpu_ops": _cpu_ops, "steps": _steps, "gpu_annotations": _gpu_only,
          "syncs": _gpu_only, "windows": lambda *_: {}, "memory": _memory, "flows": _flows}


@functools.lru_cache(maxsize=512)
def _plan(frame: str, role: str, lean: bool, clean: tuple[bool, bool],
          host: tuple[tuple[str, str], ...]) -> tuple[tuple[pl.Expr, ...], frozenset[str]]:
    """The frame's columns as expressions over its gathered rows (``schema.conform``'s select
    with the frame's own columns made in it), and the columns that are a broadcast null."""
    made = _EXPRS[frame](role, clean, host)
    for col in LEAN_COLUMNS.get(frame, ()) if lean else ():
        made[col] = pl.lit(None)
    cols = schema.FRAMES[frame]
    nulls = frozenset(c for c in cols if c not in made and c not in READS[frame]) | frozenset(
        LEAN_COLUMNS.get(frame, ()) if lean else ())
    return tuple((made[c] if c in made else pl.col(c) if c in READS[frame] else pl.lit(None))
                 .cast(t).alias(c) for c, t in cols.items()), nulls


def build(frame: str, pieces: list[tuple[str, pl.DataFrame]], lean: bool,
          host: tuple[tuple[str, str], ...] = ()) -> pl.DataFrame:
    """The frame's rows from its pieces (the role of each piece's rows -- "memcpy", "memset"
    -- and the rows, in that order); ``host``: the batch's host categories -> role."""
    built, nulls = [], frozenset[str]()
    for role, rows in pieces:
        if frame == "flows":
            rows = rows.filter(pl.col("cat").is_in(list(FLOW_CATS)))
        clean = (_clean(rows, "device"), _clean(rows, "stream")) \
            if ARG + "device" in READS[frame] else (False, False)
        exprs, nulls = _plan(frame, role, lean, clean, host if frame == "cpu_ops" else ())
        built.append(rows.select(exprs))
    return nulls_as_scalars(built[0] if len(built) == 1 else pl.concat(built), nulls)


def nulls_as_scalars(df: pl.DataFrame, known: frozenset[str] = frozenset()) -> pl.DataFrame:
    """The frame with each column that holds only nulls as one null value broadcast (polars
    keeps a scalar column as one value and its length): a field the trace does not record
    (``Concrete Inputs`` before torch 2.1, a kernel's grid in 2022 traces) costs nothing,
    where a text column of nulls costs 16 bytes a row (98 MB in the cpu_ops of a 5 GB trace).
    ``known``: columns made as a broadcast null already."""
    counts = df.null_count().row(0)
    nulls = [_null(name, df.schema[name]) for name, n in zip(df.columns, counts, strict=True)
             if n == df.height and name not in known]
    return df.with_columns(nulls) if nulls else df


@functools.lru_cache(maxsize=256)
def _null(name: str, dtype: pl.DataType) -> pl.Expr:
    return pl.lit(None, dtype).alias(name)


def comms(df: pl.DataFrame) -> pl.DataFrame:
    """The collective calls of a batch (kernels and host ops with a ``role``)."""
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
    return nulls_as_scalars(schema.conform("comms", df))
