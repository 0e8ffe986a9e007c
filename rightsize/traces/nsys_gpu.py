"""GPU-side tables of an Nsight Systems export: devices, kernels, memcpy and memset.

Role: turn ``TARGET_INFO_GPU`` / ``TARGET_INFO_CUDA_GPU``, ``CUPTI_ACTIVITY_KIND_KERNEL``,
``CUPTI_ACTIVITY_KIND_MEMCPY`` and ``CUPTI_ACTIVITY_KIND_MEMSET`` into the normalized
``devices``, ``kernels`` and ``transfers`` frames (:mod:`rightsize.traces.schema`).

Inputs: an open :class:`~rightsize.traces.nsys_db.NsysDb` and the offset (ns) that turns the
session clock into the output clock. Outputs: conformed polars frames. Columns are selected by
name after checking they exist; string ids are resolved through ``StringIds`` in polars.
"""

from __future__ import annotations

import polars as pl

from rightsize.traces.nsys_db import NsysDb, col, lookup, owned, pick, time_ordered
from rightsize.traces.schema import conform, empty

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"

# Kineto hard-codes 32 threads per warp in its "warps per SM"; we do the same so the numbers agree.
KINETO_THREADS_PER_WARP = 32

# CUPTI copy kinds (ENUM_CUDA_MEMCPY_OPER names, suffix after CUDA_MEMCPY_KIND_) -> direction.
# Arrays are device memory; unified-memory copies keep their direction.
_COPY_DIRECTION = {
    "HTOD": "HtoD",
    "DTOH": "DtoH",
    "HTOA": "HtoD",
    "ATOH": "DtoH",
    "ATOA": "DtoD",
    "ATOD": "DtoD",
    "DTOA": "DtoD",
    "DTOD": "DtoD",
    "HTOH": "HtoH",
    "PTOP": "PtoP",
    "UVM_HTOD": "HtoD",
    "UVM_DTOH": "DtoH",
    "UVM_DTOD": "DtoD",
}
# The CUPTI enum values, used when an export has no ENUM_CUDA_MEMCPY_OPER table (2021 files).
_COPY_KIND_FALLBACK = {
    1: "HTOD",
    2: "DTOH",
    3: "HTOA",
    4: "ATOH",
    5: "ATOA",
    6: "ATOD",
    7: "DTOA",
    8: "DTOD",
    9: "HTOH",
    10: "PTOP",
    11: "UVM_HTOD",
    12: "UVM_DTOH",
    13: "UVM_DTOD",
}
# CUPTI memory kinds (ENUM_CUDA_MEM_KIND suffix after CUDA_MEMOPR_MEMORY_KIND_) -> schema words.
_MEM_KIND = {
    "PAGEABLE": "pageable",
    "PINNED": "pinned",
    "DEVICE": "device",
    "ARRAY": "array",
    "MANAGED": "managed",
    "DEVICE_STATIC": "device",
    "MANAGED_STATIC": "managed",
}
_MEM_KIND_FALLBACK = {
    0: "PAGEABLE",
    1: "PINNED",
    2: "DEVICE",
    3: "ARRAY",
    4: "MANAGED",
    5: "DEVICE_STATIC",
    6: "MANAGED_STATIC",
    7: "UNKNOWN",
}
_KIND_LABEL = {
    "pageable": "Pageable",
    "pinned": "Pinned",
    "device": "Device",
    "array": "Array",
    "managed": "Managed",
}


def _enum_map(db: NsysDb, table: str, prefix: str, fallback: dict[int, str]) -> dict[int, str]:
    """{id: SUFFIX} from the export's ENUM table when present, else the CUPTI values."""
    names = db.enum(table)
    if not names:
        return dict(fallback)
    return {i: n.removeprefix(prefix) for i, n in names.items()}


