"""Find and open the inputs of an analysis: files, per-rank directories, run directories.

Input: paths as the user typed them. Output: the read plan (:func:`plan`, a :class:`Plan`):
each input's ``inputs`` entry, the traces to read and analyze one at a time (by the pipeline,
``rightsize.pipeline``, on the engine), and what the other inputs contributed, read here
(Nsight Compute kernel rows, GPU samples, a run directory's host samples).
:func:`read_trace` reads one trace of the plan; :func:`load` reads them all into memory
(:class:`Inputs`: for tests and notebooks). The format of a file is detected from its content
(gzip magic, JSON, SQLite header...), not from its name, by the readers of
:data:`rightsize.traces.registry.READERS` in order, and what it contributes is what its reader
declares; this module names no format. Every problem is an
:class:`~rightsize.errors.InputError` naming the file.

Several traces are analyzed together as the ranks of one job only when they say so
(:func:`check_one_job`): each carries distributedInfo with the same world size and backend and
its own rank, they ran on the same kind of device, and they were recorded at the same time
(their event spans overlap). Traces of one run directory are one recording by construction.
Anything else is refused with one line naming the mismatch.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import socket
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from rightsize import rundir
from rightsize.errors import InputError, RightsizeError
from rightsize.traces import limits, registry
from rightsize.traces.kernel_rows import combine_ncu
from rightsize.traces.readers import (
    FABRIC,
    TRACE,
    Memory,
    Read,
    Reader,
    ReadOptions,
    Refused,
    not_analyzed,
)
from rightsize.traces.registry import SUPPORTED
from rightsize.traces.samples import read_kind
from rightsize.traces.schema import Trace

__all__ = ["SUPPORTED", "Inputs", "Plan", "ReadOptions", "TraceFile", "detect", "load", "plan",
           "read_trace"]

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 4096
DEFAULT_OPTIONS = ReadOptions()

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Inputs:
    traces: tuple[Trace, ...]
    described: tuple[dict[str, Any], ...]
    run_dirs: tuple[Path, ...] = field(default=())
    ncu: pl.DataFrame | None = None  # Nsight Compute per-kernel rows (rightsize.traces.ncu)
    gpu_samples: pl.DataFrame | None = None  # GPU_SAMPLES from runs and metric logs
    host_samples: pl.DataFrame | None = None  # HOST_SAMPLES of run directories


def sniff(path: Path) -> bytes:
    """The first bytes of a file that are not a UTF-8 BOM or whitespace (decompressed when it
    is gzip; leading whitespace is skipped up to the envelope cap)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
            if head[:2] == GZIP_MAGIC:
                fh.seek(0)
                with gzip.GzipFile(fileobj=fh) as gz:
                    return _first_content(gz)
            fh.seek(0)
            return _first_content(fh)
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise InputError(path, f"corrupt or truncated gzip data ({exc})") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def _first_content(fh: Any) -> bytes:
    """SNIFF_BYTES from the first byte that is not a BOM or whitespace (b"" when none)."""
    skipped = 0
    limit = limits.cap(limits.ENVELOPE_BYTES)
    block = fh.read(SNIFF_BYTES).removeprefix(limits.BOM)
    while block:
        content = block.lstrip(b" \t\r\n")
        if content:
            return content + fh.read(SNIFF_BYTES - len(content))
        skipped += len(block)
        if skipped > limit:
            return b""
        block = fh.read(SNIFF_BYTES)
    return b""


def detect(path: Path) -> Reader:
    """The reader of a file, from its content: the first of ``registry.READERS`` that takes it
    (looked up at each call, so a test may swap the list)."""
    head = sniff(path)
    if not head.strip():
        raise InputError(path, "the file is empty")
    for reader in registry.READERS:
        try:
            if reader.detect(path, head):
                return reader
        except Refused as exc:
            raise InputError(path, f"{exc.why}; supported: {SUPPORTED}") from None
    raise InputError(path, f"not a supported format; supported: {SUPPORTED}")


def _why_no_trace(run_dir: Path) -> str:
    """The profiler's own account in the manifest (e.g. the flag a short job needs)."""
    try:
        reason = rundir.read_manifest(run_dir)["collectors"]["profiler"]["reason"]
    except (RightsizeError, OSError, KeyError, TypeError, ValueError):
        reason = None
    return str(reason) if reason else "the profiler recorded no window"


