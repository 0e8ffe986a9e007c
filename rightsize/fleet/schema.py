"""The fleet table's columns: one row per job or workload, documented in docs/fleet-table.md.

:data:`SCHEMA_VERSION` changes when a column is renamed or removed or its meaning changes
(adding one does not); a table written by a newer version is refused in one line. Version 2
added rows of another kind: workloads right-sized from cluster metrics (``source`` ``metrics``,
``rightsize fleet metrics --table``) beside the jobs of traces (``source`` ``trace``), and one
confidence in words for both (``confidence_level``). A version-1 file reads as ``trace`` rows
with their level derived from their number (:func:`compatible`). Column names carry their units
(``_ms``, ``_pct``, ``_bytes``, ``_usd``). Imports polars: only the scan and the report load
it, never ``rightsize --help``.
"""

from __future__ import annotations

import polars as pl

from rightsize.analyzers.thresholds import CONFIDENCE

SCHEMA_VERSION = 2

SOURCE_TRACE = "trace"  # a job analyzed from its traces (fleet scan, rightsize serve)
SOURCE_METRICS = "metrics"  # a workload right-sized from cluster metrics (fleet metrics)
SOURCES = (SOURCE_TRACE, SOURCE_METRICS)
# The month of a metrics row's cost per month (fleet metrics' thresholds.HOURS_PER_MONTH, kept
# equal by a test; not imported: the report would load the metrics analyzer and numpy)
HOURS_PER_MONTH = 730.0

STATUS_OK = "ok"
STATUS_BAD_INPUT = "bad-input"  # the input cannot be read or analyzed (its reason says why)
STATUS_FAILED = "failed"  # rightsize itself failed (a bug, a worker that died)

LEVELS = ("high", "medium", "low")

SHARES = ("compute", "memory", "pcie", "dataloader", "communication", "host", "idle")

RULE = pl.Struct({"id": pl.String, "title": pl.String, "step_ms": pl.Float64,
                  "step_ms_low": pl.Float64, "step_ms_high": pl.Float64})

COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    # identity
    "key": pl.String,
    "job": pl.String,
    "kind": pl.String,
    "source": pl.String,
    "paths": pl.List(pl.String),
    "files": pl.Int32,
    "bytes": pl.Int64,
    "recorded_at": pl.Datetime("us", "UTC"),
    "recorded_at_source": pl.String,
    "window_start": pl.Datetime("us", "UTC"),
    "scanned_at": pl.Datetime("us", "UTC"),
    "rightsize_version": pl.String,
    "schema_version": pl.Int32,
    "status": pl.String,
    "reason": pl.String,
    "team": pl.String,
    "project": pl.String,
    "labels_source": pl.String,
    # what the row is one recording of, across recordings: "job:NAME" (a job's captures),
    # "workload:NAMESPACE/OWNER" (a metrics workload, or a job naming its Kubernetes workload);
    # null: the row's path set (fleet/report.py, IDENTITY)
    "entity": pl.String,
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
    "confidence_level": pl.String,
    **{f"{s}_pct": pl.Float64 for s in SHARES},
    "gpu_util_pct": pl.Float64,
    "sm_efficiency_pct": pl.Float64,
    "peak_memory_bytes": pl.Int64,
    "precision": pl.String,
    # sizing
    "sizing_verdict": pl.String,
    "recommended_gpu": pl.String,
    "recommended_gpus": pl.Int32,
    "recommended": pl.String,
    "sizing_reason": pl.String,
    "objective": pl.String,
    "savings_pct": pl.Float64,
    "usd_per_gpu_hour": pl.Float64,
    "usd_per_1k_steps": pl.Float64,
    "recommended_step_ms": pl.Float64,
    "recommended_usd_per_1k_steps": pl.Float64,
    "usd_per_month": pl.Float64,
    "recommended_usd_per_month": pl.Float64,
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


def level(confidence: float | None) -> str | None:
    """A diagnosis' confidence (0..1) in words: the same three levels fleet metrics gives its
    recommendations, at the bands of ``thresholds.ConfidenceBands``."""
    if confidence is None:
        return None
    return ("high" if confidence >= CONFIDENCE.high_from else
            "medium" if confidence >= CONFIDENCE.medium_from else "low")


def level_expr(confidence: pl.Expr) -> pl.Expr:
    """:func:`level` over a column (null stays null)."""
    return (pl.when(confidence >= CONFIDENCE.high_from).then(pl.lit("high"))
            .when(confidence >= CONFIDENCE.medium_from).then(pl.lit("medium"))
            .when(confidence.is_not_null()).then(pl.lit("low"))
            .otherwise(pl.lit(None, pl.String)))


def compatible(rows: pl.LazyFrame) -> pl.LazyFrame:
    """Rows of any version as version 2: a version-1 row (no ``source``) is a ``trace`` row,
    and its ``confidence_level`` is its number's (:func:`level`)."""
    return rows.with_columns(
        pl.col("source").fill_null(SOURCE_TRACE),
        pl.when(pl.col("confidence_level").is_null() & pl.col("source").is_null())
        .then(level_expr(pl.col("confidence"))).otherwise(pl.col("confidence_level"))
        .alias("confidence_level"))
