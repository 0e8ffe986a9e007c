"""Nsight Compute units and metric names -> the declared NCU_KERNELS columns.

Role: ncu auto-scales units per row (``us``/``usecond``/``msecond``, ``Kbyte``/``Mbyte``,
``Ghz``, ``Gbyte/s``, ``cycle/nsecond``...) and names a value either by its section display
name (details page: "Duration", "Compute (SM) Throughput") or by its raw metric
(``gpu__time_duration.sum``, raw page and ``--metrics``). This module parses a unit string into
(dimension, factor to base units) and maps (metric name, dimension) to an output column.

Inputs: unit and metric strings. Outputs: :func:`unit_scale` and :data:`METRIC_TARGETS`.
Base units: ns for durations, bytes, bytes/s, Hz, percent 0-100, plain counts.
"""

from __future__ import annotations

import re

# (dimension, factor) for a unit; the dimension decides which columns a value may fill.
# Nanoseconds per time unit (integers, so cycle/nsecond -> exactly 1e9 Hz).
_TIME_NS = {
    "s": 1e9,
    "second": 1e9,
    "ms": 1e6,
    "msecond": 1e6,
    "us": 1e3,
    "usecond": 1e3,
    "ns": 1.0,
    "nsecond": 1.0,
}
_SI = {
    "": 1.0,
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
    "t": 1e12,
    "ki": 1024.0,
    "mi": 1024.0**2,
    "gi": 1024.0**3,
    "ti": 1024.0**4,
}
_COUNTS = (
    "cycle",
    "inst",
    "warp",
    "block",
    "thread",
    "cluster",
    "sector",
    "request",
    "transaction",
    "wavefront",
    "register",
    "sm",
)
_PREFIXED = re.compile(r"^(ki|mi|gi|ti|k|m|g|t)?(bytes?|b|hz)$", re.IGNORECASE)


def _part(text: str) -> tuple[str, float] | None:
    """One side of a unit: ("bytes"|"hz"|"time"|"count", factor) or None when unknown."""
    low = text.strip().lower()
    if low in _TIME_NS:
        return "time", _TIME_NS[low]
    match = _PREFIXED.match(low)
    if match:
        return ("hz" if match.group(2) == "hz" else "bytes"), _SI[(match.group(1) or "")]
    if low.rstrip("s") in _COUNTS:
        return "count", 1.0
    return None


def unit_scale(unit: str | None) -> tuple[str, float]:
    """``(dimension, factor)``: value * factor is in the dimension's base unit.

    Dimensions: "pct", "time_ns", "bytes", "byte_rate" (bytes/s), "freq_hz", "count",
    "per_cycle", "count_rate" (per second), "other" (unknown unit, value kept as is).
    """
    text = (unit or "").strip()
    if not text:
        return "count", 1.0
    if text == "%":
        return "pct", 1.0
    num_text, _, den_text = text.partition("/")
    num = _part(num_text)
    if num is None:
        return "other", 1.0
    kind, factor = num
    if not den_text:
        return {
            "time": ("time_ns", factor),
            "bytes": ("bytes", factor),
            "hz": ("freq_hz", factor),
            "count": ("count", 1.0),
        }[kind]
    den = _part(den_text)
    if den is None:
        return "other", 1.0
    den_kind, den_factor = den
    if den_kind == "time":
        per_second = 1e9 / den_factor  # den_factor is ns per unit
        if kind == "bytes":
            return "byte_rate", factor * per_second
        if kind == "count" and num_text.strip().lower().startswith("cycle"):
            return "freq_hz", per_second  # cycle/nsecond = GHz
        return "count_rate", factor * per_second
    if den_kind == "count":  # inst/cycle is a rate per cycle; register/thread is a count
        return ("per_cycle" if den_text.strip().lower().startswith("cycle") else "count"), factor
    return "other", 1.0


def _names(*names: str) -> tuple[str, ...]:
    return names


