"""Build small Kineto traces in tests: events in microseconds, written like torch writes them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

HOST_PID, HOST_TID = 100, 100
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
        "computeMajor": 9, "computeMinor": 0, "numSms": 132, "warpSize": 32,
        "maxThreadsPerMultiprocessor": 2048}


class TraceBuilder:
    def __init__(self, base_ns: int | None = None, devices: list[dict] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.base_ns = base_ns
        self.devices = [H100] if devices is None else devices
        self.extra: dict[str, Any] = {}

    def x(self, cat: str, name: str, ts: float, dur: float, pid: Any = HOST_PID,
          tid: Any = HOST_TID, **args: Any) -> TraceBuilder:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                            "ts": ts, "dur": dur, "args": args})
        return self

    def step(self, n: int, ts: float, dur: float) -> TraceBuilder:
        return self.x("user_annotation", f"ProfilerStep#{n}", ts, dur)

    def op(self, name: str, ts: float, dur: float, ext: int | None = None, **args: Any):
        if ext is not None:
            args["External id"] = ext
        return self.x("cpu_op", name, ts, dur, **args)

    def launch(self, name: str, ts: float, dur: float, corr: int, ext: int | None = None):
        args: dict[str, Any] = {"correlation": corr, "cbid": 211}
        if ext is not None:
            args["External id"] = ext
        self.x("cuda_runtime", name, ts, dur, **args)
        self.events.append({"ph": "s", "id": corr, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
                            "cat": "ac2g", "name": "ac2g"})
        return self

    def kernel(self, name: str, ts: float, dur: float, corr: int, ext: int | None = None,
               stream: int = 7, device: int = 0, blocks: float | None = None,
               occ: float | None = None, grid: list[int] | None = None):
        args: dict[str, Any] = {"device": device, "stream": stream, "correlation": corr,
                                "grid": grid or [132, 1, 1], "block": [128, 1, 1]}
        if ext is not None:
            args["External id"] = ext
        if blocks is not None:
            args["blocks per SM"] = blocks
        if occ is not None:
            args["est. achieved occupancy %"] = occ
        self.x("kernel", name, ts, dur, pid=device, tid=stream, **args)
        self.events.append({"ph": "f", "id": corr, "pid": device, "tid": stream, "ts": ts,
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})
        return self

    def memcpy(self, name: str, ts: float, dur: float, corr: int, nbytes: int,
               stream: int = 7, device: int = 0):
        return self.x("gpu_memcpy", name, ts, dur, pid=device, tid=stream, device=device,
                      stream=stream, correlation=corr, bytes=nbytes)

    def memset(self, ts: float, dur: float, corr: int, nbytes: int, stream: int = 7):
        return self.x("gpu_memset", "Memset (Device)", ts, dur, pid=0, tid=stream, device=0,
                      stream=stream, correlation=corr, bytes=nbytes)

    def memory(self, ts: float, nbytes: int, allocated: int, reserved: int, device: int = 0,
               device_type: int | None = None):
        kind = (1 if device >= 0 else 0) if device_type is None else device_type  # c10 DeviceType
        self.events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                            "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
                            "args": {"Device Type": kind, "Device Id": device,
                                     "Addr": 1, "Bytes": nbytes, "Total Allocated": allocated,
                                     "Total Reserved": reserved}})
        return self

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": self.devices}
        doc.update(self.extra)
        doc["traceEvents"] = self.events
        if self.base_ns is not None:
            doc["baseTimeNanoseconds"] = self.base_ns
        return doc

    def write(self, path: Path, gz: bool = False, indent: int | None = 1) -> Path:
        text = json.dumps(self.document(), indent=indent)
        if gz:
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            path.write_text(text)
        return path


BASE_NS = 1_700_000_000_000_000_000


def two_step_trace(b: Any = None) -> Any:
    """The hand-built training trace whose every metric is worked out in
    tests/analyzers/test_metrics.py; ``b`` may be a :class:`tests.framebuilder.FrameBuilder`
    (same methods) to get the same trace as inline frames."""
    b = TraceBuilder(base_ns=BASE_NS) if b is None else b
    b.step(1, 1000.0, 1000.0).step(2, 2000.0, 1000.0)
    b.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        1000.0, 200.0)
    b.op("aten::mm", 1200.0, 100.0, ext=1, **{"Input Dims": [[64, 128], [128, 256]],
                                              "Input type": ["c10::BFloat16", "c10::BFloat16"]})
    b.launch("cudaLaunchKernel", 1210.0, 10.0, corr=11, ext=1)
    b.kernel("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 1250.0, 400.0, corr=11, ext=1,
             blocks=2.0, occ=50)
    b.op("aten::copy_", 1300.0, 100.0, ext=2)
    b.launch("cudaMemcpyAsync", 1310.0, 10.0, corr=12, ext=2)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 1650.0, 50.0, corr=12, nbytes=1_000_000)
    b.op("nccl:all_reduce", 1320.0, 20.0, ext=5)
    b.launch("cudaLaunchKernel", 1320.0, 10.0, corr=13, ext=5)
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
             1600.0, 200.0, corr=13, ext=5, stream=20, blocks=0.5, occ=25)
    b.op("aten::add", 2000.0, 100.0, ext=3)
    b.launch("cudaLaunchKernel", 2010.0, 10.0, corr=21, ext=3)
    b.kernel("void at::native::vectorized_elementwise_kernel<4>()", 2100.0, 200.0, corr=21,
             ext=3, blocks=0.25, occ=10)
    b.launch("cudaMemsetAsync", 2020.0, 10.0, corr=22, ext=3)
    b.memset(2420.0, 10.0, corr=22, nbytes=4096)
    b.op("aten::sum", 2100.0, 100.0, ext=4)
    b.launch("cudaLaunchKernel", 2110.0, 10.0, corr=23, ext=4)
    b.kernel("void at::native::reduce_kernel<512, 1>()", 2310.0, 100.0, corr=23, ext=4,
             blocks=1.5, occ=30)
    b.x("python_function", "train.py(10): step", 2500.0, 100.0)
    b.memory(1100.0, 1000, 1000, 8192).memory(1200.0, 4000, 5000, 8192)
    b.memory(2200.0, -2000, 3000, 8192)
    if isinstance(b, TraceBuilder):
        b.extra["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 2}
    return b


def long_names_trace(chars: int = 100_000, device_chars: int | None = None) -> TraceBuilder:
    """:func:`two_step_trace` with a name of ``chars`` characters in every place a trace names
    something (issue 40, 2): a kernel, an op, an annotation, a runtime call, a memcpy, the
    device (``device_chars``, default ``chars``), a thread and a process id, the backend."""
    long = "k" * chars
    device = dict(H100, name="NVIDIA H100 " + "d" * (device_chars or chars))
    b = two_step_trace(TraceBuilder(base_ns=BASE_NS, devices=[device]))
    b.op("aten::" + "o" * chars, 2600.0, 50.0, ext=9)
    b.launch("cudaLaunchKernel" + "r" * chars, 2610.0, 5.0, corr=91, ext=9)
    b.kernel("void " + long + "<float, 4>()", 2620.0, 20.0, corr=91, ext=9)
    b.x("user_annotation", "a" * chars, 2600.0, 60.0, tid="t" * chars)
    b.x("gpu_memcpy", "Memcpy DtoD " + "m" * chars, 2650.0, 5.0, pid=0, tid=7, device=0,
        stream=7, correlation=92, bytes=1000)
    b.x("cpu_op", "aten::empty", 2700.0, 5.0, pid="p" * chars, tid=1)
    b.extra["distributedInfo"] = {"backend": "b" * chars, "rank": 0, "world_size": 2}
    return b
