"""What users read instead of internal identifiers: labels for thresholds, signals, counters.

Every key the analyzers emit that a report shows has a label: thresholds in the threshold
table's metadata (``rightsize.analyzers.thresholds``), the rest here; a key added later still
shows as words (:func:`humanize`), never as ``snake_case_us``.
"""

from __future__ import annotations

from rightsize.analyzers.thresholds import DiagnosisThresholds, label

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
    """A diagnosis threshold's label, from the threshold table's metadata."""
    return label(DiagnosisThresholds, key) or humanize(key)


def signal(key: str) -> str:
    return SIGNALS.get(key) or humanize(key)
