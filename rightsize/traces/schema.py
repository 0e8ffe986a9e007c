"""The normalized trace schema: the one shape every reader produces.

Every reader in ``rightsize.traces`` (Kineto JSON, nsys SQLite, ...) emits a :class:`Trace`
whose frames have exactly the columns declared here, in these dtypes and units. Nothing
outside ``rightsize.traces`` parses a vendor format; analyzers only ever see these frames.

Units, converted once at the reader boundary:

* times are int64 nanoseconds: ``ts_ns`` is the start on the trace's clock (absolute epoch ns
  for Kineto), ``dur_ns`` is never negative;
* sizes are int64 bytes (``*_bytes``); bandwidth is GB/s (1e9 bytes per second);
* percentages are 0-100 (``*_pct``), fractions are named ``*_frac``.

Columns that a format does not record are present and null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from rightsize.traces.window import StepWindow

# GPU kernels. One row per kernel execution.
KERNELS: dict[str, pl.DataType] = {
    "device": pl.Int32(),  # GPU index the kernel ran on (Kineto: args.device, else pid)
    "stream": pl.Int64(),  # CUDA/HIP stream id
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),  # demangled kernel name as the tool recorded it
    "correlation": pl.Int64(),  # links to the runtime/driver call that launched it
    "external_id": pl.Int64(),  # links to the enclosing cpu op (Kineto "External id")
    "grid_blocks": pl.Int64(),  # blocks in the grid (product of grid x*y*z)
    "block_threads": pl.Int64(),  # threads per block (product of block x*y*z)
    "blocks_per_sm": pl.Float64(),  # Kineto's "blocks per SM" = grid_blocks / SM count
    "warps_per_sm": pl.Float64(),  # Kineto's "warps per SM"
    "occupancy_pct": pl.Float64(),  # Kineto's "est. achieved occupancy %" (an estimate, 0-100)
    "registers_per_thread": pl.Int32(),
    "shared_memory_bytes": pl.Int64(),  # static + dynamic shared memory per block
}

# GPU memcpy and memset operations. One row per operation.
TRANSFERS: dict[str, pl.DataType] = {
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),
    "kind": pl.String(),  # "memcpy" | "memset"
    "direction": pl.String(),  # HtoD | DtoH | DtoD | PtoP | HtoH (memcpy); null for memset
    "src_memory": pl.String(),  # pageable | pinned | device | host | managed | array | null
    "dst_memory": pl.String(),
    "bytes": pl.Int64(),
    "bandwidth_gbps": pl.Float64(),  # bytes / dur_ns (= GB/s); null when dur_ns == 0
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
}

# CUDA/HIP runtime and driver API calls on the host.
RUNTIME: dict[str, pl.DataType] = {
    "pid": pl.String(),  # host process id (a string: some traces use non-numeric pids)
    "tid": pl.String(),  # host thread id
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),  # cudaLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync, ...
    "api": pl.String(),  # "runtime" | "driver"
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
}

# Host-side ranges: operators, user annotations (record_function) and Python frames.
CPU_OPS: dict[str, pl.DataType] = {
    "pid": pl.String(),
    "tid": pl.String(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),
    "cat": pl.String(),  # "cpu_op" | "user_annotation" | "python_function"
    "external_id": pl.Int64(),
    "input_dims": pl.String(),  # JSON text of "Input Dims" when record_shapes was on
    "input_types": pl.String(),  # JSON text of "Input type"
    "concrete_inputs": pl.String(),  # JSON text of "Concrete Inputs" (scalars: stride, padding)
}

# User annotations projected onto the GPU timeline (Kineto "gpu_user_annotation").
GPU_ANNOTATIONS: dict[str, pl.DataType] = {
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),
}

# ProfilerStep#N ranges as recorded on the host.
STEPS: dict[str, pl.DataType] = {
    "step": pl.Int64(),  # N of ProfilerStep#N
    "pid": pl.String(),
    "tid": pl.String(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
}

# Caching-allocator events ("[memory]" instants, profile_memory=True).
MEMORY: dict[str, pl.DataType] = {
    "ts_ns": pl.Int64(),
    "device_type": pl.Int32(),  # c10::DeviceType: 0 CPU, 1 CUDA, 6 HIP... (devices.DeviceType)
    "device": pl.Int32(),  # the kernels' device index (devices.py), -1 for CPU
    "delta_bytes": pl.Int64(),  # allocation (+) or free (-)
    "total_allocated_bytes": pl.Int64(),  # allocator total after the event (null in 2021 traces)
    "total_reserved_bytes": pl.Int64(),
}

# Flow events: CPU launch -> GPU activity ("ac2g"), forward -> backward ("fwdbwd").
FLOWS: dict[str, pl.DataType] = {
    "id": pl.Int64(),  # for launch flows this equals the correlation id
    "cat": pl.String(),  # "launch" | "fwdbwd"
    "phase": pl.String(),  # "s" (start) | "f" (finish)
    "pid": pl.String(),
    "tid": pl.String(),
    "ts_ns": pl.Int64(),
}

# CUDA synchronization intervals (Kineto "cuda_sync": Stream/Event/Context Sync).
SYNCS: dict[str, pl.DataType] = {
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),
    "correlation": pl.Int64(),
}

# Collective calls with the metadata the profiler recorded in their args (newer Kineto: the NCCL
# kernel and its ``record_param_comms`` host op carry "Collective name", message sizes, the
# process group and its sequence number). One row per such event, kernel or host op; traces
# without collective args have none (their NCCL kernels are in ``kernels`` all the same).
COMMS: dict[str, pl.DataType] = {
    "kind": pl.String(),  # "kernel" | "cpu_op"
    "device": pl.Int32(),  # kernels: the GPU index; host ops: null
    "stream": pl.Int64(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
    "collective": pl.String(),  # "Collective name" as recorded: allreduce, _allgather_base, ...
    "in_nelems": pl.Int64(),  # "In msg nelems": elements sent by this rank
    "out_nelems": pl.Int64(),  # "Out msg nelems": elements received
    "dtype": pl.String(),  # "Float", "BFloat16", ...
    "group_size": pl.Int64(),  # ranks in the process group
    "pg_name": pl.String(),  # "Process Group Name" (the same on every member rank)
    "pg_ranks": pl.String(),  # "Process Group Ranks" as recorded, e.g. "[0, 1]" (global ranks)
    "seq": pl.Int64(),  # "Seq": the call's sequence number in its process group
}

# One row per GPU the trace describes (not only the ones used).
DEVICES: dict[str, pl.DataType] = {
    "device": pl.Int32(),
    "name": pl.String(),
    "memory_bytes": pl.Int64(),
    "sm_count": pl.Int32(),
    "compute_major": pl.Int32(),
    "compute_minor": pl.Int32(),
    "max_threads_per_sm": pl.Int32(),
    "warp_size": pl.Int32(),
}

# Profiling windows ("PyTorch Profiler (N)" spans, Kineto cat "Trace").
WINDOWS: dict[str, pl.DataType] = {
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "name": pl.String(),
}

FRAMES: dict[str, dict[str, pl.DataType]] = {
    "kernels": KERNELS,
    "transfers": TRANSFERS,
    "runtime": RUNTIME,
    "cpu_ops": CPU_OPS,
    "gpu_annotations": GPU_ANNOTATIONS,
    "steps": STEPS,
    "memory": MEMORY,
    "flows": FLOWS,
    "syncs": SYNCS,
    "devices": DEVICES,
    "windows": WINDOWS,
    "comms": COMMS,
}


def empty(frame: str) -> pl.DataFrame:
    """An empty frame with the declared columns of ``frame``."""
    return pl.DataFrame(schema=FRAMES[frame])


def conform(frame: str, df: pl.DataFrame) -> pl.DataFrame:
    """Select and cast ``df`` to the declared columns; absent columns become null."""
    cols = FRAMES[frame]
    return df.select(
        [
            (pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c)
            for c, t in cols.items()
        ]
    )


@dataclass(frozen=True, slots=True)
class TraceMeta:
    """What a trace says about itself, beyond its events."""

    path: str
    format: str  # "kineto", "nsys", ...
    rank: int | None = None  # distributed rank (None when the trace has no distributed info)
    world_size: int | None = None
    backend: str | None = None  # "nccl", "gloo", ...
    vendor: str = "nvidia"  # "nvidia" | "amd" | "none" (CPU-only)
    base_time_ns: int | None = None  # Kineto baseTimeNanoseconds when ts was relative
    legacy_names: bool = False  # 2021 category names (Kernel/Runtime/Operator/...)
    profiler: dict[str, Any] = field(default_factory=dict)  # settings and versions recorded
    event_count: int = 0
    window: StepWindow | None = None  # read over a window of steps (traces/window.py)
    # The format records host operators (torch ops); False (Nsight Systems): without step
    # ranges, one step spans the GPU activity rather than the host's
    host_ops: bool = True


@dataclass(frozen=True, slots=True)
class Trace:
    """One trace file (one process / rank), normalized."""

    meta: TraceMeta
    kernels: pl.DataFrame
    transfers: pl.DataFrame
    runtime: pl.DataFrame
    cpu_ops: pl.DataFrame
    gpu_annotations: pl.DataFrame
    steps: pl.DataFrame
    memory: pl.DataFrame
    flows: pl.DataFrame
    syncs: pl.DataFrame
    devices: pl.DataFrame
    windows: pl.DataFrame
    # collective metadata (Kineto args); readers that record none leave it empty
    comms: pl.DataFrame = field(default_factory=lambda: empty("comms"))

    def frame(self, name: str) -> pl.DataFrame:
        return getattr(self, name)
