"""Host ops by their own (self) time, grouped by call path: no wrapper counted twice.

Input: a trace's host ranges (``cpu_ops``) and kernels. Output: one row per call path (the
chain of enclosing ops, outermost first, ending at the op), longest first.

Definitions:

* nesting: on each thread, ops (``cpu_op``) and recorded ``nn.Module: X`` ranges (Kineto
  ``with_modules``/``with_stack``) nest by time; an op's parent is the innermost range open when
  it starts. Zero-length ops hold no time and are left out.
* ``self_ns``: the op's duration minus the parts of its direct children (ops, or a module
  range run inside an op) inside it - the profiler's "Self CPU" time - so
  ``aten::conv2d > aten::convolution > ...`` gives its time to the op that spent it, once.
* ``host_ns``: the ops' own durations (inclusive of their children), as ``top_ops`` reports.
* ``gpu_ns`` / ``kernels``: kernels linked (External id) to the innermost op carrying the id.
* ``path``: enclosing op names, outermost first, ending at the op; modules are not in it but
  ``module`` names the innermost one (the one holding most self time of the group) when any
  was recorded.

Rows are ordered by GPU time, then self time, when the trace has kernels (the GPU work an op
launched is its own: kernels belong to the innermost op), by self time otherwise. Vectorized
per nesting level (no Python loop per op). Pure.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from rightsize.analyzers.document.metrics import SelfOp
from rightsize.analyzers.sections import SectionInput
from rightsize.traces.schema import Trace

MODULE_PREFIX = "nn.Module: "
TOP_SELF_OPS = 20
_MIX = np.uint64(0x9E3779B97F4A7C15)  # 64-bit golden-ratio multiplier: path keys as hashes


def _nodes(trace: Trace) -> pl.DataFrame:
    """Ops and module ranges with positive length, sorted for nesting (thread, start, -end);
    ``thread`` numbers the (pid, tid) pairs so that sorting and grouping stay on integers."""
    # A filter copies every column it keeps: only the ones read here go in (not the shapes,
    # types and concrete inputs: the filter's peak at 1 GB of trace 130 -> 92 MiB).
    c = trace.cpu_ops.select("ts_ns", "dur_ns", "name", "external_id", "pid", "tid", "cat")
    keep = (pl.col("dur_ns") > 0) & ((pl.col("cat") == "cpu_op") | (
        (pl.col("cat") == "python_function") & pl.col("name").str.starts_with(MODULE_PREFIX)))
    return (c.filter(keep)
            .select("ts_ns", "dur_ns", "name", "external_id",
                    thread=pl.struct("pid", "tid").rank("dense").cast(pl.Int64),
                    is_op=pl.col("cat") == "cpu_op")
            .with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns"))
            .sort(["thread", "ts_ns", "end_ns"], descending=[False, False, True],
                  maintain_order=True)  # ties (same thread, start, end) nest in file order
            .with_row_index("row"))


def _depth_and_parent(n: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Nesting depth of each node and its parent row (-1 at the top), all threads at once."""
    if not n.height:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    thread = n["thread"].to_numpy()
    ts = n["ts_ns"].to_numpy()
    end = n["end_ns"].to_numpy()
    ts, end = ts - ts.min(), end - ts.min()
    if int(end.max()) >= 2**40:  # over 18 minutes: time ranks keep the key small
        times = np.unique(np.concatenate([ts, end]))
        ts, end = np.searchsorted(times, ts), np.searchsorted(times, end)
    # (thread, time) as one sortable int64 (times < 2^40, threads < 2^23)
    start_key = thread * np.int64(2**40) + ts
    end_key = np.sort(thread * np.int64(2**40) + end)
    # ranges started before this one (rows are sorted) minus those that ended: the open ones
    depth = np.maximum(np.arange(n.height) - np.searchsorted(end_key, start_key, "right"), 0)
    parent = np.full(n.height, -1, dtype=np.int64)
    above = np.flatnonzero(depth == 0)
    for d in range(1, int(depth.max()) + 1):
        rows = np.flatnonzero(depth == d)
        # the parent is the last range one level up that started before (same thread: a
        # thread's first range has depth 0, so the search never crosses into another thread)
        at = np.searchsorted(above, rows) - 1
        parent[rows] = np.where(at >= 0, above[np.maximum(at, 0)], -1)
        above = rows
    return depth, parent


