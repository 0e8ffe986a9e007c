"""What sizing takes from a measured trace beyond the diagnosis' shares.

Input: a trace, its classified device work and its step count. Output: the keyword arguments
:func:`rightsize.analyzers.analysis` adds to the sizing :class:`~.model.Workload`: the
workload's precision (time-weighted, ``metrics.precision``), the per-step kernel work for the
per-kernel projection, the job's rank count and its collective calls per step (type, size and
group from the rank's comms records: ``analyzers/job/collectives``), which the communication
model projects onto other fabrics. Pure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from rightsize.analyzers.job import collectives
from rightsize.analyzers.metrics.precision import precision_mix
from rightsize.analyzers.metrics.steps import Steps
from rightsize.analyzers.sizing.kernels_projection import kernel_work
from rightsize.analyzers.sizing.model import CommWork
from rightsize.traces.schema import Trace

_NO_STEPS = Steps((), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), "none", False, 0)


def measured_inputs(trace: Trace, work: pl.DataFrame, steps: int, device: int | None,
                    architecture: str | None = None) -> dict[str, Any]:
    """``precision``, ``kernels``, ``ranks`` and ``collectives`` for the sizing Workload."""
    mix = precision_mix(work, architecture)
    kernels = kernel_work(work, steps, architecture) if device is not None else ()
    ranks = trace.meta.world_size or 1
    return {"precision": mix.workload or "fp32", "kernels": kernels, "ranks": ranks,
            "collectives": comm_work(trace, device, steps) if ranks > 1 else ()}


def comm_work(trace: Trace, device: int | None, steps: int) -> tuple[CommWork, ...]:
    """The rank's collective kernels on ``device`` grouped by (type, size, group size), per step
    (the trace's calls over its ``steps``; the wait for late ranks is not known from one
    rank)."""
    calls = collectives.calls(trace, _NO_STEPS, device)
    if calls.height == 0 or steps <= 0:
        return ()
    rows = calls.group_by("collective", "bytes", "group_size").agg(
        n=pl.len(), kernel_ns=pl.col("dur_ns").sum(), exposed_ns=pl.col("exposed_ns").sum(),
    ).sort("kernel_ns", "collective", descending=[True, False], nulls_last=True)
    return tuple(CommWork(r["collective"], r["bytes"], r["group_size"], r["n"] / steps,
                          r["kernel_ns"] / steps / 1e6, r["exposed_ns"] / steps / 1e6)
                 for r in rows.iter_rows(named=True))
