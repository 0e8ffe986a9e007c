"""What sizing takes from a measured trace beyond the diagnosis' shares.

Input: a trace, its classified device work and its step count. Output: the keyword arguments
:func:`rightsize.analyzers.analysis` adds to the sizing :class:`~.model.Workload`: the
workload's precision (time-weighted, ``metrics.precision``), the per-step kernel work for the
per-kernel projection, and the job's rank count. Pure.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from rightsize.analyzers.metrics.precision import precision_mix
from rightsize.analyzers.sizing.kernels_projection import kernel_work
from rightsize.traces.schema import Trace


def measured_inputs(trace: Trace, work: pl.DataFrame, steps: int, device: int | None,
                    architecture: str | None = None) -> dict[str, Any]:
    """``precision``, ``kernels`` and ``ranks`` for the sizing Workload."""
    mix = precision_mix(work, architecture)
    kernels = kernel_work(work, steps, architecture) if device is not None else ()
    return {"precision": mix.workload or "fp32", "kernels": kernels,
            "ranks": trace.meta.world_size or 1}
