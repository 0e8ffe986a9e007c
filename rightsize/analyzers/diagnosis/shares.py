"""Exclusive time shares of the step: where the device's time goes, and what it waits for.

Inputs: one rank's trace and steps, its classified device work (``classify``). Outputs:
interval lists per share (``rightsize.analyzers.diagnosis.verdict`` turns them into the verdict). Pure.

**Shares** (percent of the summed step time, exclusive, summing to 100), GPU traces, per step
window, in this order:

* ``compute`` / ``memory``: time compute-bound / memory-bound kernels run on the primary device
  (compute first where they overlap; memset and device-to-device copies are memory work);
* ``communication``: collective kernels not overlapped by compute or memory work, plus host-side
  collectives while the GPU is idle;
* ``pcie``: host<->device and peer copies not hidden under kernels;
* ``dataloader``: GPU idle while the data loader's ``__next__`` runs;
* ``host``: GPU idle while the CPU runs ops, Python or launch/sync calls, or is inside an
  annotated range (``record_function``, NVTX) that does not enclose a whole step: time in a
  named range is recorded host work (nvFuser's JIT compilation in NVTX ranges was read as
  "nothing recorded");
* ``idle``: GPU idle with nothing recorded on the host, or the host waiting in a blocking call
  that Python-function recording (``with_stack=True``) shows (:data:`WAIT_CALLS`: sleep,
  select/poll, lock acquire, socket receive/accept). Without this, the enclosing Python frames
  (``main``) would count a loop's ``time.sleep`` as host work: an inference loop sleeping 5 ms
  between requests, recorded with ``--with-stack``, read as 97% framework overhead.

CPU-only traces (no GPU activity): the same shares over host ops' own (self) time: an ATen op's
own time is work, compute-bound when its roofline intensity is above the assumed CPU ridge point
(or, without shapes, when it is a BLAS/convolution op), memory-bound otherwise; framework
overhead (``host``) is only dispatch (wrapper ops, autograd nodes), ops under the tiny-op
threshold, and gaps while Python runs (:func:`cpu_work`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis import roofline
from rightsize.analyzers.diagnosis.taxonomy import CPU_COMPUTE_OPS, WRAPPER_OPS
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps
from rightsize.analyzers.metrics.tb_plugin import COMM_OP, DATALOADER
from rightsize.traces.schema import Trace
from rightsize.vocab import Signal


def _span(df: pl.DataFrame) -> iv.Intervals:
    return iv.union(iv.from_durations(df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()))


# Python's blocking calls as the profiler's Python tracer names them ("<built-in function
# sleep>", "<built-in method acquire of _thread.lock object at 0x...>", ...).
WAIT_CALLS = (r"^<built-in (?:function|method) (?:sleep|select|poll|epoll_wait|acquire|wait|"
              r"waitpid|recv|recv_into|recvfrom|recvmsg|accept)\b")


def waiting(trace: Trace) -> iv.Intervals:
    """Time the host spent in a blocking Python call (:data:`WAIT_CALLS`). The cheap category
    test runs first: a trace without Python functions (no ``with_stack``) matches no name."""
    calls = trace.cpu_ops.select("ts_ns", "dur_ns", "cat", "name").filter(
        pl.col("cat") == "python_function")
    return _span(calls.filter(pl.col("name").str.contains(WAIT_CALLS)))


def annotated(trace: Trace, steps: Steps | None) -> pl.DataFrame:
    """The host's annotated ranges (``record_function``, NVTX: Kineto ``user_annotation``)
    that are work, not structure: a range enclosing a whole step (``main``, ``train``) says
    nothing about where the step's time went and is left out."""
    ann = trace.cpu_ops.select("ts_ns", "dur_ns", "name", "cat").filter(
        pl.col("cat") == "user_annotation")
    if ann.height == 0 or steps is None or not steps.count:
        return ann
    order = np.argsort(steps.start_ns, kind="stable")
    starts, ends = steps.start_ns[order], steps.end_ns[order]
    s = ann["ts_ns"].to_numpy()
    e = s + ann["dur_ns"].to_numpy()
    first = np.clip(np.searchsorted(starts, s, side="left"), 0, len(starts) - 1)
    encloses = (starts[first] >= s) & (ends[first] <= e)
    return ann.filter(pl.Series(~encloses))