def read_devices(db: NsysDb) -> tuple[pl.DataFrame, list[str]]:
    """The CUDA GPUs the export describes, and the names of non-CUDA adapters it dropped.

    New exports have everything in TARGET_INFO_GPU (``id``, ``smCount``...). 2021 exports
    have a slim TARGET_INFO_GPU(``deviceId``, ``name``) and the details in TARGET_INFO_CUDA_GPU.
    Rows with zero SMs (a Windows "Intel(R) HD Graphics" adapter) are not CUDA devices.
    """
    gpu = db.columns("TARGET_INFO_GPU")
    cuda = db.columns("TARGET_INFO_CUDA_GPU")
    if "smCount" in gpu:
        id_col = "id" if "id" in gpu else "deviceId"
        sql = (
            f"SELECT {pick(gpu, id_col, 'device')}, {pick(gpu, 'name')}, "
            f"{pick(gpu, 'totalMemory', 'memory_bytes')}, {pick(gpu, 'smCount', 'sm_count')}, "
            f"{pick(gpu, 'computeMajor', 'compute_major')}, "
            f"{pick(gpu, 'computeMinor', 'compute_minor')}, "
            f"{pick(gpu, 'maxWarpsPerSm', 'warps')}, {pick(gpu, 'threadsPerWarp', 'warp_size')} "
            "FROM TARGET_INFO_GPU"
        )
    elif "numMultiprocessors" in cuda:
        sql = (
            f"SELECT {pick(cuda, 'deviceId', 'device')}, {pick(cuda, 'name')}, "
            f"{pick(cuda, 'globalMemorySize', 'memory_bytes')}, "
            f"{pick(cuda, 'numMultiprocessors', 'sm_count')}, "
            f"{pick(cuda, 'computeCapabilityMajor', 'compute_major')}, "
            f"{pick(cuda, 'computeCapabilityMinor', 'compute_minor')}, "
            f"{pick(cuda, 'maxWarpsPerMultiprocessor', 'warps')}, "
            f"{pick(cuda, 'numThreadsPerWarp', 'warp_size')} FROM TARGET_INFO_CUDA_GPU"
        )
    elif "name" in gpu:
        id_col = "id" if "id" in gpu else "deviceId"
        sql = (
            f"SELECT {pick(gpu, id_col, 'device')}, name, NULL AS memory_bytes, NULL AS sm_count, "
            "NULL AS compute_major, NULL AS compute_minor, NULL AS warps, NULL AS warp_size "
            "FROM TARGET_INFO_GPU"
        )
    else:
        return empty("devices"), []
    raw = db.frame(
        sql,
        {
            "device": pl.Int32(),
            "name": pl.String(),
            "memory_bytes": pl.Int64(),
            "sm_count": pl.Int32(),
            "compute_major": pl.Int32(),
            "compute_minor": pl.Int32(),
            "warps": pl.Int32(),
            "warp_size": pl.Int32(),
        },
    )
    not_cuda = raw.filter(pl.col("sm_count") == 0)
    devices = (
        raw.filter(pl.col("sm_count").is_null() | (pl.col("sm_count") > 0))
        .unique("device", keep="first", maintain_order=True)  # CUDA_GPU has one row per process
        .with_columns(max_threads_per_sm=pl.col("warps") * pl.col("warp_size"))
        .sort("device")
    )
    return conform("devices", devices), not_cuda["name"].drop_nulls().to_list()


def read_kernels(db: NsysDb, offset_ns: int, devices: pl.DataFrame,
                 where: str | None = None) -> pl.DataFrame:
    """One row per kernel; name = demangled name (``shortName`` when no demangled column).

    ``blocks_per_sm`` = grid_blocks / sm_count and ``warps_per_sm`` = blocks_per_sm *
    block_threads / 32, as Kineto computes them, so SM efficiency works the same on both.
    nsys records no occupancy estimate: ``occupancy_pct`` stays null.
    """
    cols = db.columns(KERNEL_TABLE)
    if not cols:
        return empty("kernels")
    name_col = "demangledName" if "demangledName" in cols else "shortName"
    grid = "gridX * gridY * gridZ" if {"gridX", "gridY", "gridZ"} <= cols else "NULL"
    block = "blockX * blockY * blockZ" if {"blockX", "blockY", "blockZ"} <= cols else "NULL"
    smem = " + ".join(
        f"COALESCE({c}, 0)" for c in ("staticSharedMemory", "dynamicSharedMemory") if c in cols
    )
    raw = db.select(KERNEL_TABLE, [
        (col(cols, "deviceId"), "device", pl.Int32()),
        (col(cols, "streamId"), "stream", pl.Int64()),
        ('"start"', "start", pl.Int64()),
        ('"end"', "end", pl.Int64()),
        (col(cols, name_col), "name_id", pl.Int64()),
        (col(cols, "correlationId"), "correlation", pl.Int64()),
        (grid, "grid_blocks", pl.Int64()),
        (block, "block_threads", pl.Int64()),
        (col(cols, "registersPerThread"), "registers_per_thread", pl.Int32()),
        (smem or "NULL", "shared_memory_bytes", pl.Int64()),
    ], where)
    # Integers are put in time order first; names (few distinct) are mapped last, column by
    # column: a join would copy every column of the 2-million-row frame once more.
    raw = time_ordered(raw)
    names = db.strings(raw["name_id"])
    sms = lookup("device", devices["device"], devices["sm_count"].cast(pl.Int32()))
    out = raw.select(
        *owned("device", "stream", "correlation", "grid_blocks", "block_threads",
               "registers_per_thread", "shared_memory_bytes"),
        name=lookup("name_id", names["id"], names["value"].cast(pl.String())),
        ts_ns=pl.col("start") + offset_ns,
        dur_ns=(pl.col("end") - pl.col("start")).clip(lower_bound=0),
        blocks_per_sm=pl.when(sms > 0).then(pl.col("grid_blocks") / sms),
    )
    del raw  # the read columns go before the next one is made
    out = out.with_columns(
        warps_per_sm=pl.col("blocks_per_sm") * pl.col("block_threads") / KINETO_THREADS_PER_WARP
    )
    return conform("kernels", out)


