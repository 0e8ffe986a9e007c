"""Host-side tables of an Nsight Systems export: API calls, NVTX ranges, steps, syncs, window.

Role: turn ``CUPTI_ACTIVITY_KIND_RUNTIME``, ``NVTX_EVENTS``,
``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` and ``ANALYSIS_DETAILS`` into the normalized
``runtime``, ``cpu_ops`` (cat ``user_annotation``), ``steps``, ``syncs`` and ``windows`` frames.

Inputs: an open :class:`~rightsize.traces.nsys_db.NsysDb`, the clock offset in ns and the step
rule. Outputs: conformed polars frames.

Step rule (documented in docs/formats.md): with ``step_range=None`` the NVTX ranges whose name
is a step word followed by a number (``ProfilerStep#3``, ``step 3``, ``train_step_3``,
``iteration 3``, ``iter-3``, ``batch 3``; case-insensitive) are steps, using the family with the
most ranges; with ``step_range="NAME"`` the ranges named exactly ``NAME`` (numbered in time
order from 0) or ``NAME`` followed by a number are steps. Only the outermost range of nested
matches counts. No match -> no steps (the whole GPU span is then the window).
"""

from __future__ import annotations

import polars as pl

from rightsize.errors import InputError
from rightsize.traces.nsys_db import NsysDb, col, lookup, owned, time_ordered
from rightsize.traces.schema import conform, empty

RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"

# NVTX event types (ENUM_NSYS_EVENT_TYPE, stable across versions): push/pop and start/end ranges.
NVTX_RANGE_TYPES = (59, 60)
# CUPTI's API-call event classes (ENUM_NSYS_EVENT_CLASS): 0 CUDA runtime, 1 CUDA driver.
# 2021 exports add a second copy of each call under another class (67), with callchains.
_CUPTI_API_CLASSES = (0, 1)
# A trailing CUPTI version suffix: cudaLaunchKernel_v7000 -> cudaLaunchKernel (keeps "_v2").
_VERSION_SUFFIX = r"_v\d{4,}$"
# 0xFFFFFFFF: "no stream" in CUPTI synchronization records.
_NO_STREAM = 0xFFFFFFFF

STEP_WORDS = r"profilerstep#|(?:train[_ ]?)?step|iteration|iter|batch"
# Group 1: the step word (the "family"), group 2: the step number. (?i): polars takes no flags.
DEFAULT_STEP_PATTERN = rf"(?i)^\s*({STEP_WORDS})[\s_#:=-]*(\d+)\s*$"

_SYNC_NAMES = {  # Kineto's cuda_sync names
    "EVENT_SYNCHRONIZE": "Event Sync",
    "STREAM_WAIT_EVENT": "Stream Wait Event",
    "STREAM_SYNCHRONIZE": "Stream Sync",
    "CONTEXT_SYNCHRONIZE": "Context Sync",
}
_SYNC_FALLBACK = {
    1: "EVENT_SYNCHRONIZE",
    2: "STREAM_WAIT_EVENT",
    3: "STREAM_SYNCHRONIZE",
    4: "CONTEXT_SYNCHRONIZE",
}


