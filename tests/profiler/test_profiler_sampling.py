"""NVML and host sampling, against a fake NVML with nvidia-ml-py's real signatures and errors.

The fake (:class:`FakeNvml`) is a module-like object whose functions have exactly the parameter
lists of the installed ``pynvml`` (a test checks this), raising the real ``pynvml.NVMLError``
subclasses and filling the real ctypes structures for GPM.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from rightsize.profiler.host import HostSampler
from rightsize.profiler.nvml import NvmlSampler, visible_indices
from rightsize.profiler.sampler import Sampler
from rightsize.traces.samples import (
    GPU_PROCESS_SAMPLES,
    GPU_SAMPLES,
    HOST_SAMPLES,
    read_gpu_processes,
    read_samples,
)

H100 = {
    "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100", "total": 80 * 2**30, "used": 20 * 2**30,
    "util": (87, 41), "tx_kib": 1000, "rx_kib": 3000, "gen": (5, 5), "width": (16, 16),
    "clocks": {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}, "power_mw": 512_345,
    "limit_mw": 700_000, "temp": 61, "reasons": 0x4, "cc": (9, 0), "gpm": True,
    "procs": [(4242, 3 * 2**30), (999, 2**30), (4243, 2**30)],
}  # fmt: skip
T4 = dict(H100, name="Tesla T4", uuid="GPU-t4", cc=(7, 5), gpm=False, tx_kib=None, procs=[])
GPM_VALUES = {  # metric id -> value the fake reports
    pynvml.NVML_GPM_METRIC_SM_UTIL: 75.0,
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 33.0,
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 50.0,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 60.0,
    pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 2.0,  # MiB/s
}


class FakeNvml:
    """Two-GPU NVML. Constants, errors and structs are pynvml's own; calls are counted."""

    def __init__(self, gpus: list[dict[str, Any]], init_error: int | None = None) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError", "c_nvml", "struct_c_nvml")):
                setattr(self, name, getattr(pynvml, name))
        self.gpus, self.init_error, self.calls = gpus, init_error, {}
        self.gpm_taken: dict[int, int] = {}  # sample address -> times nvmlGpmSampleGet filled it
        self.freed = 0
        self.keep: list[Any] = []

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _gpu(self, handle: int) -> dict[str, Any]:
        return self.gpus[handle]

    def _value(self, handle: int, key: str, name: str) -> Any:
        self._count(name)
        value = self._gpu(handle)[key]
        if value is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    # -- the nvidia-ml-py functions the sampler uses, same parameter names ------------------
    def nvmlInit(self):
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self._count("nvmlShutdown")

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return self._gpu(handle)["uuid"]

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle)["name"]

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        g = self._gpu(handle)
        return SimpleNamespace(total=g["total"], used=g["used"], free=g["total"] - g["used"])

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=f"00000000:{handle + 1:02X}:00.0".encode())

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return self._gpu(handle)["cc"]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._gpu(handle)["limit_mw"]

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu, memory = self._gpu(handle)["util"]
        return SimpleNamespace(gpu=gpu, memory=memory)

    def nvmlDeviceGetPcieThroughput(self, device, counter):
        key = "tx_kib" if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else "rx_kib"
        return self._value(device, key, f"nvmlDeviceGetPcieThroughput.{key}")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return self._gpu(handle)["gen"][0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return self._gpu(handle)["gen"][1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return self._gpu(handle)["width"][0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return self._gpu(handle)["width"][1]

    def nvmlDeviceGetClockInfo(self, handle, type):
        return self._gpu(handle)["clocks"][type]

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle)["power_mw"]

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle)["temp"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._gpu(handle)["reasons"]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in self._gpu(handle)["procs"]]

    def nvmlGpmQueryDeviceSupport(self, device):
        support = pynvml.c_nvmlGpmSupport_t()
        support.isSupportedDevice = int(self._gpu(device)["gpm"])
        return support

    def nvmlGpmSampleAlloc(self):
        target = pynvml.struct_c_nvmlGpmSample_t()
        self.keep.append(target)
        return pynvml.c_nvmlGpmSample_t(target)

    def nvmlGpmSampleFree(self, gpmSample):
        self.freed += 1

    def nvmlGpmSampleGet(self, device, gpmSample):
        if not self._gpu(device)["gpm"]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        key = ctypes.addressof(gpmSample.contents)
        self.gpm_taken[key] = self.gpm_taken.get(key, 0) + 1
        return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet):
        assert metricsGet.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        first = ctypes.addressof(metricsGet.sample1.contents)
        second = ctypes.addressof(metricsGet.sample2.contents)
        if first == second or first not in self.gpm_taken or second not in self.gpm_taken:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for i in range(metricsGet.numMetrics):
            metric = metricsGet.metrics[i]
            if metric.metricId in GPM_VALUES:
                metric.value, metric.nvmlReturn = GPM_VALUES[metric.metricId], 0
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return metricsGet


