"""One device numbering for kernels and the allocator's [memory] events (traces/devices.py), and
the peak of every device type PyTorch writes (metrics.kernels.memory_peaks)."""

from __future__ import annotations

import pytest

from rightsize.analyzers.analysis import Context, analyze_trace
from rightsize.analyzers.metrics.kernels import memory_peaks
from rightsize.catalog import load_catalog
from rightsize.traces.devices import DeviceType
from rightsize.traces.kineto import read_kineto
from tests.conftest import shared_path
from tests.tracebuilder import TraceBuilder

MI300X = {"id": 0, "name": "AMD Instinct MI300X VF", "totalGlobalMem": 205571227648,
          "computeMajor": 9, "computeMinor": 4, "numSms": 304, "warpSize": 64}


def _rocm_trace(tmp_path, memory_device: int = 0, kernel_devices=(2,), device_type: int = 6):
    """As ROCm writes it: deviceProperties and [memory] number the GPU 0 (its ordinal), the
    kernels 2 (the HSA agent index after two CPU agents)."""
    b = TraceBuilder(devices=[MI300X])
    b.step(1, 0, 100)
    for i, dev in enumerate(kernel_devices):
        b.op("aten::add", 10 + i, 5, ext=i + 1).launch("hipLaunchKernel", 11 + i, 2, corr=i + 1,
                                                         ext=i + 1)
        b.kernel("elementwise", 20 + 10 * i, 5, corr=i + 1, ext=i + 1, device=dev)
    b.memory(5, 4096, 4096, 8192, device=memory_device, device_type=device_type)
    b.memory(6, 1 << 20, (1 << 20) + 4096, 2 << 20, device=memory_device, device_type=device_type)
    b.memory(7, 64, 64, 64, device=-1, device_type=0)
    return b.write(tmp_path / "rocm.json")


def test_hip_memory_is_on_the_kernels_device(tmp_path, both_parsers):
    trace = read_kineto(_rocm_trace(tmp_path))
    assert trace.devices["device"].to_list() == [2]
    mem = trace.memory.sort("ts_ns")
    assert mem["device"].to_list() == [2, 2, -1] and mem["device_type"].to_list() == [6, 6, 0]
    rank = analyze_trace(trace, Context(catalog=load_catalog()))
    assert rank.primary_device == 2
    m = rank.values["metrics"]
    assert (m.peak_memory_bytes, m.peak_reserved_bytes) == ((1 << 20) + 4096, 2 << 20)


def test_several_gpus_keep_their_numbers(tmp_path):
    """Two GPUs on kernels: which ordinal is which agent is not in the trace; left as written."""
    trace = read_kineto(_rocm_trace(tmp_path, kernel_devices=(2, 3)))
    assert sorted(trace.memory["device"].to_list()) == [-1, 0, 0]


def test_memory_already_on_the_kernels_device_is_left_alone(tmp_path):
    trace = read_kineto(_rocm_trace(tmp_path, memory_device=2))
    assert sorted(trace.memory["device"].to_list()) == [-1, 2, 2]


@pytest.mark.parametrize("kind", list(DeviceType))
def test_every_device_type(tmp_path, kind):
    """Host types (CPU, MKLDNN, IDEEP) are the host's memory (-1); Meta tensors allocate nothing;
    every other type (CUDA, HIP, XPU, MTIA, PrivateUse1...) is its device's."""
    trace = read_kineto(_rocm_trace(tmp_path, kernel_devices=(0,), device_type=int(kind)))
    peaks = {p.device: p.peak_allocated_bytes for p in memory_peaks(trace.memory)}
    if kind in (DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP):
        assert peaks == {-1: (1 << 20) + 4096}  # the largest total of the host's events
    elif kind is DeviceType.META:
        assert peaks == {-1: 64}
    else:
        assert peaks == {-1: 64, 0: (1 << 20) + 4096}


def test_the_mi300x_traces_peak(both_parsers):
    """TraceLens' MI300X ViT: 620 [memory] events of Device Type 6 (HIP), Device Id 0, kernels on
    device 2; the largest 'Total Allocated' among them is 272,628,736 bytes, 'Total Reserved'
    291,504,128 (read from the file)."""
    path = shared_path("traces", "kineto",
                       "tracelens-mi300-Falconsai_nsfw_image_detection__1016002.json.gz")
    trace = read_kineto(path)
    assert trace.memory.height == 620 and set(trace.memory["device"]) == {2}
    rank = analyze_trace(trace, Context(catalog=load_catalog()))
    m = rank.values["metrics"]
    assert (m.device, m.peak_memory_bytes, m.peak_reserved_bytes) == (
        2, 272_628_736, 291_504_128)
    assert rank.sizing is not None
    assert all(c.fits_memory for c in rank.sizing.candidates)  # 0.25 GiB fits every GPU
    assert "peak memory is unknown" not in rank.sizing.reason
