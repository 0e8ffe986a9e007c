"""The fleet table's columns: one row per job, documented in docs/fleet-table.md.

:data:`SCHEMA_VERSION` changes when a column is renamed or removed or its meaning changes
(adding one does not); a table written by a newer version is refused in one line. Column names
carry their units (``_ms``, ``_pct``, ``_bytes``, ``_usd``). Imports polars: only the scan and
the report load it, never ``rightsize --help``.
"""

from __future__ import annotations

import polars as pl

SCHEMA_VERSION = 1

STATUS_OK = "ok"
STATUS_BAD_INPUT = "bad-input"  # the input cannot be read or analyzed (its reason says why)
STATUS_FAILED = "failed"  # rightsize itself failed (a bug, a worker that died)

SHARES = ("compute", "memory", "pcie", "dataloader", "communication", "host", "idle")

RULE = pl.Struct({"id": pl.String, "title": pl.String, "step_ms": pl.Float64,
                  "step_ms_low": pl.Float64, "step_ms_high": pl.Float64})

COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    # identity
    "key": pl.String,
    "job": pl.String,
    "kind": pl.String,
    "paths": pl.List(pl.String),
    "files": pl.Int32,
    "bytes": pl.Int64,
    "recorded_at": pl.Datetime("us", "UTC"),
    "recorded_at_source": pl.String,
    "scanned_at": pl.Datetime("us", "UTC"),
    "rightsize_version": pl.String,
    "schema_version": pl.Int32,
    "status": pl.String,
    "reason": pl.String,
    "team": pl.String,
    "project": pl.String,
    "labels_source": pl.String,
    # hardware
    "device": pl.String,
    "gpu": pl.String,
    "gpu_reported": pl.String,
    "gpus": pl.Int32,
    "nodes": pl.Int32,
    # steps and verdict
    "steps": pl.Int32,
    "step_ms": pl.Float64,
    "bound": pl.String,
    "confidence": pl.Float64,
    **{f"{s}_pct": pl.Float64 for s in SHARES},
    "gpu_util_pct": pl.Float64,
    "sm_efficiency_pct": pl.Float64,
    "peak_memory_bytes": pl.Int64,
    "precision": pl.String,
    # sizing
    "sizing_verdict": pl.String,
    "recommended_gpu": pl.String,
    "recommended_gpus": pl.Int32,
    "sizing_reason": pl.String,
    "objective": pl.String,
    "savings_pct": pl.Float64,
    "usd_per_gpu_hour": pl.Float64,
    "usd_per_1k_steps": pl.Float64,
    "recommended_step_ms": pl.Float64,
    "recommended_usd_per_1k_steps": pl.Float64,
    "run_gpu_hours": pl.Float64,
    # rules and the document
    "rules": pl.List(RULE),
    "document": pl.String,
    "analysis_s": pl.Float64,
}

SCHEMA = pl.Schema(COLUMNS)


def frame(rows: list[dict[str, object]]) -> pl.DataFrame:
    """Rows (plain dicts with every column) as a frame of exactly :data:`SCHEMA`."""
    return pl.DataFrame(rows, schema=SCHEMA)