def test_the_fake_has_nvidia_ml_py_signatures() -> None:
    names = [n for n in vars(FakeNvml) if n.startswith("nvml")]
    assert len(names) >= 25
    for name in names:
        fake = inspect.signature(getattr(FakeNvml([H100]), name))
        real = inspect.signature(getattr(pynvml, name))
        assert list(fake.parameters) == list(real.parameters), name
    err = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    assert isinstance(err, pynvml.NVMLError_NotSupported)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library not found (no NVIDIA driver"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "the NVIDIA driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission to use NVML"),
    ],
)
def test_nvml_unavailable_is_a_reason_not_an_error(code: int, reason: str) -> None:
    sampler = NvmlSampler(FakeNvml([H100], init_error=code))
    status = sampler.open()
    assert not status.available and status.gpus == ()
    assert status.reason is not None and status.reason.startswith(f"NVML unavailable: {reason}")
    sampler.close()


def test_real_nvml_without_a_driver() -> None:
    if Path("/dev/nvidia0").exists():
        pytest.skip("this machine has an NVIDIA device")
    status = NvmlSampler().open()
    assert not status.available
    assert status.reason is not None and "NVML" in status.reason


def test_inventory_and_samples_with_units() -> None:
    fake = FakeNvml([H100, T4])
    sampler = NvmlSampler(fake, env={})
    status = sampler.open()
    assert status.available and status.driver_version == "550.54.15"
    h100, t4 = status.gpus
    assert (h100.name, h100.compute_capability, h100.gpm_supported) == (H100["name"], "9.0", True)
    assert (h100.power_limit_w, h100.memory_total_bytes) == (700.0, 80 * 2**30)
    assert (t4.compute_capability, t4.gpm_supported) == ("7.5", False)
    assert h100.pci_bus_id == "00000000:01:00.0"

    first, procs = sampler.sample(1_000, job_pids={4242, 4243})
    second, _ = sampler.sample(1_000 + 100 * MS, job_pids={4242, 4243})
    row = first[0]
    assert set(row) <= set(GPU_SAMPLES)
    assert row["t_ns"] == 1_000 and row["source"] == "nvml" and row["gpu_uuid"] == "GPU-h100"
    assert (row["gpu_util_pct"], row["mem_util_pct"]) == (87.0, 41.0)
    assert row["pcie_tx_bytes_per_s"] == 1000 * 1024.0  # KB/s -> bytes/s
    assert row["pcie_rx_bytes_per_s"] == 3000 * 1024.0
    assert (row["sm_clock_mhz"], row["mem_clock_mhz"]) == (1980, 2619)
    assert (row["power_w"], row["power_limit_w"]) == (512.345, 700.0)  # mW -> W
    assert (row["temperature_c"], row["clocks_event_reasons"]) == (61.0, 0x4)
    assert (row["pcie_link_gen"], row["pcie_link_width"]) == (5, 16)
    assert row["job_mem_used_bytes"] == 4 * 2**30  # pid 999 is not the job's
    assert procs == [
        {"t_ns": 1_000, "gpu_index": 0, "pid": 4242, "gpu_mem_used_bytes": 3 * 2**30},
        {"t_ns": 1_000, "gpu_index": 0, "pid": 4243, "gpu_mem_used_bytes": 2**30},
    ]
    assert "gpm_sm_util_pct" not in row  # GPM needs two samples
    gpm = second[0]
    assert gpm["gpm_sm_util_pct"] == 75.0 and gpm["gpm_sm_occupancy_pct"] == 33.0
    assert gpm["gpm_tensor_util_pct"] == 50.0 and gpm["gpm_dram_bw_util_pct"] == 60.0
    assert gpm["gpm_pcie_tx_bytes_per_s"] == 2.0 * 2**20  # MiB/s -> bytes/s
    assert gpm["gpm_graphics_util_pct"] is None  # the fake says NOT_SUPPORTED for it
    assert gpm["gpm_from_ns"] == 1_000  # the pair's first sample
    t4_row = second[1]
    assert t4_row["pcie_tx_bytes_per_s"] is None and t4_row["job_mem_used_bytes"] == 0
    assert "gpm_sm_util_pct" not in t4_row
    assert fake.calls["nvmlDeviceGetPcieThroughput.tx_kib"] == 3  # T4: tried once, then skipped
    assert sampler.unsupported == {"gpu1.gpm": "GPM not supported by this GPU",
                                   "gpu1.pcie_tx": "Not Supported"}  # fmt: skip
    sampler.close()
    assert fake.freed == 2 and fake.calls["nvmlShutdown"] == 1


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(None, [0, 1, 2]), ("2,0", [2, 0]), ("", []), ("1,-1,0", [1]), ("GPU-abc", [0, 1, 2])],
)
def test_cuda_visible_devices(spec: str | None, expected: list[int]) -> None:
    env = {} if spec is None else {"CUDA_VISIBLE_DEVICES": spec}
    assert visible_indices(3, env) == expected


def test_no_visible_gpu_is_unavailable() -> None:
    status = NvmlSampler(FakeNvml([H100]), env={"CUDA_VISIBLE_DEVICES": ""}).open()
    assert (status.available, status.reason) == (False, "NVML sees no GPU visible to the job")


