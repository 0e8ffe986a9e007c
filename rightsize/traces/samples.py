"""Declared schemas of the sampled time series in a run directory, and their reader.

``rightsize run`` samples the GPUs (NVML) and the host (psutil) from its own process while the job
runs and writes them as Parquet under ``<run_dir>/samples/``. Other sources of the same facts
(``nvidia-smi --query-gpu`` CSV, DCGM scrapes) are converted into :data:`GPU_SAMPLES` too, so the
analyzers see one shape whatever recorded it.

Conventions (as in :mod:`rightsize.traces.schema`): ``t_ns`` is int64 epoch nanoseconds (the
clock Kineto traces use for ``ts``), units are in every column name, percentages are 0-100, and
a field a source could not read is null. Each column names its nvidia-smi ``--query-gpu`` field,
the NVML call it comes from and, where one exists, the DCGM field.

Files: ``samples/gpu.parquet``, ``samples/host.parquet`` and ``samples/gpu_processes.parquet``,
or, while a run is still going (or if it crashed), chunked parts ``samples/gpu.part0001.parquet``
and so on; :func:`read_samples` concatenates whatever is there, in time order.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from rightsize.errors import RunDirError

# One row per GPU per sampling tick.
GPU_SAMPLES: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(),  # epoch ns of the sample (nvidia-smi "timestamp")
    "source": pl.String(),  # "nvml" | "nvidia-smi" | "dcgm": what recorded this row
    "gpu_index": pl.Int32(),  # "index"; nvmlDeviceGetHandleByIndex; DCGM "gpu"
    "gpu_uuid": pl.String(),  # "uuid"; nvmlDeviceGetUUID
    # utilization.gpu: % of the last sample period in which any kernel ran
    # (nvmlDeviceGetUtilizationRates().gpu; DCGM_FI_DEV_GPU_UTIL). Not SM occupancy.
    "gpu_util_pct": pl.Float64(),
    # utilization.memory: % of the period the memory controller was busy
    # (nvmlDeviceGetUtilizationRates().memory; DCGM_FI_DEV_MEM_COPY_UTIL)
    "mem_util_pct": pl.Float64(),
    # memory.used; nvmlDeviceGetMemoryInfo().used; DCGM_FI_DEV_FB_USED (MiB)
    "mem_used_bytes": pl.Int64(),
    # memory.total; nvmlDeviceGetMemoryInfo().total; DCGM_FI_DEV_FB_TOTAL
    "mem_total_bytes": pl.Int64(),
    # nvidia-smi dmon -s t "txpci"/"rxpci"; nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_TX_BYTES)
    # in KB/s (x1024 here); a 20 ms window inside the driver. DCGM_FI_DEV_PCIE_TX_THROUGHPUT.
    "pcie_tx_bytes_per_s": pl.Float64(),
    "pcie_rx_bytes_per_s": pl.Float64(),  # as above, NVML_PCIE_UTIL_RX_BYTES
    "pcie_link_gen": pl.Int32(),  # pcie.link.gen.current; nvmlDeviceGetCurrPcieLinkGeneration
    "pcie_link_width": pl.Int32(),  # pcie.link.width.current; nvmlDeviceGetCurrPcieLinkWidth
    "pcie_link_gen_max": pl.Int32(),  # pcie.link.gen.max; nvmlDeviceGetMaxPcieLinkGeneration
    "pcie_link_width_max": pl.Int32(),  # pcie.link.width.max; nvmlDeviceGetMaxPcieLinkWidth
    # clocks.sm; nvmlDeviceGetClockInfo(NVML_CLOCK_SM); DCGM_FI_DEV_SM_CLOCK
    "sm_clock_mhz": pl.Int32(),
    # clocks.mem; nvmlDeviceGetClockInfo(NVML_CLOCK_MEM); DCGM_FI_DEV_MEM_CLOCK
    "mem_clock_mhz": pl.Int32(),
    # power.draw; nvmlDeviceGetPowerUsage (mW / 1000); DCGM_FI_DEV_POWER_USAGE
    "power_w": pl.Float64(),
    "power_limit_w": pl.Float64(),  # power.limit; nvmlDeviceGetEnforcedPowerLimit (mW / 1000)
    # temperature.gpu; nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)
    "temperature_c": pl.Float64(),
    # clocks_event_reasons.active (older: clocks_throttle_reasons.active): the NVML bitmask from
    # nvmlDeviceGetCurrentClocksEventReasons (0x4 = SW power cap, 0x20 = SW thermal, 0x40 = HW
    # thermal, 0x80 = HW power brake; see nvmlClocksEventReason*);
    # DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
    "clocks_event_reasons": pl.Int64(),
    # Memory the job's own processes hold on this GPU (sum of nvmlDeviceGetComputeRunningProcesses
    # usedGpuMemory over the job's pids; nvidia-smi --query-compute-apps=used_memory). Null when
    # the driver does not report per-process memory (containers without the host pid namespace).
    "job_mem_used_bytes": pl.Int64(),
    # GPM (GPU Performance Monitoring, Hopper and newer; nvidia-smi dmon --gpm-metrics ID):
    # nvmlGpmMetricsGet over two nvmlGpmSampleGet samples at least GPM_MIN_INTERVAL_NS apart
    # (NVML: "greater than 100ms due to the internal sample refresh rate"), so at ticks under
    # 100 ms apart some rows have none. Null where nvmlGpmQueryDeviceSupport says unsupported.
    # The values average the time from gpm_from_ns (the pair's first sample) to t_ns.
    "gpm_from_ns": pl.Int64(),
    # GPM 1 NVML_GPM_METRIC_GRAPHICS_UTIL; DCGM_FI_PROF_GR_ENGINE_ACTIVE x100
    "gpm_graphics_util_pct": pl.Float64(),
    "gpm_sm_util_pct": pl.Float64(),  # GPM 2 NVML_GPM_METRIC_SM_UTIL; DCGM_FI_PROF_SM_ACTIVE x100
    # GPM 3 NVML_GPM_METRIC_SM_OCCUPANCY; DCGM_FI_PROF_SM_OCCUPANCY x100
    "gpm_sm_occupancy_pct": pl.Float64(),
    # GPM 5 NVML_GPM_METRIC_ANY_TENSOR_UTIL; DCGM_FI_PROF_PIPE_TENSOR_ACTIVE x100
    "gpm_tensor_util_pct": pl.Float64(),
    # GPM 10 NVML_GPM_METRIC_DRAM_BW_UTIL; DCGM_FI_PROF_DRAM_ACTIVE x100
    "gpm_dram_bw_util_pct": pl.Float64(),
    # GPM 12 NVML_GPM_METRIC_FP32_UTIL; DCGM_FI_PROF_PIPE_FP32_ACTIVE x100
    "gpm_fp32_util_pct": pl.Float64(),
    # GPM 13 NVML_GPM_METRIC_FP16_UTIL; DCGM_FI_PROF_PIPE_FP16_ACTIVE x100
    "gpm_fp16_util_pct": pl.Float64(),
    # GPM 20/21 NVML_GPM_METRIC_PCIE_TX/RX_PER_SEC in MiB/s (x1048576 here);
    # DCGM_FI_PROF_PCIE_TX/RX_BYTES
    "gpm_pcie_tx_bytes_per_s": pl.Float64(),
    "gpm_pcie_rx_bytes_per_s": pl.Float64(),
}

# One row per (GPU, job process) per sampling tick: who holds the GPU memory.
GPU_PROCESS_SAMPLES: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(),
    "gpu_index": pl.Int32(),
    "pid": pl.Int64(),  # nvmlProcessInfo_t.pid; nvidia-smi --query-compute-apps=pid
    "gpu_mem_used_bytes": pl.Int64(),  # usedGpuMemory; --query-compute-apps=used_memory
}

# One row per host sampling tick (psutil), about the machine and the job's process tree
# (the launched command and all its descendants).
HOST_SAMPLES: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(),
    # whole machine, 0-100 (psutil.cpu_percent; top's %Cpu(s) us+sy+...)
    "cpu_util_pct": pl.Float64(),
    "cpu_core_util_pct": pl.List(pl.Float64()),  # per logical core, 0-100 (mpstat -P ALL)
    "cpu_count": pl.Int32(),  # logical cores (nproc)
    # CPU of the job's process tree, 100 = one core busy (top's %CPU summed over the tree)
    "job_cpu_util_pct": pl.Float64(),
    "job_rss_bytes": pl.Int64(),  # resident set size summed over the tree (ps -o rss)
    "job_processes": pl.Int32(),  # live processes in the tree
    "dataloader_workers": pl.Int32(),  # live torch DataLoader worker processes in the tree
    # bytes the tree read from storage since the previous tick / interval (/proc/PID/io read_bytes)
    "job_disk_read_bytes_per_s": pl.Float64(),
    "disk_read_bytes_per_s": pl.Float64(),  # whole machine (psutil.disk_io_counters; iostat rkB/s)
    "mem_used_bytes": pl.Int64(),  # host RAM in use (psutil.virtual_memory().used; free's "used")
    "mem_total_bytes": pl.Int64(),  # host RAM (free's "total")
}

SAMPLE_FILES: dict[str, dict[str, pl.DataType]] = {
    "gpu": GPU_SAMPLES,
    "host": HOST_SAMPLES,
    "gpu_processes": GPU_PROCESS_SAMPLES,
}

SAMPLES_DIR = "samples"


def empty_samples(kind: str) -> pl.DataFrame:
    """An empty frame with the declared columns of ``kind`` ("gpu", "host", "gpu_processes")."""
    return pl.DataFrame(schema=SAMPLE_FILES[kind])


def conform_samples(kind: str, df: pl.DataFrame) -> pl.DataFrame:
    """Select and cast ``df`` to the declared columns of ``kind``; absent columns become null."""
    cols = SAMPLE_FILES[kind]
    out = df.select(
        [(pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c) for c, t in cols.items()]
    )
    # NaN/Infinity (a log's "NaN", "+Inf") is a missing sample, never a number in the output.
    floats = [c for c, t in cols.items() if t.is_float()]
    return out.with_columns(
        [pl.when(pl.col(c).is_finite()).then(pl.col(c)).otherwise(None).alias(c) for c in floats]
    )


def sample_paths(run_dir: str | Path, kind: str) -> list[Path]:
    """The Parquet files holding ``kind`` samples: the final file, or the parts, sorted."""
    base = Path(run_dir) / SAMPLES_DIR
    whole = base / f"{kind}.parquet"
    if whole.exists():
        return [whole]
    return sorted(base.glob(f"{kind}.part*.parquet"))


def read_kind(run_dir: str | Path, kind: str) -> pl.DataFrame:
    """All ``kind`` samples of a run directory in time order; empty (declared columns) if none."""
    frames = []
    for path in sample_paths(run_dir, kind):
        try:
            frames.append(conform_samples(kind, pl.read_parquet(path)))
        except (OSError, pl.exceptions.PolarsError) as exc:
            problem = f"unreadable samples file ({exc.__class__.__name__})"
            raise RunDirError(f"{path}: {problem}") from exc
    if not frames:
        return empty_samples(kind)
    return pl.concat(frames, how="vertical").sort("t_ns", maintain_order=True)


def read_samples(run_dir: str | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(gpu_df, host_df)`` of a run directory, with the declared :data:`GPU_SAMPLES` and
    :data:`HOST_SAMPLES` columns. A run without GPU samples gives an empty ``gpu_df``; the
    manifest says why (``collectors.nvml``)."""
    return read_kind(run_dir, "gpu"), read_kind(run_dir, "host")


def read_gpu_processes(run_dir: str | Path) -> pl.DataFrame:
    """Per-process GPU memory samples (:data:`GPU_PROCESS_SAMPLES`) of a run directory."""
    return read_kind(run_dir, "gpu_processes")
