"""Nsight Compute CSV reader: ``ncu --csv`` (details page or ``--page raw``) -> NCU_KERNELS.

Role: one row per profiled kernel launch with its speed-of-light numbers, so the diagnosis can
split kernel time into compute- and memory-bound by SOL per kernel, matched to trace kernels by
:func:`normalize_kernel_name`.

Inputs: a CSV written by ``ncu --csv`` or ``ncu --import x.ncu-rep --csv``. The stream may begin
with ``==PROF==``/``==ERROR==``/``==WARNING==`` lines or program output; the header is the first
line starting with ``"ID",``. Details page: one row per (launch, metric), pivoted here; raw page:
one column per metric with a units row under the header. Values drop thousands separators,
``n/a`` is null, units are scaled per row (``ncu_units``), short rows are padded, and columns
are found by header name (they vary by version; the roofline section adds "Body Item Label").

Outputs: a frame with exactly the :data:`NCU_KERNELS` columns. Errors: InputError, one line.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl

from rightsize.errors import InputError
from rightsize.traces import limits
from rightsize.traces.kernel_names import normalize_kernel_name
from rightsize.traces.kernel_rows import NCU_KERNELS, combine_ncu, conform_ncu
from rightsize.traces.ncu_units import FLOP_WEIGHTS, METRIC_TARGETS, TENSOR_OPS_PREFIX, unit_scale
from rightsize.traces.readers import KERNEL_ROWS, Progress, Read, ReadOptions, SmallInput

__all__ = ["NCU_KERNELS", "combine_ncu", "looks_like_ncu", "normalize_kernel_name", "read_ncu_csv"]

_ID_COLUMNS = {
    "ID": "launch_id",
    "Process ID": "process_id",
    "Kernel Name": "kernel_name",
    "Device": "device",
    "Stream": "stream",
    "CC": "compute_capability",
    "Grid Size": "grid_size",
    "Block Size": "block_size",
}
# Identity columns that are not metrics on the raw page (besides _ID_COLUMNS).
_RAW_NON_METRICS = {"Process Name", "Host Name", "Context", "Kernel Time", "Section Name"}
_HEADER_START = '"ID",'
_MAX_PROBLEM_CHARS = 160


def looks_like_ncu(head: bytes) -> bool:
    """True when ``head`` holds an ncu CSV header or ncu's own ``==PROF==``/``==ERROR==`` lines."""
    text = head.decode("utf-8", errors="replace")
    for line in text.splitlines():
        if line.startswith(_HEADER_START) and '"Kernel Name"' in line:
            return True
        if line.startswith(("==PROF==", "==ERROR==")):
            return True
    return False


class NcuReader(SmallInput):
    """The loader's entry for ncu CSV (:class:`rightsize.traces.readers.Reader`)."""

    name = "ncu"
    described = "Nsight Compute CSV (ncu --csv)"
    contributes = KERNEL_ROWS
    suffixes = (".csv",)

    def detect(self, path: Path, head: bytes) -> bool:
        return looks_like_ncu(head)

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        frame = read_ncu_csv(path)
        if frame.is_empty():
            raise InputError(path, "an Nsight Compute CSV without kernel rows")
        return Read(entry={"kernels": frame.height}, ncu=frame)


READER = NcuReader()