def _pid_tid(gtid: pl.Series) -> list[pl.Expr]:
    """pid/tid strings of a serialized GlobalId column ``gtid``, computed once per distinct id.

    pid = (gid >> 24) & 0xFFFFFF, tid = gid & 0xFFFFFF.
    """
    ids = gtid.unique().drop_nulls()
    pid = ((ids // (1 << 24)) % (1 << 24)).cast(pl.String())
    tid = (ids % (1 << 24)).cast(pl.String())
    return [lookup("gtid", ids, pid).alias("pid"), lookup("gtid", ids, tid).alias("tid")]


def _constant(df: pl.DataFrame, *names: str) -> pl.DataFrame:
    """Columns holding one value on every row (one process: its pid) kept as that value once.

    polars stores a literal column as one scalar and a length (16 bytes a row otherwise: 27 MiB
    for 1.7M NVTX ranges); the values the analyzers read are the same.
    """
    if df.height == 0:
        return df
    return df.with_columns(
        pl.lit(df[n][0], dtype=df.schema[n]).alias(n)
        for n in names
        if df[n].null_count() == 0 and df[n].n_unique() == 1
    )


def _times(offset_ns: int) -> list[pl.Expr]:
    return [
        (pl.col("start") + offset_ns).alias("ts_ns"),
        (pl.col("end") - pl.col("start")).clip(lower_bound=0).alias("dur_ns"),
    ]


def read_runtime(db: NsysDb, offset_ns: int, where: str | None = None) -> pl.DataFrame:
    """CUDA runtime and driver calls; ``api`` is "runtime" for ``cuda*`` names, else "driver"."""
    cols = db.columns(RUNTIME_TABLE)
    if not cols:
        return empty("runtime")
    raw = db.select(RUNTIME_TABLE, [
        (col(cols, "globalTid"), "gtid", pl.Int64()),
        ('"start"', "start", pl.Int64()),
        ('"end"', "end", pl.Int64()),
        (col(cols, "nameId"), "name_id", pl.Int64()),
        (col(cols, "correlationId"), "correlation", pl.Int64()),
        (col(cols, "eventClass"), "event_class", pl.Int64()),
    ], where)
    # Drop the duplicate (non-CUPTI class) copy of a call that also has a CUPTI row.
    cupti = pl.col("event_class").is_in(_CUPTI_API_CLASSES) | pl.col("event_class").is_null()
    others = raw.filter(~cupti)
    if not others.is_empty():
        keys = raw.filter(cupti).select("gtid", "correlation").unique()
        if not others.join(keys, on=["gtid", "correlation"], how="semi").is_empty():
            raw = raw.filter(cupti)
    raw = time_ordered(raw)
    # Per distinct name and thread, not per row: the suffix regex, the api and the id strings,
    # then mapped column by column (a join would copy every column of the frame once more).
    names = (
        db.strings(raw["name_id"])
        .select("id", name=pl.col("value").str.replace(_VERSION_SUFFIX, ""))
        .with_columns(
            api=pl.when(pl.col("name").str.starts_with("cuda"))
            .then(pl.lit("runtime"))
            .otherwise(pl.lit("driver"))
        )
    )
    out = raw.select(
        *_pid_tid(raw["gtid"]),
        *_times(offset_ns),
        *owned("correlation"),
        name=lookup("name_id", names["id"], names["name"]),
        api=lookup("name_id", names["id"], names["api"]).fill_null("driver"),  # no string
    )
    return conform("runtime", _constant(out, "pid", "tid"))


def read_nvtx_ranges(db: NsysDb, offset_ns: int, only: str | None = None) -> pl.DataFrame:
    """NVTX push/pop and start/end ranges as cpu_ops rows with cat "user_annotation"
    (``only``: an SQL condition more, e.g. a window of time)."""
    cols = db.columns(NVTX_TABLE)
    if not cols:
        return empty("cpu_ops")
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    where = f"end IS NOT NULL AND end >= start AND eventType IN ({types})"
    if "eventType" not in cols:
        where = "end IS NOT NULL AND end >= start"
    if only:
        where = f"{where} AND ({only})"
    raw = db.select(NVTX_TABLE, [
        (col(cols, "globalTid"), "gtid", pl.Int64()),
        ('"start"', "start", pl.Int64()),
        ('"end"', "end", pl.Int64()),
        (col(cols, "text"), "text", pl.String()),
        (col(cols, "textId"), "text_id", pl.Int64()),
    ], where)
    raw = time_ordered(raw)
    names = db.strings(raw["text_id"])
    interned = lookup("text_id", names["id"], names["value"])
    # Each row's text mapped to its distinct value: the rows then point into one small buffer
    # (1.7M ranges of 188 names: 27 MiB instead of 127). coalesce would write every string
    # anew, so it is used only when rows have either kind of name.
    texts = raw["text"].drop_nulls().unique()
    by_text = lookup("text", texts, texts)
    if raw["text_id"].null_count() == raw.height:
        name = by_text
    elif texts.is_empty():
        name = interned
    else:
        name = pl.coalesce(by_text, interned)
    out = raw.select(
        *_pid_tid(raw["gtid"]),
        *_times(offset_ns),
        name=name,
        cat=pl.lit("user_annotation"),
    )
    return conform("cpu_ops", _constant(out, "pid", "tid"))


def _outermost(ranges: pl.DataFrame) -> pl.DataFrame:
    """Drop ranges that lie inside an earlier range of the same thread (nested step markers)."""
    ranges = ranges.sort("tid", "ts_ns", pl.col("dur_ns"), descending=[False, False, True])
    end = pl.col("ts_ns") + pl.col("dur_ns")
    prev_max_end = end.cum_max().shift(1).over("tid")
    return ranges.filter(prev_max_end.is_null() | (end > prev_max_end))


def step_ranges(db: NsysDb, offset_ns: int, step_range: str | None) -> pl.DataFrame:
    """The NVTX ranges whose name may mark a step (a superset of what :func:`select_steps`
    takes from them), read without the others: the distinct names first, then only the rows
    of those names (an export of 50 million NVTX ranges holds a few thousand steps)."""
    cols = db.columns(NVTX_TABLE)
    if not cols:
        return empty("cpu_ops")
    names = db.frame(f'SELECT DISTINCT {col(cols, "text")}, {col(cols, "textId")} '
                     f"FROM {NVTX_TABLE}", {"text": pl.String(), "text_id": pl.Int64()})
    ids = db.strings(names["text_id"])
    by_id = names.join(ids, left_on="text_id", right_on="id", how="inner")

    def may_step(column: pl.Expr) -> pl.Expr:
        return column.str.contains(DEFAULT_STEP_PATTERN) if step_range is None \
            else column.str.starts_with(step_range)

    texts = names.filter(may_step(pl.col("text")))["text"].unique().to_list()
    text_ids = by_id.filter(may_step(pl.col("value")))["text_id"].unique().to_list()
    if not texts and not text_ids:
        return empty("cpu_ops")
    quoted = ",".join("'" + t.replace("'", "''") + "'" for t in texts)
    parts = ([f'"text" IN ({quoted})'] if texts else []) + (
        [f'"textId" IN ({",".join(str(int(i)) for i in text_ids)})'] if text_ids else [])
    return read_nvtx_ranges(db, offset_ns, " OR ".join(parts))


def select_steps(nvtx: pl.DataFrame, step_range: str | None, path: object) -> pl.DataFrame:
    """Steps from NVTX ranges by the rule in the module docstring (empty when none match)."""
    names = pl.col("name")
    if step_range is None:
        pattern = DEFAULT_STEP_PATTERN
        found = nvtx.filter(names.str.contains(pattern)).with_columns(
            family=names.str.extract(pattern, 1).str.to_lowercase(),
            step=names.str.extract(pattern, 2).cast(pl.Int64),
        )
        if found.is_empty():
            return empty("steps")
        family = found.group_by("family").len().sort("len", "family", descending=[True, False])
        found = found.filter(pl.col("family") == family["family"][0])
    else:
        # NAME itself is matched literally (it may hold regex characters such as "#").
        rest = pl.when(names.str.starts_with(step_range)).then(names.str.slice(len(step_range)))
        number = rest.str.extract(r"^[\s_#:=-]*(\d+)\s*$", 1)
        found = nvtx.filter((names == step_range) | number.is_not_null()).with_columns(
            step=number.cast(pl.Int64)
        )
        if found.is_empty():
            seen = nvtx.group_by("name").len().sort("len", descending=True).head(5)["name"]
            hint = ", ".join(repr(n) for n in seen.to_list()) or "none"
            raise InputError(path, f"no NVTX range named {step_range!r} (most frequent: {hint})")
    steps = _outermost(found).sort("ts_ns")
    ordinal = pl.int_range(pl.len(), dtype=pl.Int64)
    steps = steps.with_columns(step=pl.coalesce("step", ordinal))
    return conform("steps", steps)


def read_syncs(db: NsysDb, offset_ns: int) -> pl.DataFrame:
    """CUDA synchronization intervals, named as Kineto names them (``Stream Sync``...)."""
    cols = db.columns(SYNC_TABLE)
    if not cols:
        return empty("syncs")
    raw = db.select(SYNC_TABLE, [
        (col(cols, "deviceId"), "device", pl.Int32()),
        (col(cols, "streamId"), "stream", pl.Int64()),
        ('"start"', "start", pl.Int64()),
        ('"end"', "end", pl.Int64()),
        (col(cols, "correlationId"), "correlation", pl.Int64()),
        (col(cols, "syncType"), "sync_type", pl.Int64()),
    ])
    enum = db.enum("ENUM_CUPTI_SYNC_TYPE")
    kinds = (
        {i: n.removeprefix("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_") for i, n in enum.items()}
        if enum
        else _SYNC_FALLBACK
    )
    names = {i: _SYNC_NAMES.get(k, "Unknown Sync") for i, k in kinds.items()}
    out = raw.with_columns(
        *_times(offset_ns),
        stream=pl.when(pl.col("stream") != _NO_STREAM).then(pl.col("stream")),
        name=pl.col("sync_type").replace_strict(names, default="Unknown Sync"),
    )
    return conform("syncs", out.sort("ts_ns", maintain_order=True))


def read_windows(db: NsysDb, offset_ns: int) -> pl.DataFrame:
    """The capture window from ANALYSIS_DETAILS (startTime/stopTime), named "nsys capture"."""
    cols = db.columns("ANALYSIS_DETAILS")
    if not {"startTime", "stopTime"} <= cols:
        return empty("windows")
    raw = db.frame(
        "SELECT startTime, stopTime FROM ANALYSIS_DETAILS",
        {"start": pl.Int64(), "end": pl.Int64()},
    )
    out = raw.with_columns(*_times(offset_ns), name=pl.lit("nsys capture"))
    return conform("windows", out)
