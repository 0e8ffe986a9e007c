"""Per-kernel counter rows (Nsight Compute's speed-of-light and counters): the normalized schema.

What a reader that contributes ``readers.KERNEL_ROWS`` emits (``traces/ncu.py`` reads them
from ``ncu --csv``), as ``samples.py`` is for GPU samples: :data:`NCU_KERNELS`, one row per
profiled kernel launch; :func:`conform_ncu` casts a frame to it and :func:`combine_ncu` merges
the rows several files give of the same launches (what the loader does with every input's
rows). Pure.
"""

from __future__ import annotations

import polars as pl

NCU_KERNELS: dict[str, pl.DataType] = {
    "launch_id": pl.Int64(),  # ncu "ID": the profiled launch's index
    "process_id": pl.Int64(),
    "kernel_name": pl.String(),  # as ncu prints it (namespaces stripped)
    "kernel_name_normalized": pl.String(),  # normalize_kernel_name(kernel_name): the join key
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "compute_capability": pl.String(),  # "CC", e.g. "9.0"
    "grid_blocks": pl.Int64(),  # "Grid Size" (x*y*z) or launch__grid_size
    "block_threads": pl.Int64(),  # "Block Size" (x*y*z) or launch__block_size
    "duration_ns": pl.Int64(),  # gpu__time_duration.sum
    "sm_throughput_pct": pl.Float64(),  # Compute (SM) Throughput (SOL)
    "memory_throughput_pct": pl.Float64(),  # Memory Throughput (SOL, max of DRAM/L1/L2)
    "dram_throughput_pct": pl.Float64(),
    "l1tex_throughput_pct": pl.Float64(),
    "l2_throughput_pct": pl.Float64(),
    "achieved_occupancy_pct": pl.Float64(),
    "theoretical_occupancy_pct": pl.Float64(),
    "tensor_pipe_active_pct": pl.Float64(),
    "waves_per_sm": pl.Float64(),
    "registers_per_thread": pl.Int32(),
    "elapsed_cycles": pl.Float64(),
    "sm_active_cycles": pl.Float64(),
    "sm_frequency_hz": pl.Float64(),
    "dram_frequency_hz": pl.Float64(),
    "sm_count": pl.Int32(),  # device__attribute_multiprocessor_count, when collected
    "dram_read_bytes": pl.Float64(),
    "dram_write_bytes": pl.Float64(),
    "dram_bytes": pl.Float64(),  # dram__bytes.sum, else read + write
    "dram_bandwidth_bytes_per_s": pl.Float64(),  # achieved DRAM bandwidth
    "flop_count": pl.Float64(),  # SASS add + mul + 2*fma (h/f/d), when those metrics were collected
    "flop_rate_per_s": pl.Float64(),  # flop_count / duration
    "arithmetic_intensity_flop_per_byte": pl.Float64(),  # flop_count / dram_bytes
    "tensor_ops": pl.Float64(),  # sum of sm__ops_path_tensor_* as recorded
    # Roofline section: peak = ops per cycle x SM clock; DRAM peak = bytes/cycle x DRAM clock.
    "roofline_fp32_peak_flop_per_s": pl.Float64(),
    "roofline_fp64_peak_flop_per_s": pl.Float64(),
    "roofline_fp32_achieved_flop_per_s": pl.Float64(),
    "roofline_fp64_achieved_flop_per_s": pl.Float64(),
    "roofline_dram_peak_bytes_per_s": pl.Float64(),
}


def conform_ncu(df: pl.DataFrame) -> pl.DataFrame:
    """Select and cast ``df`` to :data:`NCU_KERNELS`; absent columns become null."""
    return df.select(
        [
            (pl.col(c) if c in df.columns else pl.lit(None)).cast(t, strict=False).alias(c)
            for c, t in NCU_KERNELS.items()
        ]
    )


def combine_ncu(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Merge NCU_KERNELS frames of the same launches (e.g. details + a roofline section CSV):
    one row per (process_id, launch_id, kernel_name), first non-null value per column."""
    if not frames:
        return pl.DataFrame(schema=NCU_KERNELS)
    keys = ["process_id", "launch_id", "kernel_name"]
    merged = pl.concat(frames, how="vertical").group_by(keys, maintain_order=True)
    out = merged.agg([pl.col(c).drop_nulls().first() for c in NCU_KERNELS if c not in keys])
    return conform_ncu(out)
