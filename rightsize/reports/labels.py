"""What users read instead of internal identifiers: labels for thresholds, signals, counters.

Every key the analyzers emit that a report shows has a label here; a key added later still
shows as words (:func:`humanize`), never as ``snake_case_us``.
"""

from __future__ import annotations

THRESHOLDS = {
    "work_bound_pct": "Work bounds the step from (% of the step busy)",
    "dataloader_pct": "Data-loader wait worth fixing above (% of the step, TensorBoard plugin)",
    "communication_pct": "Exposed communication worth fixing above (% of the step, "
    "TensorBoard plugin)",
    "gpu_util_pct": "Low GPU utilization below (%, TensorBoard plugin)",
    "disagreement_pct": "NVML vs trace utilization gap worth reporting (points)",
    "tiny_op_us": "CPU-only: ops shorter than this are dispatch overhead (µs)",
    "cpu_ridge_flops_per_byte": "CPU-only: assumed ridge point (FLOP per byte)",
    "min_recorded_pct": "Inconclusive when less of the step is recorded (%)",
    "startup_pct": "Inconclusive when start-up work (init, compile, autotune) fills (% of the "
    "step)",
    "min_kernels": "Inconclusive with fewer kernels in the steps than",
    "signals_disagree_pct": "Inconclusive when NVML and the trace disagree on busy time by "
    "(points)",
    "min_nvml_samples": "NVML samples needed in the steps to contradict the trace",
}
SIGNALS = {
    "ncu": "Nsight Compute speed-of-light",
    "counters": "GPU hardware counters (GPM/DCGM)",
    "roofline": "op-level roofline from recorded shapes",
    "name": "kernel-name taxonomy",
    "default": "no rule matched (counted as memory-bound)",
}
_UNITS = {"pct": "%", "us": "µs", "ms": "ms", "ns": "ns", "bytes": "bytes", "s": "s",
          "gbps": "GB/s", "w": "W"}


_WORDS = {"gpu": "GPU", "cpu": "CPU", "sm": "SM", "hta": "HTA", "nvml": "NVML", "pct": "%",
          "usd": "USD", "hbm": "HBM", "pcie": "PCIe", "tflops": "TFLOPS"}


def humanize(key: str) -> str:
    """``tiny_op_us`` -> ``Tiny op (µs)``: a readable fallback for keys without a label."""
    words = key.split("_")
    unit = _UNITS.get(words[-1]) if len(words) > 1 else None
    if unit:
        words = words[:-1]
    words = [_WORDS.get(w, w) for w in words]
    text = " ".join(words)
    text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text


def threshold(key: str) -> str:
    return THRESHOLDS.get(key) or humanize(key)


def signal(key: str) -> str:
    return SIGNALS.get(key) or humanize(key)