def _split_stream(path: Path, text: str) -> tuple[list[str], list[list[str]]]:
    """(header, padded rows) after skipping ncu's preamble and any non-CSV lines."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(_HEADER_START)), None)
    if start is None:
        errors = [ln.strip() for ln in lines if ln.startswith("==ERROR==")]
        detail = f": {errors[0][:_MAX_PROBLEM_CHARS]}" if errors else ""
        problem = 'not an Nsight Compute CSV (no header line starting with "ID",)'
        raise InputError(path, problem + detail)
    # Data rows start with a quote; ==PROF== lines and program output can interleave.
    body = [lines[start]] + [ln for ln in lines[start + 1 :] if ln.startswith('"')]
    csv.field_size_limit(max(csv.field_size_limit(), limits.cap(limits.LINE_BYTES)))
    try:
        rows = list(csv.reader(io.StringIO("\n".join(body))))
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV ({exc})") from None
    header = rows[0]
    width = len(header)
    return header, [r + [""] * (width - len(r)) if len(r) < width else r[:width] for r in rows[1:]]


def _long_details(header: list[str], rows: list[list[str]]) -> pl.DataFrame:
    """Details page rows (one per launch x metric) in the long form; rule rows dropped."""
    frame = pl.DataFrame(rows, schema=header, orient="row")
    frame = frame.filter(pl.col("Metric Name") != "")
    unit = pl.col("Metric Unit") if "Metric Unit" in header else pl.lit("")
    return frame.select(
        *[pl.col(c) for c in _ID_COLUMNS if c in header],
        metric=pl.col("Metric Name"),
        unit=unit,
        value=pl.col("Metric Value") if "Metric Value" in header else pl.lit(None, pl.String()),
    )


def _long_raw(header: list[str], rows: list[list[str]]) -> pl.DataFrame:
    """Raw page (one column per metric, units in the first data row) in the long form."""
    ids = [c for c in header if c in _ID_COLUMNS]
    metrics = [c for c in header if c not in _ID_COLUMNS and c not in _RAW_NON_METRICS]
    units: dict[str, str] = {}
    if rows and rows[0][header.index("ID")] == "":  # the units row has no launch ID
        units = dict(zip(header, rows[0], strict=True))
        rows = rows[1:]
    frame = pl.DataFrame(rows, schema=header, orient="row")
    long = frame.unpivot(on=metrics, index=ids, variable_name="metric", value_name="value")
    unit_map = {m: units.get(m, "") for m in metrics}
    return long.with_columns(unit=pl.col("metric").replace_strict(unit_map, default=""))


def _product(col: str) -> pl.Expr:
    """``"(16, 4, 1)"`` -> 64."""
    # Float64 then a lenient cast: a dimension or product beyond int64 is null, never a wrap.
    dims = pl.col(col).str.extract_all(r"[0-9]+").list.eval(
        pl.element().cast(pl.Float64, strict=False))
    product = dims.list.eval(pl.element().product()).list.first()
    return pl.when(product < 2.0**63).then(product).otherwise(None).cast(pl.Int64, strict=False)


def _scaled(long: pl.DataFrame) -> pl.DataFrame:
    """Add ``number`` (value in base units) and ``target`` (output column) to the long form."""
    scales = {u: unit_scale(u) for u in long["unit"].unique().to_list()}
    dims = {u: s[0] for u, s in scales.items()}
    factors = {u: s[1] for u, s in scales.items()}
    number = (
        pl.col("value")
        .str.strip_chars()
        .str.replace_all(",", "")
        .cast(pl.Float64, strict=False)  # "n/a" and other text -> null
    )
    long = long.with_columns(
        dim=pl.col("unit").replace_strict(dims, return_dtype=pl.String()),
        number=number * pl.col("unit").replace_strict(factors, return_dtype=pl.Float64()),
    )
    targets = pl.DataFrame(
        [(d, m, t) for (d, m), t in METRIC_TARGETS.items()],
        schema={"dim": pl.String(), "metric": pl.String(), "target": pl.String()},
        orient="row",
    )
    return long.join(targets, on=["dim", "metric"], how="left")


def _wide(long: pl.DataFrame) -> pl.DataFrame:
    """One row per launch: mapped metrics pivoted (first non-null), FLOPs and tensor ops summed."""
    keys = [c for c in ("ID", "Process ID") if c in long.columns]
    ids = long.group_by(keys, maintain_order=True).agg(
        [pl.col(c).first() for c in _ID_COLUMNS if c in long.columns and c not in keys]
    )
    mapped = (
        long.filter(pl.col("target").is_not_null() & pl.col("number").is_not_null())
        .group_by([*keys, "target"], maintain_order=True)
        .agg(pl.col("number").first())
    )
    weights = pl.col("metric").replace_strict(FLOP_WEIGHTS, default=None, return_dtype=pl.Float64)
    counted = weights.is_not_null() & pl.col("number").is_not_null()
    tensor = pl.col("metric").str.starts_with(TENSOR_OPS_PREFIX) & pl.col("number").is_not_null()
    extra = long.group_by(keys, maintain_order=True).agg(
        flop_count=pl.when(counted.any()).then((pl.col("number") * weights).filter(counted).sum()),
        tensor_ops=pl.when(tensor.any()).then(pl.col("number").filter(tensor).sum()),
    )
    wide = ids.join(extra, on=keys, how="left")
    if not mapped.is_empty():
        pivot = mapped.pivot(on="target", index=keys, values="number")
        wide = wide.join(pivot, on=keys, how="left")
    return wide


def _derive(wide: pl.DataFrame) -> pl.DataFrame:
    """Rename identity columns, fill launch geometry and the derived rate/roofline columns."""

    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in wide.columns else pl.lit(None, dtype=pl.Float64)

    wide = wide.rename({k: v for k, v in _ID_COLUMNS.items() if k in wide.columns})

    def add(*names: str) -> pl.Expr:
        total = pl.lit(0.0)
        for n in names:
            total = total + col(n).fill_null(0.0)
        return pl.when(pl.any_horizontal([col(n).is_not_null() for n in names])).then(total)

    sm_hz, dram_hz = col("sm_frequency_hz"), col("dram_frequency_hz")
    dram_bytes = pl.coalesce(col("dram_bytes"), add("dram_read_bytes", "dram_write_bytes"))
    duration_s = col("duration_ns") / 1e9
    out = wide.with_columns(
        kernel_name_normalized=pl.col("kernel_name").map_elements(
            normalize_kernel_name, return_dtype=pl.String()
        ),
        grid_blocks=pl.coalesce(
            _product("grid_size") if "grid_size" in wide.columns else None,
            col("launch_grid_blocks"),
        ),
        block_threads=pl.coalesce(
            _product("block_size") if "block_size" in wide.columns else None,
            col("launch_block_threads"),
        ),
        duration_ns=col("duration_ns").round(0),
        dram_bytes=dram_bytes,
        flop_rate_per_s=pl.when(duration_s > 0).then(col("flop_count") / duration_s),
        arithmetic_intensity_flop_per_byte=pl.when(dram_bytes > 0).then(
            col("flop_count") / dram_bytes
        ),
        roofline_fp32_peak_flop_per_s=col("fp32_peak_ops_per_cycle") * sm_hz,
        roofline_fp64_peak_flop_per_s=col("fp64_peak_ops_per_cycle") * sm_hz,
        roofline_fp32_achieved_flop_per_s=add(
            "fp32_fma_ops_per_cycle", "fp32_addmul_per_cycle_fadd", "fp32_addmul_per_cycle_fmul"
        )
        * sm_hz,
        roofline_fp64_achieved_flop_per_s=add(
            "fp64_fma_ops_per_cycle", "fp64_addmul_per_cycle_dadd", "fp64_addmul_per_cycle_dmul"
        )
        * sm_hz,
        roofline_dram_peak_bytes_per_s=col("dram_peak_bytes_per_cycle") * dram_hz,
    )
    return conform_ncu(out)


def read_ncu_csv(path: str | Path) -> pl.DataFrame:
    """Read an ncu CSV (details or raw page) into one row per kernel launch (NCU_KERNELS)."""
    path = Path(path)
    text = limits.read_text(path)
    if not text.strip():
        raise InputError(path, "empty file")
    header, rows = _split_stream(path, text)
    if "Kernel Name" not in header:
        raise InputError(path, 'not an Nsight Compute CSV (no "Kernel Name" column)')
    if len(set(header)) != len(header):
        raise InputError(path, "ncu CSV header repeats a column name")
    if not rows:
        return pl.DataFrame(schema=NCU_KERNELS)
    long = _long_details(header, rows) if "Metric Name" in header else _long_raw(header, rows)
    if long.is_empty():
        return pl.DataFrame(schema=NCU_KERNELS)
    return _derive(_wide(_scaled(long))).sort("process_id", "launch_id", nulls_last=True)