# (dimension, metric names [display, raw...]) -> output column. First non-null wins per column.
METRIC_TARGETS: dict[tuple[str, str], str] = {}
_TABLE: list[tuple[str, str, tuple[str, ...]]] = [
    ("time_ns", "duration_ns", _names("Duration", "gpu__time_duration.sum", "gpu__time_duration")),
    (
        "pct",
        "sm_throughput_pct",
        _names(
            "Compute (SM) Throughput", "SM [%]", "sm__throughput.avg.pct_of_peak_sustained_elapsed"
        ),
    ),
    (
        "pct",
        "memory_throughput_pct",
        _names(
            "Memory Throughput",
            "Memory [%]",
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        ),
    ),
    (
        "pct",
        "dram_throughput_pct",
        _names(
            "DRAM Throughput",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        ),
    ),
    (
        "pct",
        "l1tex_throughput_pct",
        _names("L1/TEX Cache Throughput", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ),
    (
        "pct",
        "l2_throughput_pct",
        _names("L2 Cache Throughput", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ),
    (
        "pct",
        "achieved_occupancy_pct",
        _names("Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ),
    (
        "pct",
        "theoretical_occupancy_pct",
        _names("Theoretical Occupancy", "sm__maximum_warps_per_active_cycle_pct"),
    ),
    (
        "pct",
        "tensor_pipe_active_pct",
        _names(
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
        ),
    ),
    ("count", "waves_per_sm", _names("Waves Per SM", "launch__waves_per_multiprocessor")),
    (
        "count",
        "registers_per_thread",
        _names("Registers Per Thread", "launch__registers_per_thread"),
    ),
    ("count", "launch_grid_blocks", _names("Grid Size", "launch__grid_size")),
    ("count", "launch_block_threads", _names("Block Size", "launch__block_size")),
    (
        "count",
        "elapsed_cycles",
        _names("Elapsed Cycles", "sm__cycles_elapsed.max", "gpc__cycles_elapsed.max"),
    ),
    ("count", "sm_active_cycles", _names("SM Active Cycles", "sm__cycles_active.avg")),
    ("count", "sm_count", _names("# SMs", "device__attribute_multiprocessor_count")),
    ("freq_hz", "sm_frequency_hz", _names("SM Frequency", "sm__cycles_elapsed.avg.per_second")),
    (
        "freq_hz",
        "dram_frequency_hz",
        _names("DRAM Frequency", "dram__cycles_elapsed.avg.per_second"),
    ),
    ("bytes", "dram_read_bytes", _names("dram__bytes_read.sum")),
    ("bytes", "dram_write_bytes", _names("dram__bytes_write.sum")),
    ("bytes", "dram_bytes", _names("dram__bytes.sum")),
    (
        "byte_rate",
        "dram_bandwidth_bytes_per_s",
        _names("Memory Throughput", "DRAM Bandwidth", "dram__bytes.sum.per_second"),
    ),
    # Roofline section ("GPU Speed Of Light Roofline Chart"). "Operations" already count an FMA
    # as 2; the FADD/FMUL counts are instructions = FLOPs.
    ("count", "fp32_peak_ops_per_cycle", _names("Theoretical Predicated-On FFMA Operations")),
    ("count", "fp64_peak_ops_per_cycle", _names("Theoretical Predicated-On DFMA Operations")),
    ("count", "fp32_fma_ops_per_cycle", _names("Predicated-On FFMA Operations Per Cycle")),
    ("count", "fp64_fma_ops_per_cycle", _names("Predicated-On DFMA Operations Per Cycle")),
    (
        "per_cycle",
        "fp32_addmul_per_cycle_fadd",
        _names("Predicated-On FADD Thread Instructions Executed Per Cycle"),
    ),
    (
        "per_cycle",
        "fp32_addmul_per_cycle_fmul",
        _names("Predicated-On FMUL Thread Instructions Executed Per Cycle"),
    ),
    (
        "per_cycle",
        "fp64_addmul_per_cycle_dadd",
        _names("Predicated-On DADD Thread Instructions Executed Per Cycle"),
    ),
    (
        "per_cycle",
        "fp64_addmul_per_cycle_dmul",
        _names("Predicated-On DMUL Thread Instructions Executed Per Cycle"),
    ),
    ("per_cycle", "dram_peak_bytes_per_cycle", _names("Theoretical DRAM Bytes Accessible")),
]
for _dim, _column, _metric_names in _TABLE:
    for _name in _metric_names:
        METRIC_TARGETS[(_dim, _name)] = _column
# "Theoretical DRAM Bytes Accessible" is printed as byte/cycle -> bytes per cycle.
METRIC_TARGETS[("other", "Theoretical DRAM Bytes Accessible")] = "dram_peak_bytes_per_cycle"

# SASS FLOP counters (``--metrics smsp__sass_thread_inst_executed_op_*_pred_on.sum``):
# FLOPs = add + mul + 2 * fma, over half, single and double precision.
FLOP_WEIGHTS: dict[str, float] = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (2.0 if op == "fma" else 1.0)
    for p in ("h", "f", "d")
    for op in ("add", "mul", "fma")
}
TENSOR_OPS_PREFIX = "sm__ops_path_tensor_"
