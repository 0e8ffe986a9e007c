"""The document's top tables of one rank: kernels by their summed time, each with the class the
diagnosis gave it (section ``top_kernels``), and host ops by the GPU time they launched
(section ``top_ops``).

Input: a section's view of one rank (:class:`~rightsize.analyzers.sections.SectionInput`).
Output: tuples of :class:`~rightsize.analyzers.document.metrics.TopKernel` and ``TopOp`` at full
precision (their fields round when written). Definitions: :mod:`.kernels`. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rightsize.analyzers.document.metrics import TopKernel, TopOp
from rightsize.analyzers.metrics import kernels
from rightsize.vocab import DeviceKind

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers.document.diagnosis import Diagnosis
    from rightsize.analyzers.sections import SectionInput


def kernel_classes(work: pl.DataFrame | None,
                   diagnosis: Diagnosis | None) -> dict[str, tuple[str | None, str | None]]:
    """Kernel name -> (compute/memory class, deciding signal), for GPU diagnoses."""
    if work is None or diagnosis is None or diagnosis.device != DeviceKind.GPU:
        return {}
    return {row[0]: (row[1], row[2])
            for row in work.select("name", "work", "signal").unique("name").iter_rows()}


def top_kernels(rank: SectionInput) -> tuple[TopKernel, ...]:
    """Section ``top_kernels`` (needs ``verdict``)."""
    v = rank["verdict"]
    cls = kernel_classes(v.work, v.diagnosis)
    return tuple(
        TopKernel(k["name"], k["calls"], k["total_ns"] / 1e6, k["mean_ns"] / 1000,
                  k["max_ns"] / 1000, k["pct"], *cls.get(k["name"], (None, None)))
        for k in kernels.top_kernels(rank.trace.kernels).to_dicts())


def top_ops(rank: SectionInput) -> tuple[TopOp, ...]:
    """Section ``top_ops``."""
    return tuple(TopOp(o["name"], o["calls"], o["host_ns"] / 1e6, o["gpu_ns"] / 1e6,
                       o["kernels"]) for o in kernels.top_ops(rank.trace).to_dicts())