def _host_busy(trace: Trace, steps: Steps | None = None) -> iv.Intervals:
    """Host time with something recorded: ops, Python functions, runtime calls and annotated
    ranges (:func:`annotated`), less blocking waits."""
    # the columns read are selected before each filter (a filter copies every column it keeps)
    ops = trace.cpu_ops.select("ts_ns", "dur_ns", "cat").filter(
        pl.col("cat").is_in(["cpu_op", "python_function"]))
    busy = _span(pl.concat([ops.select("ts_ns", "dur_ns"),
                            trace.runtime.select("ts_ns", "dur_ns"),
                            annotated(trace, steps).select("ts_ns", "dur_ns")]))
    return iv.subtract(busy, waiting(trace))


def _dataloader(trace: Trace) -> iv.Intervals:
    return _span(trace.cpu_ops.select("ts_ns", "dur_ns", "name")
                 .filter(pl.col("name").str.contains(DATALOADER)))


def _comm_host(trace: Trace) -> iv.Intervals:
    return _span(trace.cpu_ops.select("ts_ns", "dur_ns", "name")
                 .filter(pl.col("name").str.contains(COMM_OP)
                         | (pl.col("name") == "record_param_comms")))


def gpu_shares(trace: Trace, steps: Steps, work: pl.DataFrame,
               device: int) -> dict[str, iv.Intervals]:
    """Exclusive intervals per share on one GPU (``work``: classified kernels of the device)."""
    window = iv.union(iv.of(steps.start_ns, steps.end_ns))
    # The filters below copy every column they keep: keep only the three they read.
    work = work.select("ts_ns", "dur_ns", "work")
    t = trace.transfers.filter(pl.col("device") == device)
    dev_mem = t.filter((pl.col("kind") == "memset") | pl.col("direction").is_in(["DtoD"]))
    link = t.filter(pl.col("direction").is_in(["HtoD", "DtoH", "PtoP", "HtoH"]))
    compute = iv.intersect(window, _span(work.filter(pl.col("work") == "compute")))
    memory = iv.subtract(
        iv.intersect(window, iv.union_all(_span(work.filter(pl.col("work") == "memory")),
                                          _span(dev_mem))),
        compute)
    busy = iv.union_all(compute, memory)
    comm = iv.subtract(iv.intersect(window, _span(work.filter(pl.col("work") == "communication"))),
                       busy)
    busy = iv.union_all(busy, comm)
    pcie = iv.subtract(iv.intersect(window, _span(link)), busy)
    idle = iv.subtract(window, iv.union_all(busy, pcie))
    dl = iv.intersect(idle, _dataloader(trace))
    idle = iv.subtract(idle, dl)
    comm_host = iv.intersect(idle, _comm_host(trace))
    idle = iv.subtract(idle, comm_host)
    host = iv.intersect(idle, _host_busy(trace, steps))
    idle = iv.subtract(idle, host)
    comm = iv.union_all(comm, comm_host)
    return {"compute": compute, "memory": memory, "pcie": pcie, "dataloader": dl,
            "communication": comm, "host": host, "idle": idle}


def self_segments(ops: pl.DataFrame) -> pl.DataFrame:
    """Exclusive (self) time of each host op: its range minus the ops nested inside it.

    Ops on one thread nest; each instant belongs to the innermost op running then. Returns one
    row per segment: ``row`` (index into ``ops``), ``ts_ns``, ``dur_ns``. One pass per thread
    with a stack (O(n)); a child that outlives its parent is clipped to the parent.
    """
    o = ops.with_row_index("row").with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns")).sort(
        ["pid", "tid", "ts_ns", "end_ns"], descending=[False, False, False, True])
    segments: list[tuple[int, int, int]] = []  # (row, start, end)
    for (_, _), g in o.group_by(["pid", "tid"], maintain_order=True):
        stack: list[tuple[int, int]] = []  # (end, row) of the ops still open
        t = 0  # time up to which self time has been given out
        for row, s, e in zip(g["row"].to_list(), g["ts_ns"].to_list(), g["end_ns"].to_list(),
                             strict=True):
            while stack and stack[-1][0] <= s:  # ops that ended before this one started
                end, top = stack.pop()
                if t < end:
                    segments.append((top, t, end))
                t = max(t, end)
            if stack:  # the enclosing op ran alone until now
                e = min(e, stack[-1][0])
                if t < s:
                    segments.append((stack[-1][1], t, s))
            t = s
            stack.append((e, row))
        while stack:
            end, top = stack.pop()
            if t < end:
                segments.append((top, t, end))
            t = max(t, end)
    return pl.DataFrame([(r, a, b - a) for r, a, b in segments], orient="row",
                        schema={"row": pl.UInt32, "ts_ns": pl.Int64, "dur_ns": pl.Int64})


