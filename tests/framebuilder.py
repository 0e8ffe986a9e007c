"""Build a normalized :class:`~rightsize.traces.schema.Trace` inline, for analyzer tests.

No file and no reader: each call adds one row to a frame of ``rightsize.traces.schema`` (times
in microseconds from 0, stored as int64 ns; the columns a call does not name are null), and
:meth:`FrameBuilder.trace` conforms every frame to the declared schema. The methods mirror
:class:`tests.tracebuilder.TraceBuilder` (which writes Kineto JSON for reader tests), so a test
moves from one to the other by changing how it gets its trace::

    trace = FrameBuilder().step(1, 0, 1000).kernel("gemm", 100, 800, corr=1).trace()
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from rightsize.traces import schema
from rightsize.traces.schema import Trace, TraceMeta

HOST_PID, HOST_TID = "100", "100"
H100 = {"device": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85018279936,
        "sm_count": 132, "compute_major": 9, "compute_minor": 0, "max_threads_per_sm": 2048,
        "warp_size": 32}
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_MEMCPY = re.compile(r"^Memcpy (\w+) \((\w+) -> (\w+)\)$")
_HOST_CATS = {"cpu_op": "cpu_op", "user_annotation": "user_annotation",
              "python_function": "python_function"}


def _ns(us: float) -> int:
    return round(us * 1000)


def _shift(df: pl.DataFrame, base_ns: int) -> pl.DataFrame:
    return df.with_columns(pl.col("ts_ns") + base_ns) if base_ns and df.height else df


class FrameBuilder:
    def __init__(self, devices: list[dict[str, Any]] | None = None, base_ns: int = 0,
                 **meta: Any) -> None:
        """``devices``: rows of ``schema.DEVICES`` (default one H100; ``[]`` for CPU-only);
        ``base_ns`` is added to every time; ``meta``: ``TraceMeta`` fields (rank, world_size,
        backend...)."""
        self.rows: dict[str, list[dict[str, Any]]] = {name: [] for name in schema.FRAMES}
        self.rows["devices"] = [dict(H100)] if devices is None else [dict(d) for d in devices]
        self.base_ns = base_ns
        self.meta = meta

    def _add(self, frame: str, **row: Any) -> FrameBuilder:
        self.rows[frame].append(row)
        return self

    def x(self, cat: str, name: str, ts: float, dur: float, ext: int | None = None,
          **args: Any) -> FrameBuilder:
        """A host event: ``ProfilerStep#N`` becomes a step, anything else a host op."""
        times = {"pid": HOST_PID, "tid": HOST_TID, "ts_ns": _ns(ts), "dur_ns": _ns(dur)}
        m = _STEP.match(name)
        if m:
            return self._add("steps", step=int(m[1]), **times)
        return self._add("cpu_ops", name=name, cat=_HOST_CATS.get(cat, cat), external_id=ext,
                         input_dims=_json(args.get("Input Dims")),
                         input_types=_json(args.get("Input type")),
                         concrete_inputs=_json(args.get("Concrete Inputs")), **times)

    def step(self, n: int, ts: float, dur: float) -> FrameBuilder:
        return self.x("user_annotation", f"ProfilerStep#{n}", ts, dur)

    def op(self, name: str, ts: float, dur: float, ext: int | None = None,
           **args: Any) -> FrameBuilder:
        return self.x("cpu_op", name, ts, dur, ext=ext, **args)

    def launch(self, name: str, ts: float, dur: float, corr: int,
               ext: int | None = None) -> FrameBuilder:
        self._add("runtime", pid=HOST_PID, tid=HOST_TID, ts_ns=_ns(ts), dur_ns=_ns(dur),
                  name=name, api="runtime", correlation=corr, external_id=ext)
        return self._add("flows", id=corr, cat="launch", phase="s", pid=HOST_PID, tid=HOST_TID,
                         ts_ns=_ns(ts))

    def kernel(self, name: str, ts: float, dur: float, corr: int, ext: int | None = None,
               stream: int = 7, device: int = 0, blocks: float | None = None,
               occ: float | None = None, grid: list[int] | None = None) -> FrameBuilder:
        """A kernel and its launch flow; ``grid`` (x, y, z) fills ``grid_blocks`` (the Kineto
        reader leaves it null)."""
        grid_blocks = None if grid is None else grid[0] * grid[1] * grid[2]
        self._add("kernels", device=device, stream=stream, ts_ns=_ns(ts), dur_ns=_ns(dur),
                  name=name, correlation=corr, external_id=ext, grid_blocks=grid_blocks,
                  blocks_per_sm=blocks, occupancy_pct=occ)
        return self._add("flows", id=corr, cat="launch", phase="f", pid=str(device),
                         tid=str(stream), ts_ns=_ns(ts))

    def memcpy(self, name: str, ts: float, dur: float, corr: int, nbytes: int,
               stream: int = 7, device: int = 0) -> FrameBuilder:
        m = _MEMCPY.match(name)
        direction, src, dst = (m[1], m[2].lower(), m[3].lower()) if m else (None, None, None)
        return self._add("transfers", device=device, stream=stream, ts_ns=_ns(ts),
                         dur_ns=_ns(dur), name=name, kind="memcpy", direction=direction,
                         src_memory=src, dst_memory=dst, bytes=nbytes,
                         bandwidth_gbps=nbytes / _ns(dur) if dur else None, correlation=corr)

    def memset(self, ts: float, dur: float, corr: int, nbytes: int,
               stream: int = 7) -> FrameBuilder:
        return self._add("transfers", device=0, stream=stream, ts_ns=_ns(ts), dur_ns=_ns(dur),
                         name="Memset (Device)", kind="memset", bytes=nbytes,
                         bandwidth_gbps=nbytes / _ns(dur) if dur else None, correlation=corr)

    def memory(self, ts: float, nbytes: int, allocated: int, reserved: int,
               device: int = 0) -> FrameBuilder:
        return self._add("memory", ts_ns=_ns(ts), device_type=1 if device >= 0 else 0,
                         device=device, delta_bytes=nbytes, total_allocated_bytes=allocated,
                         total_reserved_bytes=reserved)

    def trace(self, path: str = "<inline>") -> Trace:
        frames = {}
        for name, cols in schema.FRAMES.items():
            rows = self.rows[name]
            df = pl.DataFrame(rows, schema_overrides={k: v for k, v in cols.items()
                                                      if rows and k in rows[0]},
                              strict=False) if rows else schema.empty(name)
            df = schema.conform(name, df)
            if "ts_ns" in cols:
                df = _shift(df, self.base_ns)
            frames[name] = df.sort("ts_ns", maintain_order=True) if "ts_ns" in cols \
                and name != "flows" else df
        vendor = "nvidia" if self.rows["devices"] or self.rows["kernels"] else "none"
        events = sum(len(r) for k, r in self.rows.items() if k != "devices")
        return Trace(meta=TraceMeta(path=path, format="kineto", vendor=vendor,
                                    event_count=events, **self.meta), **frames)


def _json(value: Any) -> str | None:
    import json

    return None if value is None else json.dumps(value)