def expand(paths: list[Path]) -> list[tuple[Path, Path | None]]:
    """Files to read, each with the run directory it belongs to (or None)."""
    out: list[tuple[Path, Path | None]] = []
    for p in paths:
        limits.check_regular(p)
        if p.is_dir():
            if rundir.is_run_dir(p):
                status = run_status(p)  # one-line error for a newer or broken run directory
                files = rundir.trace_paths(p)
                if not files and status == "interrupted":
                    raise InputError(p, "run directory without traces: the run was interrupted "
                                        "(rightsize was killed) before a trace was written")
                if not files:
                    raise InputError(p, f"run directory without traces: {_why_no_trace(p)}")
                out.extend((f, p) for f in files)
                continue
            globs = [f"*{s}" for s in registry.trace_suffixes()]
            files = sorted({f for g in globs for f in p.glob(g) if f.is_file()})
            if not files:
                raise InputError(p, f"directory holds no trace files ({', '.join(globs)})")
            out.extend((f, None) for f in files)
        else:
            out.append((p, None))
    return out


def run_status(run_dir: Path) -> str | None:
    """The manifest's ``status``, or ``interrupted`` when it still says ``running`` but the
    rightsize process that wrote it is gone (killed before it could record the end)."""
    manifest = rundir.read_manifest(run_dir)
    status = manifest.get("status") if isinstance(manifest, dict) else None
    if status != "running" or not isinstance(manifest, dict):
        return status if isinstance(status, str) else None
    pid = manifest.get("rightsize_pid")
    host = manifest.get("host")
    same_host = isinstance(host, dict) and host.get("hostname") == socket.gethostname()
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not same_host:
        return status
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "interrupted"
    except (PermissionError, OverflowError):
        return status
    return status


@contextmanager
def stdin_as_file(paths: list[str | Path]) -> Iterator[list[Path]]:
    """``-`` copied to a temporary file (within the input cap) for the duration of a read:
    formats are detected by content and nsys needs a seekable file."""
    if not any(str(p) == "-" for p in paths):
        yield [Path(p) for p in paths]
        return
    limit = limits.cap(limits.INPUT_BYTES)
    with tempfile.NamedTemporaryFile(prefix="rightsize-stdin-") as tmp:
        copied = 0
        while chunk := sys.stdin.buffer.read(1 << 20):
            copied += len(chunk)
            if copied > limit:
                raise limits.LimitError(limits.INPUT_BYTES, "-")
            tmp.write(chunk)
        tmp.flush()
        yield [Path(tmp.name) if str(p) == "-" else Path(p) for p in paths]


@dataclass(frozen=True, slots=True)
class TraceFile:
    """A trace of the inputs: read and analyzed as one rank (``job_map.analyze_one``)."""

    index: int  # its entry in ``Plan.entries``
    path: Path
    run_dir: Path | None  # the run directory it belongs to (its manifest names the host)
    memory: Memory | None  # what its reader declares it takes (traces/budget.py)


