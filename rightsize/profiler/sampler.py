"""The sampling thread of ``rightsize run``: NVML and host rows to Parquet, flushed as it goes.

Every ``interval_s`` it takes one host row (and the job's pids) and one NVML row per GPU. Rows
are written as numbered part files (``samples/gpu.part0001.parquet``...) every ``flush_every_s``,
so a job killed half-way still leaves what was seen; :meth:`Sampler.stop` writes the last part
and compacts the parts into ``samples/<kind>.parquet``.

A collector that fails is warned about once, switched off, and its reason kept in
:attr:`Sampler.errors` for the manifest; the others carry on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from rightsize.profiler.host import HostSampler
from rightsize.profiler.nvml import NvmlSampler
from rightsize.traces.samples import SAMPLE_FILES, SAMPLES_DIR, sample_paths


@dataclass(frozen=True, slots=True)
class SamplerResult:
    """What the sampler wrote, for the manifest."""

    rows: dict[str, int]  # kind -> rows written
    files: tuple[str, ...]  # paths relative to the run directory
    errors: dict[str, str]  # collector -> why it stopped
    interval_s: float
    ticks: int
    late_ticks: int  # ticks that took longer than interval_s (sampling could not keep up)


class Sampler:
    """Background sampling of one job into ``<run_dir>/samples``."""

    def __init__(
        self,
        run_dir: Path,
        host: HostSampler | None,
        nvml: NvmlSampler | None,
        interval_s: float = 0.1,
        flush_every_s: float = 5.0,
        warn: Callable[[str], None] = print,
    ) -> None:
        self._dir = Path(run_dir) / SAMPLES_DIR
        self._dir.mkdir(parents=True, exist_ok=True)
        self._host = host
        self._nvml = nvml
        self._interval_s = interval_s
        self._flush_every_s = flush_every_s
        self._warn = warn
        self._rows: dict[str, list[dict]] = {kind: [] for kind in SAMPLE_FILES}
        self._written: dict[str, int] = dict.fromkeys(SAMPLE_FILES, 0)
        self._parts = 0
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and flush_now()
        self._flush_waiters: list[threading.Event] = []
        self._waiters_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="rightsize-sampler", daemon=True)
        self.errors: dict[str, str] = {}
        self._ticks = 0
        self._late = 0

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        last_flush_s = time.monotonic()
        while True:
            began_s = time.monotonic()
            self._wake.clear()
            self.tick()
            with self._waiters_lock:
                waiters, self._flush_waiters = self._flush_waiters, []
            if waiters or began_s - last_flush_s >= self._flush_every_s:
                self.flush()
                last_flush_s = began_s
            for done in waiters:
                done.set()
            spent_s = time.monotonic() - began_s
            if spent_s > self._interval_s:
                self._late += 1
            self._wake.wait(max(self._interval_s - spent_s, 0.0))
            if self._stop.is_set():
                return

    def tick(self) -> None:
        """Take one sample of every collector still on."""
        t_ns = time.time_ns()
        self._ticks += 1
        pids: set[int] = set()
        if self._host is not None:
            try:
                row, pids = self._host.sample(t_ns)
                self._rows["host"].append(row)
            except Exception as exc:  # noqa: BLE001 - a sampler bug must not end the run
                self._drop("host", exc)
        if self._nvml is not None:
            try:
                gpu_rows, proc_rows = self._nvml.sample(t_ns, pids)
                self._rows["gpu"] += gpu_rows
                self._rows["gpu_processes"] += proc_rows
            except Exception as exc:  # noqa: BLE001 - a sampler bug must not end the run
                self._drop("nvml", exc)

    def _drop(self, collector: str, exc: Exception) -> None:
        self.errors[collector] = f"{exc.__class__.__name__}: {exc}"
        self._warn(f"{collector} sampling stopped: {self.errors[collector]}")
        if collector == "host":
            self._host = None
        else:
            self._nvml = None

    def flush_now(self, timeout_s: float = 5.0) -> bool:
        """Have the sampling thread take a sample and write what it holds now (a capture's
        window must be on disk before it is cut); False when it did not within ``timeout_s``."""
        if not self._thread.is_alive():
            return False
        done = threading.Event()
        with self._waiters_lock:
            self._flush_waiters.append(done)
        self._wake.set()
        return done.wait(timeout_s)

    def flush(self) -> None:
        """Write the rows taken since the last flush as one more part file per kind (under a
        temporary name first: the parts are read while the job runs)."""
        self._parts += 1
        for kind, rows in self._rows.items():
            if not rows:
                continue
            self._rows[kind] = []
            frame = pl.DataFrame(rows, schema=SAMPLE_FILES[kind], orient="row")
            part = self._dir / f"{kind}.part{self._parts:04d}.parquet"
            tmp = part.with_name(f".{part.name}.tmp")
            frame.write_parquet(tmp)
            tmp.replace(part)
            self._written[kind] += frame.height

    def stop(self) -> SamplerResult:
        """Stop the thread, write what is left, and compact the parts into one file per kind."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush()
        files = []
        for kind in SAMPLE_FILES:
            parts = sample_paths(self._dir.parent, kind)
            if not parts:
                continue
            whole = self._dir / f"{kind}.parquet"
            if parts != [whole]:
                pl.concat([pl.read_parquet(p) for p in parts]).write_parquet(whole)
                for part in parts:
                    part.unlink()
            files.append(f"{SAMPLES_DIR}/{whole.name}")
        return SamplerResult(
            rows=dict(self._written),
            files=tuple(files),
            errors=dict(self.errors),
            interval_s=self._interval_s,
            ticks=self._ticks,
            late_ticks=self._late,
        )