def cpu_work(ops: pl.DataFrame, costs: pl.DataFrame, ridge: float,
             tiny_op_ns: float) -> pl.DataFrame:
    """Host ops with ``work`` (compute | memory | host) and ``signal`` for their self time.

    An ATen op's own time is work: compute- or memory-bound by its FLOPs/bytes against the
    CPU ridge point (roofline), else by name (BLAS/convolution compute, the roofline's memory
    ops), else memory-bound (``Signal.DEFAULT``, as for unmatched GPU kernels). Framework
    overhead (``host``) is only dispatch - ops that just call another op (``WRAPPER_OPS``),
    autograd nodes and other non-ATen scopes - and ops shorter than ``tiny_op_ns``.
    """
    ops = ops.join(costs.select("external_id", "flops", "bytes", "precision"),
                   on="external_id", how="left")
    by_roof = pl.when(pl.col("bytes") > 0).then(pl.col("flops") / pl.col("bytes") >= ridge)
    named = (pl.when(pl.col("name").is_in(list(CPU_COMPUTE_OPS))).then(True)
             .when(pl.col("name").is_in(list(roofline.MEMORY_OPS))).then(False))
    dispatch = ((pl.col("dur_ns") < tiny_op_ns) | pl.col("name").is_in(list(WRAPPER_OPS))
                | ~pl.col("name").str.starts_with("aten::"))
    return ops.with_columns(
        work=pl.when(dispatch).then(pl.lit("host"))
        .when(pl.coalesce(by_roof, named, pl.lit(False))).then(pl.lit("compute"))
        .otherwise(pl.lit("memory")),
        signal=pl.when(by_roof.is_not_null()).then(pl.lit(Signal.ROOFLINE.value))
        .when(named.is_not_null()).then(pl.lit(Signal.NAME.value))
        .otherwise(pl.lit(Signal.DEFAULT.value)),
    )


def cpu_shares(trace: Trace, steps: Steps, ridge: float, tiny_op_ns: float,
               costs: pl.DataFrame | None = None) -> tuple[dict[str, iv.Intervals], pl.DataFrame]:
    """Exclusive intervals per share when the host is the device (no GPU activity)."""
    from rightsize.analyzers.diagnosis.classify import op_costs

    window = iv.union(iv.of(steps.start_ns, steps.end_ns))
    ops = trace.cpu_ops.filter(pl.col("cat") == "cpu_op")
    ops = cpu_work(ops, op_costs(ops) if costs is None else costs, ridge, tiny_op_ns)
    seg = self_segments(ops)
    ops = ops.with_row_index("row")
    leaves = seg.join(ops.select("row", "name", "work", "signal", "flops", "bytes", "precision",
                                 "external_id"), on="row", how="left")
    dl = iv.intersect(window, _dataloader(trace))
    comm = iv.subtract(iv.intersect(window, _comm_host(trace)), dl)
    taken = iv.union_all(dl, comm)
    compute = iv.subtract(iv.intersect(window, _span(leaves.filter(pl.col("work") == "compute"))),
                          taken)
    taken = iv.union_all(taken, compute)
    memory = iv.subtract(iv.intersect(window, _span(leaves.filter(pl.col("work") == "memory"))),
                         taken)
    rest = iv.subtract(window, iv.union_all(taken, memory))
    host = iv.intersect(rest, _host_busy(trace, steps))
    idle = iv.subtract(rest, host)
    empty = iv.empty()
    # One row per op with its self time (FLOPs/bytes counted once per op, for CPU-only sizing).
    self_time = seg.group_by("row").agg(self_ns=pl.col("dur_ns").sum())
    work = (ops.filter(pl.col("work") != "host").join(self_time, on="row", how="left")
            .with_columns(dur_ns=pl.col("self_ns").fill_null(0)).drop("self_ns"))
    return ({"compute": compute, "memory": memory, "pcie": empty, "dataloader": dl,
             "communication": comm, "host": host, "idle": idle}, work)