def kernel_short_names(db: NsysDb) -> pl.DataFrame:
    """Distinct (``name``, ``short_name``) pairs: demangled name -> nsys ``shortName``."""
    cols = db.columns(KERNEL_TABLE)
    schema = {"name": pl.String(), "short_name": pl.String()}
    if not {"demangledName", "shortName"} <= cols:
        return pl.DataFrame(schema=schema)
    ids = db.frame(
        f"SELECT DISTINCT demangledName, shortName FROM {KERNEL_TABLE}",
        {"d": pl.Int64(), "s": pl.Int64()},
    )
    strings = db.strings(pl.concat([ids["d"], ids["s"]]))
    return (
        ids.join(strings.rename({"id": "d", "value": "name"}), on="d", how="left")
        .join(strings.rename({"id": "s", "value": "short_name"}), on="s", how="left")
        .select(list(schema))
        .unique(maintain_order=True)
    )


def _kind_expr(column: str, kinds: dict[int, str]) -> pl.Expr:
    mapping = {i: _MEM_KIND.get(s) for i, s in kinds.items()}
    return pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.String())


def read_transfers(db: NsysDb, offset_ns: int, where: str | None = None) -> pl.DataFrame:
    """Memcpy rows (direction from copyKind, memory kinds from srcKind/dstKind) and memsets
    (``where``: an SQL condition on their rows, e.g. a window of time)."""
    schema: dict[str, pl.DataType] = {
        "device": pl.Int32(),
        "stream": pl.Int64(),
        "start": pl.Int64(),
        "end": pl.Int64(),
        "correlation": pl.Int64(),
        "bytes": pl.Int64(),
        "copy_kind": pl.Int64(),
        "src_kind": pl.Int64(),
        "dst_kind": pl.Int64(),
    }
    kinds = _enum_map(db, "ENUM_CUDA_MEM_KIND", "CUDA_MEMOPR_MEMORY_KIND_", _MEM_KIND_FALLBACK)
    parts = []
    cols = db.columns(MEMCPY_TABLE)
    if cols:
        copy = _enum_map(db, "ENUM_CUDA_MEMCPY_OPER", "CUDA_MEMCPY_KIND_", _COPY_KIND_FALLBACK)
        direction = {i: _COPY_DIRECTION.get(s) for i, s in copy.items()}
        raw = db.select(MEMCPY_TABLE, _columns(cols, schema, "copyKind", "srcKind", "dstKind"),
                        where)
        memcpy = raw.with_columns(
            kind=pl.lit("memcpy"),
            direction=pl.col("copy_kind").replace_strict(
                direction, default=None, return_dtype=pl.String()
            ),
            src_memory=_kind_expr("src_kind", kinds),
            dst_memory=_kind_expr("dst_kind", kinds),
        )
        parts.append(memcpy.with_columns(name=_memcpy_name()))
    cols = db.columns(MEMSET_TABLE)
    if cols:
        raw = db.select(MEMSET_TABLE, _columns(cols, schema, None, None, "memKind"), where)
        memset = raw.with_columns(kind=pl.lit("memset"), dst_memory=_kind_expr("dst_kind", kinds))
        label = pl.col("dst_memory").replace_strict(_KIND_LABEL, default=pl.col("dst_memory"))
        parts.append(memset.with_columns(name=pl.format("Memset ({})", label.fill_null("?"))))
    if not parts:
        return empty("transfers")
    out = pl.concat(parts, how="diagonal_relaxed").with_columns(
        ts_ns=pl.col("start") + offset_ns,
        dur_ns=(pl.col("end") - pl.col("start")).clip(lower_bound=0),
    )
    out = conform("transfers", out.with_columns(
        bandwidth_gbps=pl.when(pl.col("dur_ns") > 0).then(pl.col("bytes") / pl.col("dur_ns"))
    ))
    # Memcpy then memset rows: a stable sort by start, as gathers (DataFrame.sort held ~130 MiB
    # more at 400k rows).
    return out[out.select(pl.arg_sort_by("ts_ns", maintain_order=True)).to_series()]


def _columns(cols: frozenset[str], schema: dict[str, pl.DataType], copy: str | None,
             src: str | None, dst: str) -> list[tuple[str, str, pl.DataType]]:
    """The memcpy/memset columns in ``schema`` order (kind columns by name; None: NULL)."""
    exprs = [col(cols, "deviceId"), col(cols, "streamId"), '"start"', '"end"',
             col(cols, "correlationId"), col(cols, "bytes"),
             *(col(cols, c) if c else "NULL" for c in (copy, src, dst))]
    return [(e, n, t) for e, (n, t) in zip(exprs, schema.items(), strict=True)]


def _memcpy_name() -> pl.Expr:
    """Kineto-style name, e.g. ``Memcpy HtoD (Pageable -> Device)``."""

    def label(column: str) -> pl.Expr:
        return pl.col(column).replace_strict(_KIND_LABEL, default=pl.col(column)).fill_null("?")

    return pl.format(
        "Memcpy {} ({} -> {})",
        pl.col("direction").fill_null("?"),
        label("src_memory"),
        label("dst_memory"),
    )