@dataclass(slots=True)
class Plan:
    """What an analysis reads: every input file's ``inputs`` entry (a trace's is completed when
    it is read), the traces, and what the other files contributed, read already."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    traces: list[TraceFile] = field(default_factory=list)
    run_dirs: list[Path] = field(default_factory=list)
    one_run: bool = False  # every file comes from one run directory: one recording
    ncu: pl.DataFrame | None = None
    gpu_samples: pl.DataFrame | None = None
    host_samples: pl.DataFrame | None = None

    @property
    def checks_ranks(self) -> bool:
        """Whether the traces must say they are the ranks of one job (:func:`check_keys`)."""
        return len(self.traces) > 1 and not self.one_run


def plan(paths: list[Path], options: ReadOptions = DEFAULT_OPTIONS,
         progress: Progress | None = None) -> Plan:
    """Expand ``paths``, detect each file, and read every file that is not a trace (kernel
    rows, GPU samples: every rank's analysis uses them) and the run directories' samples."""
    files = expand(paths)
    out = Plan(one_run=all(r is not None for _, r in files))
    ncu_frames: list[pl.DataFrame] = []
    gpu_frames: list[pl.DataFrame] = []
    statuses: dict[Path, str | None] = {}
    for i, (f, run) in enumerate(files):
        reader = detect(f)
        entry: dict[str, Any] = {"path": str(f), "format": reader.name, "bytes": f.stat().st_size}
        if run is not None:
            entry["run_status"] = statuses.setdefault(run, run_status(run))
            if run not in out.run_dirs:
                out.run_dirs.append(run)
        out.entries.append(entry)
        if reader.contributes == TRACE:
            out.traces.append(TraceFile(i, f, run, reader.memory))
            continue
        if reader.contributes == FABRIC:  # for rightsize comm, not an analysis
            raise not_analyzed(f, reader)
        label = f"[{i + 1}/{len(files)}] {f.name}"
        if progress:
            progress(f"reading {label}")
        read = reader.read(f, options, _detail(label, progress))
        if read.trace is not None:
            raise RightsizeError(f"{f}: the {reader.name} reader read a trace but declares "
                                 f"that it contributes {reader.contributes}")
        _collect(read, ncu_frames, gpu_frames)
        entry.update(read.entry)
    out.one_run = out.one_run and len(out.run_dirs) == 1
    host_frames: list[pl.DataFrame] = []
    for run in out.run_dirs:
        gpu, host = read_kind(run, "gpu"), read_kind(run, "host")
        if gpu.height:
            gpu_frames.append(gpu)
        if host.height:
            host_frames.append(host)
    out.ncu = combine_ncu(ncu_frames) if ncu_frames else None
    out.gpu_samples = pl.concat(gpu_frames, how="vertical") if gpu_frames else None
    out.host_samples = pl.concat(host_frames, how="vertical") if host_frames else None
    return out


def read_trace(path: Path, run_dir: Path | None, options: ReadOptions,
               progress: Progress | None = None) -> Read:
    """Read one trace of a plan (its reader's ``Read``: the trace and its entry's keys)."""
    reader = detect(path)
    read = reader.read(path, options, progress)
    if read.trace is None:
        raise InputError(path, f"holds no trace (format {reader.name})")
    if run_dir is not None:
        read = dataclasses.replace(read, trace=with_host(read.trace, run_dir))
    return read


def load(paths: list[str | Path], progress: Progress | None = None,
         options: ReadOptions = DEFAULT_OPTIONS) -> Inputs:
    """Read every input into the normalized schema at once (``-`` is standard input): the
    plan and each of its traces. The pipeline reads one trace at a time instead."""
    with stdin_as_file(paths) as real:
        p = plan(real, options, progress)
        traces: list[Trace] = []
        for tf in p.traces:
            label = f"[{tf.index + 1}/{len(p.entries)}] {tf.path.name}"
            if progress:
                progress(f"reading {label}")
            read = read_trace(tf.path, tf.run_dir, options, _detail(label, progress))
            assert read.trace is not None
            traces.append(read.trace)
            p.entries[tf.index].update(read.entry)
        if p.checks_ranks:
            check_one_job(traces)
        return Inputs(traces=tuple(traces), described=tuple(p.entries),
                      run_dirs=tuple(p.run_dirs), ncu=p.ncu, gpu_samples=p.gpu_samples,
                      host_samples=p.host_samples)


def with_host(trace: Trace, run: Path) -> Trace:
    """A run directory's trace with the host its manifest records (``meta.profiler``'s
    ``hostname``): where the rank ran, for a job's node count."""
    try:
        host = rundir.read_manifest(run).get("host")
    except RightsizeError:
        return trace
    name = host.get("hostname") if isinstance(host, dict) else None
    if not isinstance(name, str) or not name:
        return trace
    meta = dataclasses.replace(trace.meta, profiler={**trace.meta.profiler, "hostname": name})
    return dataclasses.replace(trace, meta=meta)


def _detail(label: str, progress: Progress | None) -> Progress | None:
    """A reader's progress detail as a line naming the file (None: no progress wanted)."""
    if progress is None:
        return None
    report = progress

    def detail(text: str) -> None:
        report(f"reading {label}: {text}")

    return detail


