"""Which device an event belongs to: the trace's device properties, and one numbering for all
frames.

Input: the trace envelope's ``deviceProperties`` and the kernel and ``[memory]`` frames. Output:
the ``devices`` frame, and the ``memory`` frame renumbered onto the kernels' device where the
two number one GPU differently. PyTorch numbers a device by its ordinal (the allocator's
``[memory]`` events, ``deviceProperties``); ROCm's tracer numbers kernels by the HSA agent
index, which counts the host's CPU agents first: on a two-socket MI300X host the one GPU the job
used is ordinal 0 in ``[memory]`` and device 2 on its kernels (the TraceLens MI300X traces).
Without renumbering its allocator peak belongs to no GPU of the trace. Pure.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import polars as pl

from rightsize.traces import schema


class DeviceType(IntEnum):
    """``c10::DeviceType``, as ``[memory]`` events write it in ``Device Type`` (PyTorch's
    c10/core/DeviceType.h)."""

    CPU = 0
    CUDA = 1
    MKLDNN = 2
    OPENGL = 3
    OPENCL = 4
    IDEEP = 5
    HIP = 6
    FPGA = 7
    MAIA = 8
    XLA = 9
    VULKAN = 10
    METAL = 11
    XPU = 12
    MPS = 13
    META = 14
    HPU = 15
    VE = 16
    LAZY = 17
    IPU = 18
    MTIA = 19
    PRIVATEUSE1 = 20


# Memory of these types is host memory (MKLDNN and IDEEP tensors live in CPU RAM); every other
# type is a device's own memory. Meta tensors hold no data and allocate nothing.
HOST_DEVICE_TYPES = (DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP)


def device_properties(env: dict[str, Any]) -> pl.DataFrame:
    """The ``devices`` frame from ``deviceProperties`` (``computeProperties`` in old traces)."""
    props = env.get("deviceProperties") or env.get("computeProperties") or []
    rows = []
    for i, p in enumerate(props if isinstance(props, list) else []):
        if not isinstance(p, dict):
            continue
        rows.append({
            "device": p.get("id", i),
            "name": p.get("name"),
            "memory_bytes": p.get("totalGlobalMem"),
            "sm_count": p.get("numSms", p.get("multiProcessorCount")),
            "compute_major": p.get("computeMajor", p.get("major")),
            "compute_minor": p.get("computeMinor", p.get("minor")),
            "max_threads_per_sm": p.get("maxThreadsPerMultiprocessor",
                                        p.get("maxThreadsPerMultiProcessor")),
            "warp_size": p.get("warpSize"),
        })
    if not rows:
        return schema.empty("devices")
    df = pl.DataFrame(rows, schema_overrides={"name": pl.String()}, strict=False)
    return schema.conform("devices", df)


def single_visible_device(devices: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """With one GPU in ``deviceProperties`` and kernels on one device of another number (the
    ROCm agent index, or a physical index), the one entry is that device."""
    used = kernels["device"].drop_nulls().unique()
    if devices.height == 1 and used.len() == 1 and used[0] != devices["device"][0]:
        return devices.with_columns(device=pl.lit(used[0], pl.Int32))
    return devices


def memory_on_kernel_device(memory: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """``memory`` with its one device's events on the kernels' one device, when the two number
    it differently (allocator ordinal vs ROCm agent index) and no event is on that device
    already. Host memory and traces using several GPUs are left as they are: with several,
    which ordinal is which agent is not in the trace."""
    if memory.height == 0:
        return memory
    on_device = ~pl.col("device_type").is_in([int(t) for t in HOST_DEVICE_TYPES])
    ids = memory.filter(on_device)["device"].drop_nulls().unique()
    used = kernels["device"].drop_nulls().unique()
    if ids.len() != 1 or used.len() != 1 or ids[0] == used[0]:
        return memory
    return memory.with_columns(
        device=pl.when(on_device & (pl.col("device") == ids[0]))
        .then(pl.lit(used[0], pl.Int32)).otherwise(pl.col("device")))


def numbered(env: dict[str, Any], kernels: pl.DataFrame,
             memory: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The ``devices`` frame and the ``memory`` frame, both on the kernels' numbering."""
    return {"devices": single_visible_device(device_properties(env), kernels),
            "memory": memory_on_kernel_device(memory, kernels)}
