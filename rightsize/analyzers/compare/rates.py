"""Achieved fraction of peak per kernel group, from the analysis's classified work.

Input: one rank's classified device work (``Rank.work``: kernels with ``group``, ``flops`` from
the op-level roofline and ``precision``) and the catalog GPU the device is. Output:
``{group: pct of the GPU's dense peak at the group's dominant precision}``, over the kernels
whose FLOPs are known (achieved FLOP/s = their FLOPs / their kernel time). Used only to say *why*
a group changed ("GEMMs 1.5x slower: 35% of peak on B vs 62% on A"). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from rightsize.catalog import Catalog, CatalogError
from rightsize.errors import RightsizeError

# Under 1% of a tensor peak says nothing (elementwise work is bandwidth-bound): not shown.
MIN_PCT = 1.0


def pct_of_peak(work: pl.DataFrame | None, gpu: str | None,
                catalog: Catalog | None) -> Mapping[str, float]:
    if work is None or gpu is None or catalog is None or not {
            "group", "flops", "precision", "dur_ns"} <= set(work.columns):
        return {}
    try:
        spec = catalog.gpu(gpu)
    except CatalogError:
        return {}
    known = work.filter(pl.col("flops").is_not_null() & (pl.col("flops") > 0)
                        & pl.col("group").is_not_null() & pl.col("precision").is_not_null())
    if known.is_empty():
        return {}
    per = (known.group_by("group", "precision")
           .agg(pl.col("flops").sum(), pl.col("dur_ns").sum())
           .sort(["group", "dur_ns", "precision"], descending=[False, True, False]))
    out: dict[str, float] = {}
    for group, rows in per.group_by("group", maintain_order=True):
        flops, dur_ns = float(rows["flops"].sum()), int(rows["dur_ns"].sum())
        precision = str(rows["precision"][0])  # the precision with the most kernel time
        try:
            peak, _ = spec.tflops(precision)
        except (ValueError, RightsizeError):
            continue
        if dur_ns <= 0 or not peak:
            continue
        pct = round(flops / (dur_ns * 1e-9) / (peak * 1e12) * 100, 1)
        # Above 100% the recorded precision is not what ran (fp32 ops on TF32 tensor cores):
        # that peak is the wrong yardstick, so no fraction is said at all.
        if MIN_PCT <= pct <= 100.0:
            out[str(group[0])] = pct
    return out
