"""NVML sampling of the GPUs a job can see, through nvidia-ml-py (``import pynvml``).

Runs in the ``rightsize run`` parent process. :meth:`NvmlSampler.open` never raises: a machine
without the NVIDIA driver (``NVML_ERROR_LIBRARY_NOT_FOUND``), without nvidia-ml-py, or without
permission is a normal condition, reported as :class:`NvmlStatus` with the reason. Each sample
gives rows in the :data:`rightsize.traces.samples.GPU_SAMPLES` columns (that module names every
field's nvidia-smi equivalent and unit) and per-process rows in ``GPU_PROCESS_SAMPLES``.

A field the GPU does not support (``NVMLError_NotSupported``) is null, tried once, and listed in
:attr:`NvmlSampler.unsupported` for the manifest. GPM metrics (Hopper and newer) are read as the
difference of two ``nvmlGpmSampleGet`` samples one tick apart; where
``nvmlGpmQueryDeviceSupport`` says no, they stay null.

The ``nvml`` module is injected so tests drive this with a fake that has nvidia-ml-py's real
signatures and error types.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, cast

KIB_BYTES = 1024  # nvmlDeviceGetPcieThroughput reports KB/s
# NVML's GPM documentation: the two nvmlGpmSampleGet calls of a pair "should be greater than
# 100ms" apart "due to the internal sample refresh rate". On an H100 (driver 580.159), pairs of
# nominally 100 ms ticks gave values on 121 of 122 ticks; pairs 50 ms apart gave zeros (and NaN
# for DRAM_BW_UTIL) on every other tick. A pair is taken at 90 ms or more, so that 100 ms ticks
# a little early still pair; faster ticks leave GPM null until 90 ms have passed.
GPM_MIN_INTERVAL_NS = 90_000_000
MIB_BYTES = 1024 * 1024  # GPM PCIe metrics are MiB/s

# GPM metric id (nvidia-smi dmon --gpm-metrics) -> (GPU_SAMPLES column, scale to its unit)
GPM_METRICS: dict[str, tuple[str, float]] = {
    "NVML_GPM_METRIC_GRAPHICS_UTIL": ("gpm_graphics_util_pct", 1.0),
    "NVML_GPM_METRIC_SM_UTIL": ("gpm_sm_util_pct", 1.0),
    "NVML_GPM_METRIC_SM_OCCUPANCY": ("gpm_sm_occupancy_pct", 1.0),
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": ("gpm_tensor_util_pct", 1.0),
    "NVML_GPM_METRIC_DRAM_BW_UTIL": ("gpm_dram_bw_util_pct", 1.0),
    "NVML_GPM_METRIC_FP32_UTIL": ("gpm_fp32_util_pct", 1.0),
    "NVML_GPM_METRIC_FP16_UTIL": ("gpm_fp16_util_pct", 1.0),
    "NVML_GPM_METRIC_PCIE_TX_PER_SEC": ("gpm_pcie_tx_bytes_per_s", float(MIB_BYTES)),
    "NVML_GPM_METRIC_PCIE_RX_PER_SEC": ("gpm_pcie_rx_bytes_per_s", float(MIB_BYTES)),
}

_WHY = {  # NVML_ERROR_* name -> what the user should read
    "NVML_ERROR_LIBRARY_NOT_FOUND": "NVML library not found (no NVIDIA driver on this machine)",
    "NVML_ERROR_DRIVER_NOT_LOADED": "the NVIDIA driver is not loaded",
    "NVML_ERROR_NO_PERMISSION": "no permission to use NVML",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "NVML and the kernel driver versions differ",
}


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Static facts about one GPU (nvidia-smi --query-gpu names in comments)."""

    index: int  # index
    uuid: str  # uuid
    name: str  # name
    memory_total_bytes: int | None  # memory.total
    pci_bus_id: str | None  # pci.bus_id
    compute_capability: str | None  # compute_cap
    power_limit_w: float | None  # power.limit
    pcie_link_gen_max: int | None  # pcie.link.gen.max
    pcie_link_width_max: int | None  # pcie.link.width.max
    gpm_supported: bool  # nvmlGpmQueryDeviceSupport().isSupportedDevice


@dataclass(frozen=True, slots=True)
class NvmlStatus:
    """Whether NVML could be used, and what it found."""

    available: bool
    reason: str | None = None  # why not, in one line
    driver_version: str | None = None  # driver_version
    cuda_driver_version: int | None = None  # nvmlSystemGetCudaDriverVersion, e.g. 12040
    gpus: tuple[GpuInfo, ...] = field(default_factory=tuple)


def visible_indices(count: int, env: dict[str, str] | None = None) -> list[int]:
    """NVML indices the job may use: all, or those CUDA_VISIBLE_DEVICES names by index.

    UUID entries cannot be mapped before NVML is open; they keep all GPUs (the per-process
    memory still says which ones the job used).
    """
    spec = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return list(range(count))
    wanted: list[int] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if not item.lstrip("-").isdigit():
            return list(range(count))
        if int(item) < 0:
            break  # CUDA stops at the first invalid index
        wanted.append(int(item))
    return [i for i in wanted if i < count]


