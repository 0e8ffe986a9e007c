"""The devices of one rank: each GPU's TensorBoard-plugin metrics, the primary one, and the
catalog GPU it is (sections ``device_use`` and ``device_match``).

Input: a section's view of one rank (:class:`~rightsize.analyzers.sections.SectionInput`: the
trace, its steps, the catalog). Output: :class:`DeviceUse` (the primary device is the one with
the most kernel time) and the :class:`~rightsize.catalog.DeviceMatch` of the primary device;
what they cannot say goes to the notes once. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from rightsize.analyzers.document.metrics import DeviceMetrics
from rightsize.analyzers.metrics import tb_plugin
from rightsize.catalog import DeviceMatch
from rightsize.traces.schema import Trace

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """Every device with kernels in the step window, and the one with the most kernel time
    (``None``: no GPU kernels)."""

    devices: tuple[DeviceMetrics, ...]
    primary: int | None

    def device(self, index: int | None) -> DeviceMetrics | None:
        return next((d for d in self.devices if d.device == index), None)

    @property
    def kernel_ns(self) -> int:
        return max((d.kernel_ns for d in self.devices), default=0)


def section(rank: SectionInput) -> DeviceUse:
    """Section ``device_use`` (needs ``step_ranges``), with notes on what the kernels lack."""
    trace = rank.trace
    devices = tuple(tb_plugin.device_metrics(trace, rank.steps))
    primary = max(devices, key=lambda d: d.kernel_ns).device if devices else None
    for note in kernel_notes(trace, primary):
        rank.note(note)
    return DeviceUse(devices, primary)


def kernel_notes(trace: Trace, primary: int | None) -> list[str]:
    notes = []
    if trace.kernels.height == 0:
        notes.append("no GPU kernels in the trace: GPU metrics are null")
    if primary is not None and not trace.kernels["blocks_per_sm"].is_not_null().any():
        notes.append("kernels carry no 'blocks per SM' (e.g. AMD/ROCm): Est. SM efficiency is null")
    if primary is not None and not trace.kernels["occupancy_pct"].is_not_null().any():
        notes.append("kernels carry no occupancy estimate: Est. achieved occupancy is null")
    if trace.memory.height == 0:
        notes.append("no [memory] events (profile_memory was off): peak memory is null")
    return notes


def match(rank: SectionInput) -> DeviceMatch | None:
    """Section ``device_match`` (needs ``device_use``): the catalog GPU the primary device is;
    ``None`` without a GPU or a catalog."""
    device, catalog = rank.device, rank.context.catalog
    if device is None or catalog is None:
        return None
    row = rank.trace.devices.filter(pl.col("device") == device).to_dicts()
    if not row or not row[0]["name"]:
        found = DeviceMatch("unknown", None, f"device {device} has no name in the trace: "
                            "it cannot be matched to the GPU catalog")
    else:
        found = catalog.match(row[0]["name"], row[0]["memory_bytes"], row[0]["sm_count"])
    if found.gpu is None:
        rank.note(found.note)
    return found


def prop(trace: Trace, device: int | None, col: str) -> int | None:
    """A device's property from the trace (``sm_count``, ``memory_bytes``, ...)."""
    if device is None:
        return None
    row = trace.devices.filter(pl.col("device") == device)
    return None if row.height == 0 or row[col][0] is None else int(row[col][0])
