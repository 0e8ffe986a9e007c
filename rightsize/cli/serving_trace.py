"""A Kineto trace of a served model as calibration points: its prefill and decode passes
(:mod:`rightsize.analyzers.serving.trace_steps`) on the GPU the trace names. Only click-free
standard imports at module level (called from :mod:`rightsize.cli.serving_measured`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rightsize.analyzers.serving.calibrate import Observation
    from rightsize.analyzers.serving.step import ModelConfig
    from rightsize.catalog import Catalog


def _gpu_of(trace, catalog: Catalog, path: Path, given: str | None) -> str:  # type: ignore[no-untyped-def]
    from rightsize.errors import InputError

    if given:
        return catalog.gpu(given).name
    if trace.devices.is_empty():
        raise InputError(path, "the trace names no GPU: give --measured-gpu")
    row = trace.devices.row(0, named=True)
    match = catalog.match(str(row["name"]), row.get("memory_bytes"), row.get("sm_count"))
    if match.catalog is None:
        raise InputError(path, f"{match.note}; give --measured-gpu")
    return match.catalog


def trace_observations(path: Path, config: ModelConfig, precision: str, catalog: Catalog,
                       gpu: str | None, tp: int | None) -> list[Observation]:
    """One observation per forward pass of the served model in the trace at ``path``."""
    from rightsize.analyzers.serving.calibrate import Observation
    from rightsize.analyzers.serving.step import Deployment
    from rightsize.analyzers.serving.trace_steps import trace_steps
    from rightsize.errors import InputError
    from rightsize.traces.kineto import read_kineto

    trace = read_kineto(path)
    steps = trace_steps(trace.cpu_ops, trace.kernels)
    if not steps:
        raise InputError(path, "no forward pass of a served model found (no aten::embedding"
                         " with recorded shapes: profile with record_shapes=True)")
    ranks = tp or trace.meta.world_size or 1
    dep = Deployment(_gpu_of(trace, catalog, path, gpu), ranks, 1, precision)
    del config
    out = []
    for i, s in enumerate(steps):
        src = f"{path.name} pass {i + 1}"
        if s.prefill:
            out.append(Observation(dep, s.gpu_ms, prefill_seqs=s.seqs, prefill_tokens=s.tokens,
                                   source=src))
        else:
            out.append(Observation(dep, s.gpu_ms, decode_seqs=s.seqs, kv_mean=s.cached + 1,
                                   source=src))
    return out