def self_ops(trace: Trace, k: int = TOP_SELF_OPS) -> pl.DataFrame:
    """The top ``k`` call paths: ``name``, ``path`` (list), ``module``, ``calls``,
    ``self_ns``, ``host_ns``, ``gpu_ns``, ``kernels``."""
    n = _nodes(trace)
    if not n.filter(pl.col("is_op")).height:
        return pl.DataFrame(schema={"name": pl.String, "path": pl.List(pl.String),
                                    "module": pl.String, "calls": pl.UInt32, "self_ns": pl.Int64,
                                    "host_ns": pl.Int64, "gpu_ns": pl.Int64,
                                    "kernels": pl.UInt32})
    depth, parent = _depth_and_parent(n)
    start = n["ts_ns"].to_numpy()
    end = n["end_ns"].to_numpy()
    is_op = n["is_op"].to_numpy()
    # self time: minus the part of each direct child inside it; a module range under an op
    # (checkpoint recompute in backward) counts as the op's child too, never as its own time
    child = parent >= 0
    inside = np.minimum(end[child], end[parent[child]]) - start[child]
    taken = np.bincount(parent[child], weights=np.maximum(inside, 0), minlength=n.height)
    self_ns = np.maximum(n["dur_ns"].to_numpy() - taken.astype(np.int64), 0)
    key, module = _paths(n, depth, parent, is_op)
    # Only integer columns from here on (a row per op: at 5 GB of trace, every extra copy of
    # a column is tens of MB); names come back for the top rows only.
    rows = n.select("row", "ts_ns", "dur_ns", "external_id", "is_op").with_columns(
        self_ns=pl.Series(self_ns), key=pl.Series(key), module_row=pl.Series(module),
    ).filter(pl.col("is_op")).drop("is_op")
    # What the rest needs of the nodes is their names (and parent and is_op, for the paths):
    # the other columns and arrays go now, before the join and the grouping add their own
    # (the function's peak at 5 GB of trace +924-988 -> +762-766 MiB).
    names = n.get_column("name")
    del n, depth, start, end, child, inside, taken, self_ns, key, module
    gpu = _gpu(trace, rows)
    rows = rows.drop("ts_ns", "external_id").join(gpu, on="row", how="left").with_columns(
        pl.col("gpu_ns").fill_null(0), pl.col("kernels").fill_null(0))
    del gpu
    g = (rows.sort("self_ns", descending=True, maintain_order=True).group_by("key").agg(
        pl.col("row").first(), calls=pl.len(),
        self_ns=pl.col("self_ns").sum(), host_ns=pl.col("dur_ns").sum(),
        gpu_ns=pl.col("gpu_ns").sum(), kernels=pl.col("kernels").sum(),
        module_row=pl.col("module_row").filter(pl.col("module_row") >= 0).first()))
    del rows
    # a path's op is the same in every row of its group (the key hashes the path's names)
    g = g.with_columns(name=names.gather(g["row"]))
    order = ["gpu_ns", "self_ns"] if trace.kernels.height else ["self_ns"]
    top = g.sort([*order, "name", "row"], descending=[True] * len(order) + [False, False]).head(k)
    paths = [_path(int(r), parent, is_op, names) for r in top["row"].to_list()]
    mods = [None if m is None else str(names[m])[len(MODULE_PREFIX):]
            for m in top["module_row"].to_list()]
    return top.select(
        "name", path=pl.Series(paths, dtype=pl.List(pl.String)),
        module=pl.Series(mods, dtype=pl.String), calls=pl.col("calls").cast(pl.UInt32),
        self_ns="self_ns", host_ns="host_ns", gpu_ns="gpu_ns",
        kernels=pl.col("kernels").cast(pl.UInt32))


def _paths(n: pl.DataFrame, depth: np.ndarray, parent: np.ndarray,
           is_op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit key per node for its chain of op names (modules are transparent), and the row of
    its innermost enclosing module (-1: none), filled one nesting level at a time."""
    name_id = n["name"].cast(pl.Categorical).to_physical().to_numpy().astype(np.uint64) + 1
    key = np.zeros(n.height, dtype=np.uint64)
    module = np.full(n.height, -1, dtype=np.int64)
    with np.errstate(over="ignore"):  # the keys are hashes: wrap-around is intended
        for d in range(int(depth.max()) + 1 if n.height else 0):
            rows = np.flatnonzero(depth == d)
            up = parent[rows]
            has = up >= 0
            base = np.where(has, key[np.where(has, up, 0)], np.uint64(0))
            key[rows] = np.where(is_op[rows], (base ^ name_id[rows]) * _MIX + np.uint64(1), base)
            inherited = np.where(has, module[np.where(has, up, 0)], -1)
            module[rows] = np.where(is_op[rows], inherited, rows)
    return key, module


def _path(row: int, parent: np.ndarray, is_op: np.ndarray, names: pl.Series) -> list[str]:
    chain = []
    while row >= 0:
        if is_op[row]:
            chain.append(row)
        row = int(parent[row])
    return names.gather(chain[::-1]).to_list()


def _gpu(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """GPU time and kernel count per op row: kernels belong to the innermost (latest-starting)
    op that carries their External id."""
    k = trace.kernels.filter(pl.col("external_id").is_not_null())
    owner = (rows.join(k.select("external_id").unique(), on="external_id", how="semi")
             .group_by("external_id").agg(  # the latest start; at a tie the inner one
                 pl.col("row").filter(pl.col("ts_ns") == pl.col("ts_ns").max()).max()))
    return (k.join(owner, on="external_id", how="inner")
            .group_by("row").agg(gpu_ns=pl.col("dur_ns").sum(), kernels=pl.len()))


def section(rank: SectionInput) -> tuple[SelfOp, ...]:
    """The document's ``self_ops`` (an analyzer section, ``rightsize.analyzers.sections``)."""
    return tuple(SelfOp(o["name"], tuple(o["path"]), o["module"], o["calls"], o["self_ns"] / 1e6,
                        o["host_ns"] / 1e6, o["gpu_ns"] / 1e6, o["kernels"])
                 for o in self_ops(rank.trace).to_dicts())