def test_sampler_writes_parts_then_one_file_per_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rightsize.profiler.nvml.GPM_MIN_INTERVAL_NS", 0)  # ticks 10 ms apart
    (tmp_path / "procs").mkdir()
    nvml = NvmlSampler(FakeNvml([dict(H100, procs=[(os.getpid(), 5 * 2**30)])]), env={})
    nvml.open()
    host = HostSampler(os.getpid(), tmp_path / "procs")
    (tmp_path / "procs" / f"{os.getpid()}.worker").touch()  # counted as a live worker
    sampler = Sampler(tmp_path, host, nvml, interval_s=0.01, warn=pytest.fail)
    sampler.tick()
    sampler.tick()
    sampler.flush()  # a crash here would leave the parts
    parts = sorted(p.name for p in (tmp_path / "samples").iterdir())
    assert parts == ["gpu.part0001.parquet", "gpu_processes.part0001.parquet",
                     "host.part0001.parquet"]  # fmt: skip
    gpu, host_df = read_samples(tmp_path)
    assert gpu.height == 2 and host_df.height == 2
    sampler.tick()
    result = sampler.stop()
    assert result.rows == {"gpu": 3, "host": 3, "gpu_processes": 3}
    assert sorted(result.files) == ["samples/gpu.parquet", "samples/gpu_processes.parquet",
                                    "samples/host.parquet"]  # fmt: skip
    gpu, host_df = read_samples(tmp_path)
    assert gpu.schema == GPU_SAMPLES and host_df.schema == HOST_SAMPLES
    assert gpu["t_ns"].is_sorted() and gpu.height == 3
    assert gpu["gpm_sm_util_pct"].to_list() == [None, 75.0, 75.0]
    assert host_df["dataloader_workers"].to_list() == [1, 1, 1]
    assert host_df["job_processes"].min() >= 1 and host_df["job_rss_bytes"].min() > 0
    assert gpu["job_mem_used_bytes"].to_list() == [5 * 2**30] * 3
    procs = read_gpu_processes(tmp_path)
    assert procs.schema == GPU_PROCESS_SAMPLES and procs["pid"].to_list() == [os.getpid()] * 3


def test_a_failing_collector_is_dropped_and_recorded(tmp_path: Path) -> None:
    class Broken(NvmlSampler):
        def sample(self, t_ns: int, job_pids: set[int]) -> tuple[list[dict], list[dict]]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    warnings: list[str] = []
    sampler = Sampler(tmp_path, HostSampler(os.getpid()), Broken(), warn=warnings.append)
    sampler.start()
    deadline = time.monotonic() + 10  # at least two ticks, however slow the machine
    while sampler._ticks < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    result = sampler.stop()
    assert result.errors == {"nvml": "NVMLError_GpuIsLost: GPU is lost"}
    assert warnings == ["nvml sampling stopped: NVMLError_GpuIsLost: GPU is lost"]
    assert result.rows["host"] >= 2 and result.files == ("samples/host.parquet",)


MS = 1_000_000


def _gpm_rows(sampler: NvmlSampler, ticks_ms: list[int]) -> list[dict]:
    return [sampler.sample(t * MS, job_pids=set())[0][0] for t in ticks_ms]


def test_gpm_pairs_are_at_least_90_ms_apart() -> None:
    # An H100 sampled every 50 ms gave zeros (NaN for DRAM bandwidth) on every other tick:
    # GPM counters refresh about every 100 ms (NVML: pairs "greater than 100ms" apart).
    sampler = NvmlSampler(FakeNvml([H100]), env={})
    sampler.open()
    rows = _gpm_rows(sampler, [0, 50, 100, 150, 200, 289, 380])
    assert [r.get("gpm_sm_util_pct") for r in rows] == [None, None, 75.0, None, 75.0, None, 75.0]
    assert [r.get("gpm_from_ns") for r in rows] == [None, None, 0, None, 100 * MS, None,
                                                    200 * MS]  # fmt: skip
    sampler.close()


def test_a_gpm_pair_with_a_nan_metric_is_no_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    # What an H100 (driver 580.159) answered when the counters had not refreshed: NVML_SUCCESS,
    # DRAM_BW_UTIL NaN and the other metrics 0. The pair is dropped, not averaged in as idle.
    monkeypatch.setitem(GPM_VALUES, pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL, float("nan"))
    sampler = NvmlSampler(FakeNvml([H100]), env={})
    sampler.open()
    rows = _gpm_rows(sampler, [0, 100, 200])
    assert not any(k.startswith("gpm_") for r in rows for k in r)
    monkeypatch.setitem(GPM_VALUES, pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL, 60.0)
    (row,) = _gpm_rows(sampler, [300])
    assert (row["gpm_dram_bw_util_pct"], row["gpm_from_ns"]) == (60.0, 200 * MS)
    sampler.close()


@pytest.mark.gpu
def test_real_gpu_is_sampled() -> None:
    sampler = NvmlSampler()
    status = sampler.open()
    assert status.available and status.gpus
    rows, _ = sampler.sample(time.time_ns(), job_pids={os.getpid()})
    assert rows[0]["mem_total_bytes"] > 0 and rows[0]["gpu_util_pct"] is not None
    sampler.close()
