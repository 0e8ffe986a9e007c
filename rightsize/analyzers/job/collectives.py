"""One rank's collective calls: one row per NCCL/RCCL kernel, with what it was and what came
before it.

Input: a normalized :class:`~rightsize.traces.schema.Trace`, its steps and its primary device.
Output: a polars frame with :data:`CALLS` columns, one row per collective kernel on that device
in time order. What each call is comes from the best record there is, in this order (``source``):
the kernel's own collective args (``args``), the args of the ``record_param_comms`` op that
launched it (``op args``), the name of the host op that launched it (``c10d::alltoall_base_``:
``op``), the kernel's name (``kernel``: NCCL's ``ncclKernel_AllReduce_*`` and
``ncclDevKernel_*`` say it; RCCL's ``ncclDevKernel_Generic`` does not). The host op is the
innermost collective op whose span holds the kernel's launch call (linked by correlation id),
else the op with the kernel's external id.

Each row also carries the call's *lead-in*: the time on that rank from the end of its previous
collective of the same process group (of the same stream where no group is recorded), or the
start of its step, whichever is later, to this call's arrival,
split by priority into compute (kernels of the device), copies (memcpy/memset), the data
loader's ``__next__`` and the rest (host: Python, launches, waits). A straggler's lead-in is
longer than the others' by what it did instead; ``stragglers`` reads it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from rightsize.analyzers.job import names
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps
from rightsize.analyzers.metrics.tb_plugin import COMM_KERNEL, DATALOADER
from rightsize.traces.schema import Trace

CALLS: dict[str, pl.DataType] = {
    "stream": pl.Int64(),
    "ordinal": pl.Int64(),  # position among the collective kernels of its stream, from 0
    "arrival_ns": pl.Int64(),  # kernel start: when this rank reached the collective
    "dur_ns": pl.Int64(),
    "kernel": pl.String(),
    "collective": pl.String(),  # one of names.TYPES
    "source": pl.String(),  # what named it: args | op args | op | kernel | none
    "bytes": pl.Int64(),  # nccl-tests' size (names.py); null when nothing records it
    "group_size": pl.Int64(),
    "pg": pl.String(),  # process group name, where recorded
    "pg_ranks": pl.String(),  # its member ranks as recorded ("[0, 1]")
    "seq": pl.Int64(),  # sequence number in its process group, where recorded
    "step": pl.Int64(),  # index of the step holding the arrival (null: outside every step)
    "exposed_ns": pl.Int64(),  # the part of the kernel no compute kernel overlapped
    "lead_ns": pl.Int64(),  # the lead-in window (see the module docstring)
    "lead_compute_ns": pl.Int64(),
    "lead_copy_ns": pl.Int64(),
    "lead_dataloader_ns": pl.Int64(),
    "lead_host_ns": pl.Int64(),
}
LEAD_PARTS = ("compute", "copy", "dataloader", "host")


def calls(trace: Trace, steps: Steps, device: int | None) -> pl.DataFrame:
    """The collective calls of ``device`` (see the module docstring)."""
    if device is None or trace.kernels.height == 0:
        return pl.DataFrame(schema=CALLS)
    on_device = trace.kernels.filter(pl.col("device") == device)
    is_comm = pl.col("name").str.contains(COMM_KERNEL)
    comm = on_device.filter(is_comm).sort("ts_ns", "stream", maintain_order=True)
    if comm.height == 0:
        return pl.DataFrame(schema=CALLS)
    comm = comm.select("stream", "ts_ns", "dur_ns", "name", "correlation", "external_id")
    comm = comm.with_columns(ordinal=pl.int_range(pl.len()).over("stream"))
    info = _described(trace, comm)
    compute = _union(on_device.filter(~is_comm))
    copies = _union(trace.transfers.filter(pl.col("device") == device))
    loader = _union(trace.cpu_ops.filter(pl.col("name").str.contains(DATALOADER)))
    arrival = comm["ts_ns"].to_numpy()
    end = arrival + comm["dur_ns"].to_numpy()
    step = _step_of(arrival, steps)
    group = [f"pg {g}" if g is not None else f"stream {st}"
             for g, st in zip(info["pg"].to_list(), comm["stream"].to_list(), strict=True)]
    lead0 = _lead_start(group, arrival, end, step, steps)
    parts = _lead_parts(lead0, arrival, compute, copies, loader)
    return pl.DataFrame({
        "stream": comm["stream"], "ordinal": comm["ordinal"],
        "arrival_ns": comm["ts_ns"], "dur_ns": comm["dur_ns"], "kernel": comm["name"],
        **{k: info[k] for k in ("collective", "source", "bytes", "group_size", "pg",
                                "pg_ranks", "seq")},
        "step": pl.Series(step, dtype=pl.Int64).replace(-1, None),
        "exposed_ns": (end - arrival) - iv.per_window(compute, arrival, end),
        "lead_ns": arrival - lead0,
        **{f"lead_{k}_ns": v for k, v in parts.items()},
    }, schema=CALLS)


def _union(df: pl.DataFrame) -> iv.Intervals:
    if df.height == 0:
        return iv.empty()
    return iv.union(iv.from_durations(df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()))


def _step_of(arrival: np.ndarray, steps: Steps) -> np.ndarray:
    """Index of the step whose window holds each arrival, -1 where none does."""
    if not steps.count:
        return np.full(len(arrival), -1, dtype=np.int64)
    idx = np.searchsorted(steps.start_ns, arrival, side="right") - 1
    ok = (idx >= 0) & (arrival < steps.end_ns[np.maximum(idx, 0)])
    return np.where(ok, idx, -1).astype(np.int64)


def _lead_start(group: Sequence[str], arrival: np.ndarray, end: np.ndarray, step: np.ndarray,
                steps: Steps) -> np.ndarray:
    """Where each call's lead-in starts: the end of the previous call of its process group
    (of its stream where none is recorded) or its step's start, whichever is later (the
    arrival itself when there is neither). Every rank of a call made that previous call too,
    and it ended for all at once: the windows compare."""
    out = arrival.copy()
    last_end: dict[str, int] = {}
    for i in range(len(arrival)):  # one pass, calls in time order (hundreds per step)
        starts = []
        prev = last_end.get(group[i])
        if prev is not None:
            starts.append(prev)
        if step[i] >= 0:
            starts.append(int(steps.start_ns[step[i]]))
        if starts:
            out[i] = min(max(starts), arrival[i])
        last_end[group[i]] = max(int(end[i]), last_end.get(group[i], 0))
    return out


def _lead_parts(lead0: np.ndarray, arrival: np.ndarray, compute: iv.Intervals,
                copies: iv.Intervals, loader: iv.Intervals) -> dict[str, np.ndarray]:
    """The lead-in windows split by priority: compute, then copies, then the data loader; the
    rest is host time."""
    window = arrival - lead0
    busy = compute
    out = {"compute": iv.per_window(compute, lead0, arrival)}
    for name, part in (("copy", copies), ("dataloader", loader)):
        mine = iv.subtract(part, busy)
        out[name] = iv.per_window(mine, lead0, arrival)
        busy = iv.union(iv.of(np.concatenate([busy[0], part[0]]),
                              np.concatenate([busy[1], part[1]])))
    out["host"] = window - out["compute"] - out["copy"] - out["dataloader"]
    return out


def _described(trace: Trace, comm: pl.DataFrame) -> dict[str, pl.Series]:
    """collective, source, bytes, group_size, pg, pg_ranks and seq of each collective kernel."""
    n = comm.height
    own = _own_args(trace, comm)
    launch = comm.join(trace.runtime.select("correlation", launch_ns="ts_ns").unique(
        "correlation", keep="first"), on="correlation", how="left", maintain_order="left")
    launch_ns = launch["launch_ns"].to_list()
    ext = comm["external_id"].to_list()
    op_args = _naming(trace.comms.filter(pl.col("kind") == "cpu_op"), "collective")
    op_names = _naming(trace.cpu_ops.filter(pl.col("name").str.contains(names.COLLECTIVE_OP)),
                       "name")
    args_row = _enclosing(op_args, launch_ns, ext)
    name_row = _enclosing(op_names, launch_ns, ext)
    args_rows, name_rows = op_args.to_dicts(), op_names.to_dicts()
    out: dict[str, list[object]] = {k: [] for k in ("collective", "source", "bytes",
                                                    "group_size", "pg", "pg_ranks", "seq")}
    kernels = comm["name"].to_list()
    for i in range(n):
        mine = own[i]
        rec = args_rows[args_row[i]] if args_row[i] >= 0 else None
        op = name_rows[name_row[i]] if name_row[i] >= 0 else None
        kind, source = _kind(mine, rec, op, kernels[i])
        meta = mine if mine is not None else rec
        size = names.size_from_args(_int(meta["in_nelems"]), _int(meta["out_nelems"]),
                                    _str(meta["dtype"])) if meta is not None else None
        if size is None and op is not None:
            size = names.size_from_inputs(op["input_dims"], op["input_types"])
        out["collective"].append(kind)
        out["source"].append(source)
        out["bytes"].append(size)
        for key, col in (("group_size", "group_size"), ("pg", "pg_name"),
                         ("pg_ranks", "pg_ranks"), ("seq", "seq")):
            out[key].append(meta[col] if meta is not None else None)
    return {k: pl.Series(k, v, dtype=CALLS[k]) for k, v in out.items()}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _naming(ops: pl.DataFrame, column: str) -> pl.DataFrame:
    """The ops whose ``column`` names a collective type (not ``wait``, not the bare
    ``record_param_comms`` of an op without args)."""
    if ops.height == 0:
        return ops
    keep = [names.from_name(v) is not None for v in ops[column].to_list()]
    return ops.filter(pl.Series(keep, dtype=pl.Boolean))


def _own_args(trace: Trace, comm: pl.DataFrame) -> list[dict[str, object] | None]:
    """The kernel rows of the comms frame, by correlation id, for each collective kernel."""
    rows = trace.comms.filter((pl.col("kind") == "kernel") & pl.col("correlation").is_not_null())
    by = {r["correlation"]: r for r in rows.to_dicts()}
    return [by.get(c) for c in comm["correlation"].to_list()]


def _kind(own: dict[str, object] | None, rec: dict[str, object] | None,
          op: dict[str, object] | None, kernel: str) -> tuple[str, str]:
    for row, source in ((own, "args"), (rec, "op args")):
        kind = names.from_name(str(row["collective"] or "")) if row is not None else None
        if kind is not None:
            return kind, source
    kind = names.from_name(str(op["name"])) if op is not None else None
    if kind is not None:
        return kind, "op"
    kind = names.from_kernel(kernel)
    return (kind, "kernel") if kind is not None else (names.UNKNOWN, "none")


def _enclosing(ops: pl.DataFrame, at: Sequence[int | None],
               ext: Sequence[int | None]) -> list[int]:
    """For each launch time, the row of the innermost op of ``ops`` whose span holds it (the
    latest start that still holds it), else the op with the same external id; -1: none."""
    if ops.height == 0:
        return [-1] * len(at)
    start = ops["ts_ns"].to_numpy()
    stop = start + ops["dur_ns"].to_numpy()
    order = np.argsort(start, kind="stable")
    s_sorted = start[order]
    by_ext = {e: i for i, e in enumerate(ops["external_id"].to_list()) if e is not None}
    out = []
    for t, e in zip(at, ext, strict=True):
        found = -1
        if t is not None:
            j = int(np.searchsorted(s_sorted, t, side="right")) - 1
            for k in range(j, max(j - 8, -1), -1):  # nested ops: the innermost starts last
                if stop[order[k]] >= t:
                    found = int(order[k])
                    break
        if found < 0 and e is not None:
            found = by_ext.get(e, -1)
        out.append(found)
    return out
