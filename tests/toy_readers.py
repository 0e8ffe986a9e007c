"""Toy input formats, each a reader plugged in as docs/formats.md prescribes (a module with its
reader object, and one registry entry the test adds).

The module is written at test time (``toy`` fixture) so that a reader really is imported from a
module of its own, deferred or not. It holds two readers of made-up formats:

* ``READER``, GPU samples: ``#toy-gpu-util`` then ``t_ns,gpu_index,gpu_util_pct`` rows;
* ``TRACE_READER``, one rank's trace: ``#toy-trace rank=R world_size=W backend=B`` then
  ``kind,name,ts_us,dur_us`` rows (kind: step, op, kernel) on an H100.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

TOY_MAGIC = "#toy-gpu-util"
TOY_TRACE_MAGIC = "#toy-trace"
TOY_MODULE = textwrap.dedent('''
    """Toy readers: a made-up GPU utilization CSV -> GPU_SAMPLES, a made-up trace -> Trace."""
    from pathlib import Path

    import polars as pl

    from rightsize.errors import InputError
    from rightsize.traces import schema
    from rightsize.traces.readers import SAMPLES, TRACE, JobHead, Progress, Read, ReadOptions
    from rightsize.traces.samples import conform_samples

    H100 = {"device": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85018279936,
            "sm_count": 132, "compute_major": 9, "compute_minor": 0}


    class ToyFormat:
        """What both toy readers share: detection by magic, no memory model, no job head."""

        magic = b""
        memory = None

        def detect(self, path: Path, head: bytes) -> bool:
            return head.startswith(self.magic)

        def job_head(self, head: bytes) -> JobHead | None:
            return None


    class ToyReader(ToyFormat):
        name, described = "toy", "toy GPU utilization CSV"
        contributes, suffixes, magic = SAMPLES, (".log",), b"#toy-gpu-util"

        def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
            if progress:
                progress("parsing")
            rows = [line.split(",") for line in path.read_text().splitlines()[1:] if line]
            if not rows:
                raise InputError(path, "a toy log without samples")
            frame = pl.DataFrame(rows, schema=["t_ns", "gpu_index", "gpu_util_pct"], orient="row")
            samples = conform_samples("gpu", frame.with_columns(source=pl.lit("toy")))
            return Read(entry={"samples": samples.height, "columns": 3}, gpu_samples=samples)


    def _header(line: str) -> dict[str, str]:
        return dict(kv.split("=", 1) for kv in line.split()[1:])


    class ToyTraceReader(ToyFormat):
        name, described = "toy-trace", "toy trace CSV"
        contributes, suffixes, magic = TRACE, (".toy",), b"#toy-trace"

        def job_head(self, head: bytes) -> JobHead | None:
            if not head.startswith(self.magic):
                return None
            h = _header(head.decode().splitlines()[0])
            return JobHead(rank=int(h["rank"]), world_size=int(h["world_size"]),
                           backend=h["backend"])

        def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
            lines = path.read_text().splitlines()
            h = _header(lines[0])
            rows = [line.split(",") for line in lines[1:] if line]
            if not rows:
                raise InputError(path, "a toy trace without events")

            def frame(kind: str) -> pl.DataFrame:
                sel = [r for r in rows if r[0] == kind]
                return pl.DataFrame(
                    {"name": [r[1] for r in sel], "ts_ns": [int(r[2]) * 1000 for r in sel],
                     "dur_ns": [int(r[3]) * 1000 for r in sel]},
                    schema={"name": pl.String, "ts_ns": pl.Int64, "dur_ns": pl.Int64})

            frames = {f: schema.empty(f) for f in schema.FRAMES}
            frames["steps"] = schema.conform("steps", frame("step").with_columns(
                step=pl.col("name").str.extract(r"#(\\d+)").cast(pl.Int64),
                pid=pl.lit("1"), tid=pl.lit("1")))
            frames["kernels"] = schema.conform("kernels", frame("kernel").with_columns(
                device=pl.lit(0), stream=pl.lit(7)))
            frames["cpu_ops"] = schema.conform("cpu_ops", frame("op").with_columns(
                cat=pl.lit("cpu_op"), pid=pl.lit("1"), tid=pl.lit("1")))
            frames["devices"] = schema.conform("devices", pl.DataFrame([H100]))
            meta = schema.TraceMeta(path=str(path), format=self.name, rank=int(h["rank"]),
                                    world_size=int(h["world_size"]), backend=h["backend"],
                                    event_count=len(rows))
            return Read.of_trace(schema.Trace(meta=meta, **frames))


    READER = ToyReader()
    TRACE_READER = ToyTraceReader()
''')


@pytest.fixture(name="toy")
def toy_fixture(tmp_path, monkeypatch):
    """The toy readers' module, importable under a name no other test uses."""
    name = f"toy_reader_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