def _collect(read: Read, ncu_frames: list[pl.DataFrame],
             gpu_frames: list[pl.DataFrame]) -> None:
    """File one reader's contribution with the others of its kind."""
    if read.ncu is not None:
        ncu_frames.append(read.ncu)
    if read.gpu_samples is not None:
        gpu_frames.append(read.gpu_samples)


@dataclass(frozen=True, slots=True)
class JobKey:
    """What :func:`check_one_job` compares of a trace: small, so that a worker that read the
    trace hands it to the driver instead of the trace."""

    path: str
    rank: int | None
    world_size: int | None
    backend: str | None
    groups: tuple[tuple[str, tuple[Any, ...]], ...]  # distributedInfo.pg_config (name, ranks)
    device_kind: str
    span_ns: tuple[int, int] | None


def job_key(t: Trace) -> JobKey:
    config = t.meta.profiler.get("pg_config")
    groups = tuple((str(g.get("pg_name")), tuple(g["ranks"])) for g in config
                   if isinstance(g, dict) and isinstance(g.get("ranks"), list)) \
        if isinstance(config, list) else ()
    return JobKey(t.meta.path, t.meta.rank, t.meta.world_size, t.meta.backend, groups,
                  _device_kind(t), _span_ns(t))


def _device_kind(t: Trace) -> str:
    names = sorted({n for n in t.devices["name"].to_list() if n}) if "name" in t.devices.columns \
        else []
    return f"{t.meta.vendor} {', '.join(names)}".strip() if names else t.meta.vendor


def _span_ns(t: Trace) -> tuple[int, int] | None:
    lo, hi = [], []
    for f in (t.kernels, t.cpu_ops, t.runtime):
        if f.height:
            lo.append(int(f["ts_ns"].min()))  # type: ignore[arg-type]
            hi.append(int((f["ts_ns"] + f["dur_ns"]).max()))  # type: ignore[arg-type]
    return (min(lo), max(hi)) if lo else None


def _mismatch(a: JobKey, b: JobKey) -> str | None:
    """Why ``a`` and ``b`` are not two ranks of one job (None: they are)."""
    for t in (a, b):
        if t.rank is None or t.world_size is None:
            return f"{Path(t.path).name} carries no distributedInfo (rank, world size)"
    if (a.world_size, a.backend) != (b.world_size, b.backend):
        return (f"world size/backend {a.world_size}/{a.backend} vs "
                f"{b.world_size}/{b.backend}")
    if a.rank == b.rank:
        return f"both are rank {a.rank}"
    group = _group_mismatch(a, b)
    if group is not None:
        return group
    if a.device_kind != b.device_kind:
        return f"devices {a.device_kind!r} vs {b.device_kind!r}"
    sa, sb = a.span_ns, b.span_ns
    if sa is not None and sb is not None and (sa[1] < sb[0] or sb[1] < sa[0]):
        return "recorded at different times (their event spans do not overlap)"
    return None


def _group_mismatch(a: JobKey, b: JobKey) -> str | None:
    """A process group both traces record (by name, with members in common) with different
    members (distributedInfo.pg_config; group names are global in torch.distributed)."""
    ga = {name: list(ranks) for name, ranks in a.groups}
    gb = {name: list(ranks) for name, ranks in b.groups}
    for name in sorted(ga.keys() & gb.keys()):  # one group (shared members), two listings
        if set(ga[name]) & set(gb[name]) and ga[name] != gb[name]:
            return f"process group {name!r} has ranks {ga[name]} vs {gb[name]}"
    return None


def check_one_job(traces: list[Trace]) -> None:
    """Refuse traces that do not say they are the ranks of one job (one line, the mismatch)."""
    check_keys([job_key(t) for t in traces])


def check_keys(keys: list[JobKey]) -> None:
    """:func:`check_one_job` on the traces' keys."""
    first = keys[0]
    for other in keys[1:]:
        why = _mismatch(first, other)
        if why is not None:
            raise InputError(Path(first.path).parent,
                             f"{Path(first.path).name} and {Path(other.path).name} "
                             f"are not ranks of one job: {why}; analyze them one at a time")
