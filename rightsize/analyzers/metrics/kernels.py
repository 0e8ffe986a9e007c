"""Kernel, op, copy, memory and communication summaries of one trace.

Inputs: normalized frames (``rightsize.traces.schema``) and the step window. Outputs: frozen
dataclasses. Definitions:

* **Tensor-core kernel share** (% of kernel time): the TensorBoard plugin's name allowlist
  (``TB_PLUGIN_TC``, from NVIDIA PyProf), and separately that list plus ``MODERN_TC``, names of
  Hopper/Blackwell/AMD matrix kernels the plugin predates, less the kernels whose name says they
  run FP32 FMAs on CUDA cores (``SIMT_MARKS``: cuBLAS's ``sm80_xmma_gemm_f32f32_..._ffma_...``,
  which the plugin's ``xmma_gemm`` counts).
* **Top kernels** by summed duration; **top ops** by the GPU time of the kernels they launched
  (kernel ``external_id`` = op ``external_id``) and their host time.
* **Copies**: memcpy totals per direction and host memory kind; GB/s = bytes / busy ns.
* **Peak memory**: the highest ``Total Allocated`` (and ``Total Reserved``) of the caching
  allocator's ``[memory]`` events per device, of every ``c10::DeviceType`` (CUDA, HIP, XPU, MTIA...;
  CPU, MKLDNN and IDEEP memory is the host's, device -1); 2021 traces carry only deltas, so their peak is the
  running sum's maximum relative to the trace start.
* **Communication overlap**: |comm kernels ∩ compute kernels| / |comm kernels| on one device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import polars as pl

from rightsize.analyzers.document.metrics import Communication, MemoryPeak
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.tb_plugin import COMM_KERNEL
from rightsize.traces.devices import HOST_DEVICE_TYPES, DeviceType
from rightsize.traces.schema import Trace

# torch-tb-profiler tensor_core.py TC_Allowlist (after NVIDIA PyProf tc.py): substring match.
TB_PLUGIN_TC = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm",
    "c1688",
)
# Maintained here: matrix-unit kernels named after the plugin's list was frozen.
MODERN_TC = (
    "sm90_xmma", "sm100_xmma", "sm80_xmma", "nvjet",  # cuBLAS/cuBLASLt Hopper/Blackwell GEMMs
    "cutlass3x", "cutlass_80_tensorop", "cutlass_tensorop", "tensorop_",  # CUTLASS tensor-op GEMMs
    "wgmma", "gmma_", "tcgen05", "umma",  # Hopper/Blackwell warpgroup MMA kernels
    "flash_fwd", "flash_bwd", "flash::", "flash_attn", "fmha", "cudnn_generated_fort_native_sdpa",
    "_bf16gemm", "_fp16gemm", "s16816", "h16816", "bf16_s16816",
    "Cijk_", "_MFMA", "mfma",  # AMD rocBLAS/hipBLASLt Tensile (MFMA) and composable-kernel names
)

# An "xmma" kernel that says "ffma" is cuBLAS's FP32 GEMM on CUDA cores: on an H100 (torch 2.11,
# fp32 Linear layers) cuBLAS ran sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_..._ffma_... kernels, and
# GPM's tensor activity stayed under 0.1% while they ran.
SIMT_MARKS = ("_ffma_", "_simt_")


def _contains_any(patterns: tuple[str, ...]) -> pl.Expr:
    """Does ``name`` contain any of ``patterns`` (literal substrings; null for a null name)?
    One Aho-Corasick pass: the same flags as an OR of ``str.contains(p, literal=True)``, which
    cost ~4 ms per call to build and plan for the 47 names of the tensor-core lists."""
    if not patterns:
        return pl.lit(False)
    return pl.col("name").str.contains_any(list(patterns))


def _matrix_unit() -> pl.Expr:
    """On the extended tensor-core lists and not an FP32 CUDA-core kernel by its name."""
    return _contains_any(TB_PLUGIN_TC + MODERN_TC) & ~_contains_any(SIMT_MARKS)


def tensor_core_flag(df: pl.DataFrame) -> pl.Series:
    """Per row: a matrix-unit kernel by the extended definition? (matched once per name)"""
    names = df.select(pl.col("name").unique())
    flags = names.with_columns(flag=_matrix_unit())
    return df.select("name").join(flags, on="name", how="left", maintain_order="left")["flag"]


@dataclass(frozen=True, slots=True)
class TensorCores:
    plugin_pct: float | None  # share of kernel time in TB_PLUGIN_TC kernels
    extended_pct: float | None  # share in TB_PLUGIN_TC or MODERN_TC kernels, less SIMT_MARKS


def tensor_cores(kernels: pl.DataFrame) -> TensorCores:
    total = int(kernels["dur_ns"].sum()) if kernels.height else 0
    if total <= 0:
        return TensorCores(None, None)
    # one pass: time per distinct name, then both name tests on the names alone
    per_name = kernels.group_by("name").agg(pl.col("dur_ns").sum())
    plugin = cast(int, per_name.filter(_contains_any(TB_PLUGIN_TC))["dur_ns"].sum())
    ext = cast(int, per_name.filter(_matrix_unit())["dur_ns"].sum())
    return TensorCores(100.0 * plugin / total, 100.0 * ext / total)


def top_kernels(kernels: pl.DataFrame, k: int = 20) -> pl.DataFrame:
    """name, calls, total_ns, mean_ns, max_ns, pct (of kernel time), by total time."""
    total = max(int(kernels["dur_ns"].sum()), 1) if kernels.height else 1
    return (
        kernels.group_by("name")
        .agg(calls=pl.len(), total_ns=pl.col("dur_ns").sum(), mean_ns=pl.col("dur_ns").mean(),
             max_ns=pl.col("dur_ns").max(),
             mean_blocks_per_sm=pl.col("blocks_per_sm").mean(),
             mean_occupancy_pct=pl.col("occupancy_pct").mean())
        .with_columns(pct=100.0 * pl.col("total_ns") / total)
        .sort(["total_ns", "name"], descending=[True, False])
        .head(k)
    )


def top_ops(trace: Trace, k: int = 20) -> pl.DataFrame:
    """Host ops by the GPU time of the kernels they launched, with their host time."""
    # Filters, sorts and joins copy every column they keep: only the ones read here go in.
    ops = (trace.cpu_ops.select("name", "ts_ns", "dur_ns", "external_id", "cat")
           .filter(pl.col("cat") == "cpu_op"))
    host = ops.group_by("name").agg(calls=pl.len(), host_ns=pl.col("dur_ns").sum())
    # One op per external id: the innermost (latest-starting) op that carries it; of ops that
    # start together, the last in the trace. Only the ids some kernel carries are looked at:
    # every op has an id, and grouping a million of them held 130 MiB at 1 GB of trace.
    launched = trace.kernels.select("external_id").filter(pl.col("external_id").is_not_null())
    owner = (
        ops.select("external_id", "ts_ns", "name")
        .join(launched.unique(), on="external_id", how="semi")
        .sort("ts_ns", maintain_order=True).group_by("external_id").agg(op=pl.col("name").last())
    )
    gpu = (
        trace.kernels.select("external_id", "dur_ns").join(owner, on="external_id", how="inner")
        .group_by("op").agg(gpu_ns=pl.col("dur_ns").sum(), kernels=pl.len())
        .rename({"op": "name"})
    )
    return (
        host.join(gpu, on="name", how="left")
        .with_columns(pl.col("gpu_ns").fill_null(0), pl.col("kernels").fill_null(0))
        .sort(["gpu_ns", "host_ns", "name"], descending=[True, True, False])
        .head(k)
    )


def copies(transfers: pl.DataFrame) -> pl.DataFrame:
    """memcpy count/bytes/time/GB/s per direction and host memory kind."""
    m = transfers.filter(pl.col("kind") == "memcpy").with_columns(
        host_memory=pl.when(pl.col("direction") == "HtoD").then(pl.col("src_memory"))
        .when(pl.col("direction") == "DtoH").then(pl.col("dst_memory"))
        .otherwise(None)
    )
    return (
        m.group_by("direction", "host_memory")
        .agg(count=pl.len(), bytes=pl.col("bytes").sum(), busy_ns=pl.col("dur_ns").sum())
        .with_columns(
            gbps=pl.when(pl.col("busy_ns") > 0).then(pl.col("bytes") / pl.col("busy_ns"))
        )
        .sort(["bytes", "direction"], descending=[True, False], nulls_last=True)
    )


def memory_peaks(memory: pl.DataFrame) -> list[MemoryPeak]:
    if memory.height == 0:
        return []
    out = []
    host = pl.col("device_type").is_in([int(t) for t in HOST_DEVICE_TYPES])
    mem = memory.filter(pl.col("device_type") != int(DeviceType.META)).with_columns(
        dev=pl.when(host).then(-1).otherwise(pl.col("device")))  # any device type, HIP too
    for dev in sorted(mem["dev"].drop_nulls().unique().to_list()):
        d = mem.filter(pl.col("dev") == dev).sort("ts_ns", maintain_order=True)
        alloc = cast("int | None", d["total_allocated_bytes"].max())
        if alloc is not None:
            out.append(MemoryPeak(int(dev), int(alloc), _opt_int(d["total_reserved_bytes"].max()),
                                  False))
        else:
            running = d["delta_bytes"].fill_null(0).cum_sum()
            out.append(MemoryPeak(int(dev), int(max(cast("int | None", running.max()) or 0, 0)),
                                  None, True))
    return out


def _opt_int(v: object) -> int | None:
    return None if v is None else int(v)  # type: ignore[call-overload]


def communication(kernels: pl.DataFrame, w0: int, w1: int) -> Communication:
    is_comm = pl.col("name").str.contains(COMM_KERNEL)
    def spans(df: pl.DataFrame) -> iv.Intervals:
        busy = iv.from_durations(df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy())
        return iv.clip(iv.union(busy), w0, w1)
    comm = spans(kernels.filter(is_comm))
    comp = spans(kernels.filter(~is_comm))
    c = iv.total(comm)
    o = iv.total(iv.intersect(comm, comp))
    return Communication(c / 1e6, o / 1e6, 100.0 * o / c if c else None)
