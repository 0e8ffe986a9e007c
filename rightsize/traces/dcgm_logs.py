"""DCGM metric logs -> GPU_SAMPLES: dcgm-exporter Prometheus scrapes and ``dcgmi dmon`` text.

Role: parse the two DCGM text outputs into rows of :data:`rightsize.traces.samples.GPU_SAMPLES`,
converting units once: ``DCGM_FI_PROF_*`` ratios 0..1 -> percent, framebuffer MiB -> bytes,
PCIe KB/s (``DCGM_FI_DEV_PCIE_*_THROUGHPUT``) -> bytes/s, watts and MHz as they are.

Inputs: the file's text plus the clock the caller knows. A Prometheus sample line may carry its
own timestamp (ms since the epoch, ``NAME{labels} VALUE TS``); a plain scrape has none, so its
rows get ``scrape_time_ns`` (null when not given). ``dcgmi dmon`` prints no time at all: row
``k`` of an entity gets ``start_ns + k * interval_ms`` when both are given, else null.
Outputs: conformed GPU_SAMPLES frames with ``source == "dcgm"``.
"""

from __future__ import annotations

import math
import re

import polars as pl

from rightsize.traces.samples import conform_samples, empty_samples

MIB = 1024 * 1024
# DCGM field name -> (GPU_SAMPLES column, factor to its unit).
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", MIB),
    "DCGM_FI_DEV_FB_TOTAL": ("mem_total_bytes", MIB),
    "DCGM_FI_DEV_FB_FREE": ("mem_free_bytes", MIB),  # only to derive a missing total
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("clocks_event_reasons", 1.0),
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": ("pcie_tx_bytes_per_s", 1024.0),  # KB/s
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": ("pcie_rx_bytes_per_s", 1024.0),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_link_gen", 1.0),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_link_width", 1.0),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gpm_graphics_util_pct", 100.0),  # ratio 0..1
    "DCGM_FI_PROF_SM_ACTIVE": ("gpm_sm_util_pct", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("gpm_sm_occupancy_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gpm_tensor_util_pct", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gpm_dram_bw_util_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("gpm_fp32_util_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("gpm_fp16_util_pct", 100.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gpm_pcie_tx_bytes_per_s", 1.0),  # bytes/s
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gpm_pcie_rx_bytes_per_s", 1.0),
}
# dcgm-exporter before 2020 used lower-case names.
_LEGACY = {
    "dcgm_gpu_utilization": "DCGM_FI_DEV_GPU_UTIL",
    "dcgm_mem_copy_utilization": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "dcgm_fb_used": "DCGM_FI_DEV_FB_USED",
    "dcgm_fb_free": "DCGM_FI_DEV_FB_FREE",
    "dcgm_sm_clock": "DCGM_FI_DEV_SM_CLOCK",
    "dcgm_memory_clock": "DCGM_FI_DEV_MEM_CLOCK",
    "dcgm_power_usage": "DCGM_FI_DEV_POWER_USAGE",
    "dcgm_gpu_temp": "DCGM_FI_DEV_GPU_TEMP",
    "dcgm_pcie_tx_throughput": "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "dcgm_pcie_rx_throughput": "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
}
# dcgmi dmon column short names -> DCGM field names (dcgmi dmon -l lists them).
DMON_FIELDS = {
    "GPUTL": "DCGM_FI_DEV_GPU_UTIL",
    "MCUTL": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "FBUSD": "DCGM_FI_DEV_FB_USED",
    "FBTTL": "DCGM_FI_DEV_FB_TOTAL",
    "FBFRE": "DCGM_FI_DEV_FB_FREE",
    "SMCLK": "DCGM_FI_DEV_SM_CLOCK",
    "MMCLK": "DCGM_FI_DEV_MEM_CLOCK",
    "POWER": "DCGM_FI_DEV_POWER_USAGE",
    "TMPTR": "DCGM_FI_DEV_GPU_TEMP",
    "GRACT": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "SMACT": "DCGM_FI_PROF_SM_ACTIVE",
    "SMOCC": "DCGM_FI_PROF_SM_OCCUPANCY",
    "TENSO": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DRAMA": "DCGM_FI_PROF_DRAM_ACTIVE",
    "FP32A": "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "FP16A": "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "PCITX": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "PCIRX": "DCGM_FI_PROF_PCIE_RX_BYTES",
}

# Linear-time patterns (issue 12): no nested quantifier stores state per character (the old
# ``(?:[^"\\]|\\.)*`` cost ~170 bytes per character of a label), and a sample line is split
# by hand rather than by a backtracking ``.*``.
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
# a name starts after a non-name character and is read whole (possessive): a long word with
# no '="' after it is scanned once, not from each of its letters
_LABEL = re.compile(r'(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*+)="([^"\\]*+(?:\\.[^"\\]*+)*+)"')
_ENTITY = re.compile(r"^(GPU(?:-I|-CI)?)\s+([0-9]{1,9})\s+(.*)$")
_TS = re.compile(r"-?[0-9]{1,15}")  # ms since the epoch: int64 ns after scaling
_LONG = ["t", "gpu_index", "gpu_uuid", "instance", "field", "number"]
# One row per (time, GPU, field) before the pivot into GPU_SAMPLES columns.
_LONG_SCHEMA = {"t": pl.Int64(), "gpu_index": pl.Int32(), "gpu_uuid": pl.String(),
                "instance": pl.Int64(), "field": pl.String(), "number": pl.Float64()}


def _wide(long: pl.DataFrame) -> pl.DataFrame:
    """Long rows -> one GPU_SAMPLES row per (t, GPU, instance).

    ``instance`` keeps apart series that share a time and GPU: a MIG instance (GPU_I_ID) in a
    scrape, or the tick number of an untimed dmon row. It is not an output column.
    """
    if long.is_empty():
        return empty_samples("gpu")
    columns = {f: c for f, (c, _) in DCGM_FIELDS.items()}
    factors = {f: k for f, (_, k) in DCGM_FIELDS.items()}
    long = long.filter(pl.col("field").is_in(list(columns))).with_columns(
        column=pl.col("field").replace_strict(columns, return_dtype=pl.String()),
        number=pl.col("number") * pl.col("field").replace_strict(factors, return_dtype=pl.Float64),
    )
    if long.is_empty():
        return empty_samples("gpu")
    keys = ["t", "gpu_index", "gpu_uuid", "instance"]
    wide = long.pivot(on="column", index=keys, values="number", aggregate_function="first")
    if {"mem_used_bytes", "mem_free_bytes"} <= set(wide.columns):  # total = used + free
        derived = pl.col("mem_used_bytes") + pl.col("mem_free_bytes")
        total = pl.col("mem_total_bytes") if "mem_total_bytes" in wide.columns else None
        wide = wide.with_columns(
            mem_total_bytes=pl.coalesce(total, derived) if total is not None else derived
        )
    wide = wide.with_columns(t_ns=pl.col("t"), source=pl.lit("dcgm"))
    return conform_samples("gpu", wide.sort("t_ns", "gpu_index", "instance", nulls_last=True))


def _int(text: str | None) -> int | None:
    """A small non-negative index (ASCII digits only: ``int("²")`` fails), else None."""
    return int(text) if text and text.isascii() and text.isdigit() and len(text) <= 9 else None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:  # "N/A" or a garbled value: a missing sample
        return None
    return value if math.isfinite(value) else None  # NaN/Inf: missing too


def _split_sample(line: str) -> tuple[str, str, str, str | None] | None:
    """``NAME{labels} VALUE [TS]`` -> (name, labels, value, ts), in linear time."""
    name = _NAME.match(line)
    if name is None:
        return None
    rest = line[name.end():]
    labels = ""
    if rest.startswith("{"):
        close = rest.rfind("}")
        if close < 0:
            return None
        labels, rest = rest[1:close], rest[close + 1:]
    elif rest[:1] not in (" ", "\t"):
        return None
    parts = rest.split()
    if len(parts) == 1:
        return name.group(), labels, parts[0], None
    if len(parts) == 2 and _TS.fullmatch(parts[1]):
        return name.group(), labels, parts[0], parts[1]
    return None


def read_prometheus(text: str, scrape_time_ns: int | None) -> pl.DataFrame:
    """A dcgm-exporter scrape (or several concatenated) -> GPU_SAMPLES."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        sample = _split_sample(line.strip())
        if sample is None:
            continue
        raw_name, raw_labels, value, raw_ts = sample
        name = _LEGACY.get(raw_name, raw_name)
        if name not in DCGM_FIELDS:
            continue
        labels = dict(_LABEL.findall(raw_labels))
        gpu = _int(labels.get("gpu", labels.get("minor_number")))
        if gpu is None:  # a sample that names no GPU cannot be attributed to one
            continue
        ts = int(raw_ts) * 1_000_000 if raw_ts else scrape_time_ns
        rows.append(
            (
                ts,
                gpu,
                labels.get("UUID", labels.get("uuid")),
                _int(labels.get("GPU_I_ID")),
                name,
                _number(value),
            )
        )
    long = pl.DataFrame(rows, schema=_LONG_SCHEMA, orient="row")
    return _wide(long)


def read_dmon(text: str, start_ns: int | None, interval_ms: float | None) -> pl.DataFrame:
    """``dcgmi dmon`` output -> GPU_SAMPLES. ``GPU-I``/``GPU-CI`` (MIG) rows are skipped."""
    fields: list[str] = []
    ticks: dict[str, int] = {}
    rows = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):  # the header, printed again every screenful
            fields = [DMON_FIELDS.get(w, w) for w in stripped.lstrip("#").split()[1:]]
            continue
        match = _ENTITY.match(stripped)
        if not match or match[1] != "GPU":
            continue  # "ID" unit line, blank lines, MIG instances
        entity = f"{match[1]} {match[2]}"
        tick = ticks.get(entity, 0)
        ticks[entity] = tick + 1
        t = None
        if start_ns is not None and interval_ms is not None:
            t = start_ns + round(tick * interval_ms * 1e6)
        for field, value in zip(fields, match[3].split(), strict=False):
            rows.append((t, int(match[2]), None, None, field, _number(value)))
    long = pl.DataFrame(rows, schema=_LONG_SCHEMA, orient="row")
    if start_ns is None or interval_ms is None:
        # Without times, rows would merge in the pivot: the per-GPU tick keeps them apart.
        long = long.with_columns(instance=pl.int_range(pl.len()).over("gpu_index", "field"))
    return _wide(long)