class NvmlSampler:
    """Open NVML once, then :meth:`sample` at each tick, then :meth:`close`."""

    def __init__(self, nvml: ModuleType | None = None, env: dict[str, str] | None = None) -> None:
        self._nvml = nvml
        self._env = env
        self._handles: list[tuple[int, str, Any]] = []  # (index, uuid, handle)
        self._gpm: dict[int, list[Any]] = {}  # index -> [previous sample, current sample]
        self._gpm_taken_ns: dict[int, int] = {}  # index -> when its previous sample was taken
        self._skip: set[tuple[int, str]] = set()
        self._initialized = False
        self.unsupported: dict[str, str] = {}  # "gpu0.power_w" -> why it is null
        self.status = NvmlStatus(available=False, reason="not opened")

    # -- opening ----------------------------------------------------------------------------
    def open(self) -> NvmlStatus:
        """Initialise NVML and take the GPU inventory; never raises."""
        try:
            nvml = self._nvml or importlib.import_module("pynvml")
        except ImportError:
            self.status = NvmlStatus(
                False, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            )
            return self.status
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            self.status = NvmlStatus(False, f"NVML unavailable: {self._why(exc)}")
            return self.status
        self._initialized = True
        try:
            self.status = self._inventory(nvml)
        except nvml.NVMLError as exc:
            self.close()
            self.status = NvmlStatus(False, f"NVML inventory failed: {self._why(exc)}")
        return self.status

    def _why(self, exc: Exception) -> str:
        nvml = self._nvml
        for name, text in _WHY.items():
            if getattr(exc, "value", None) == getattr(nvml, name, object()):
                return text
        return str(exc)

    def _inventory(self, nvml: ModuleType) -> NvmlStatus:
        count = nvml.nvmlDeviceGetCount()
        gpus = []
        for index in visible_indices(count, self._env):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            self._handles.append((index, uuid, handle))
            gpus.append(self._describe(nvml, index, uuid, handle))
        if not gpus:
            return NvmlStatus(False, "NVML sees no GPU visible to the job", gpus=())
        return NvmlStatus(
            available=True,
            driver_version=self._opt(nvml.nvmlSystemGetDriverVersion, key=(-1, "driver")),
            cuda_driver_version=self._opt(nvml.nvmlSystemGetCudaDriverVersion, key=(-1, "cuda")),
            gpus=tuple(gpus),
        )

    def _describe(self, nvml: ModuleType, index: int, uuid: str, handle: Any) -> GpuInfo:
        mem = self._opt(nvml.nvmlDeviceGetMemoryInfo, handle, key=(index, "memory_total"))
        pci = self._opt(nvml.nvmlDeviceGetPciInfo, handle, key=(index, "pci"))
        cc = self._opt(nvml.nvmlDeviceGetCudaComputeCapability, handle, key=(index, "cc"))
        limit_mw = self._opt(nvml.nvmlDeviceGetEnforcedPowerLimit, handle, key=(index, "limit"))
        gpm = self._opt(nvml.nvmlGpmQueryDeviceSupport, handle, key=(index, "gpm"))
        gpm_ok = bool(gpm is not None and gpm.isSupportedDevice)
        if gpm_ok:
            self._gpm[index] = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        else:
            self.unsupported.setdefault(f"gpu{index}.gpm", "GPM not supported by this GPU")
        return GpuInfo(
            index=index,
            uuid=uuid,
            name=_text(nvml.nvmlDeviceGetName(handle)),
            memory_total_bytes=None if mem is None else int(mem.total),
            pci_bus_id=None if pci is None else _text(pci.busId),
            compute_capability=None if cc is None else f"{cc[0]}.{cc[1]}",
            power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
            pcie_link_gen_max=self._opt(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            pcie_link_width_max=self._opt(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
            gpm_supported=gpm_ok,
        )

    def _opt(self, fn: Any, *args: Any, key: tuple[int, str] | None = None) -> Any:
        """``fn(*args)``, or None when NVML says the field is not there; remembers why."""
        nvml = cast(ModuleType, self._nvml)  # set by open()
        if key is not None and key in self._skip:
            return None
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            if key is not None:
                self._skip.add(key)
                self.unsupported.setdefault(f"gpu{key[0]}.{key[1]}", self._why(exc))
            return None

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, t_ns: int, job_pids: set[int]) -> tuple[list[dict], list[dict]]:
        """One tick: GPU rows and per-process rows for the job's processes."""
        gpu_rows: list[dict] = []
        proc_rows: list[dict] = []
        for index, uuid, handle in self._handles:
            row = self._sample_gpu(index, uuid, handle, t_ns)
            procs = self._job_processes(index, handle, job_pids)
            if procs is not None:
                row["job_mem_used_bytes"] = sum(b for _, b in procs if b is not None)
                proc_rows += [
                    {"t_ns": t_ns, "gpu_index": index, "pid": pid, "gpu_mem_used_bytes": b}
                    for pid, b in procs
                ]
            row.update(self._sample_gpm(index, handle, t_ns))
            gpu_rows.append(row)
        return gpu_rows, proc_rows

    def _sample_gpu(self, index: int, uuid: str, handle: Any, t_ns: int) -> dict:
        nvml = cast(ModuleType, self._nvml)  # set by open()

        def get(name: str, fn: Any, *args: Any) -> Any:
            return self._opt(fn, handle, *args, key=(index, name))

        util = get("utilization", nvml.nvmlDeviceGetUtilizationRates)
        mem = get("memory", nvml.nvmlDeviceGetMemoryInfo)
        tx_kib = get("pcie_tx", nvml.nvmlDeviceGetPcieThroughput, nvml.NVML_PCIE_UTIL_TX_BYTES)
        rx_kib = get("pcie_rx", nvml.nvmlDeviceGetPcieThroughput, nvml.NVML_PCIE_UTIL_RX_BYTES)
        power_mw = get("power", nvml.nvmlDeviceGetPowerUsage)
        limit_mw = get("power_limit", nvml.nvmlDeviceGetEnforcedPowerLimit)
        # clocks "event" reasons since driver 535; older nvidia-ml-py only has "throttle" reasons
        reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        reasons_fn = reasons_fn or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        temp = get("temperature", nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)
        return {
            "t_ns": t_ns,
            "source": "nvml",
            "gpu_index": index,
            "gpu_uuid": uuid,
            "gpu_util_pct": None if util is None else float(util.gpu),
            "mem_util_pct": None if util is None else float(util.memory),
            "mem_used_bytes": None if mem is None else int(mem.used),
            "mem_total_bytes": None if mem is None else int(mem.total),
            "pcie_tx_bytes_per_s": None if tx_kib is None else tx_kib * float(KIB_BYTES),
            "pcie_rx_bytes_per_s": None if rx_kib is None else rx_kib * float(KIB_BYTES),
            "pcie_link_gen": get("pcie_gen", nvml.nvmlDeviceGetCurrPcieLinkGeneration),
            "pcie_link_width": get("pcie_width", nvml.nvmlDeviceGetCurrPcieLinkWidth),
            "pcie_link_gen_max": get("pcie_gen_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration),
            "pcie_link_width_max": get("pcie_width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth),
            "sm_clock_mhz": get("sm_clock", nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": get("mem_clock", nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_MEM),
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
            "temperature_c": None if temp is None else float(temp),
            "clocks_event_reasons": get("clocks_event_reasons", reasons_fn),
            "job_mem_used_bytes": None,
        }

    def _job_processes(
        self, index: int, handle: Any, job_pids: set[int]
    ) -> list[tuple[int, int | None]] | None:
        nvml = cast(ModuleType, self._nvml)  # set by open()
        procs = self._opt(nvml.nvmlDeviceGetComputeRunningProcesses, handle, key=(index, "procs"))
        if procs is None:
            return None
        return [(int(p.pid), p.usedGpuMemory) for p in procs if int(p.pid) in job_pids]

    def _sample_gpm(self, index: int, handle: Any, t_ns: int) -> dict:
        samples = self._gpm.get(index)
        if samples is None or (index, "gpm_sample") in self._skip:
            return {}
        since_ns = self._gpm_taken_ns.get(index)
        if since_ns is not None and t_ns - since_ns < GPM_MIN_INTERVAL_NS:
            return {}  # too soon: the counters may not have refreshed since the last sample
        nvml = cast(ModuleType, self._nvml)  # set by open()
        previous, current = samples
        if self._opt(nvml.nvmlGpmSampleGet, handle, current, key=(index, "gpm_sample")) is None:
            return {}
        samples.reverse()  # this sample is the next pair's "previous"
        self._gpm_taken_ns[index] = t_ns
        if since_ns is None:
            return {}  # the first sample: a pair needs two
        ids = [(getattr(nvml, name), col, scale) for name, (col, scale) in GPM_METRICS.items()]
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        request.sample1 = previous
        request.sample2 = current
        for i, (metric_id, _, _) in enumerate(ids):
            request.metrics[i].metricId = metric_id
        if self._opt(nvml.nvmlGpmMetricsGet, request, key=(index, "gpm_metrics")) is None:
            return {}
        out: dict[str, Any] = {}
        for i, (_, col, scale) in enumerate(ids):
            metric = request.metrics[i]
            ok = metric.nvmlReturn == nvml.NVML_SUCCESS
            out[col] = float(metric.value) * scale if ok else None
        if any(v is not None and not math.isfinite(v) for v in out.values()):
            # NVML_SUCCESS with NaN (seen for DRAM_BW_UTIL on an H100): the counters had not
            # refreshed between the two samples, and the other metrics of the pair read 0.
            return {}
        out["gpm_from_ns"] = since_ns
        return out

    def close(self) -> None:
        """Free GPM samples and shut NVML down (errors here are recorded, not raised)."""
        nvml = self._nvml
        if nvml is None:
            return
        for samples in self._gpm.values():
            for sample in samples:
                self._opt(nvml.nvmlGpmSampleFree, sample, key=(-1, "gpm_free"))
        self._gpm.clear()
        if self._initialized:
            self._initialized = False
            self._opt(nvml.nvmlShutdown, key=(-1, "shutdown"))
        self._handles.clear()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
