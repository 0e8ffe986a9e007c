"""Find and open the inputs of an analysis: files, per-rank directories, run directories.

Input: paths as the user typed them. Output: :class:`Inputs` - the traces (normalized), plus a
description of each input for the report. The format of a file is detected from its content
(gzip magic, JSON, SQLite header...), not from its name. Every problem is an
:class:`~rightsize.errors.InputError` naming the file.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rightsize import rundir
from rightsize.errors import InputError
from rightsize.traces.kineto import GZIP_MAGIC, looks_like_kineto, read_kineto
from rightsize.traces.schema import Trace

SUPPORTED = "PyTorch Profiler/Kineto JSON (.json, .json.gz), a directory of them, or a run directory"
TRACE_GLOBS = ("*.json", "*.json.gz", "*.pt.trace.json", "*.pt.trace.json.gz")
SNIFF_BYTES = 4096

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Inputs:
    traces: tuple[Trace, ...]
    described: tuple[dict[str, Any], ...]
    run_dirs: tuple[Path, ...] = field(default=())


def sniff(path: Path) -> bytes:
    """The first bytes of a file, decompressed when it is gzip."""
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
            if head[:2] == GZIP_MAGIC:
                fh.seek(0)
                with gzip.GzipFile(fileobj=fh) as gz:
                    return gz.read(SNIFF_BYTES)
            return head
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise InputError(path, f"corrupt or truncated gzip data ({exc})") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def detect(path: Path) -> str:
    head = sniff(path)
    if not head.strip():
        raise InputError(path, "the file is empty")
    if looks_like_kineto(head):
        return "kineto"
    if head.startswith(b"SQLite format 3\x00"):
        raise InputError(path, f"an SQLite file (Nsight Systems import is not available in this "
                               f"version); supported: {SUPPORTED}")
    raise InputError(path, f"not a supported format; supported: {SUPPORTED}")


def expand(paths: list[Path]) -> list[tuple[Path, Path | None]]:
    """Files to read, each with the run directory it belongs to (or None)."""
    out: list[tuple[Path, Path | None]] = []
    for p in paths:
        if not p.exists():
            raise InputError(p, "no such file or directory")
        if p.is_dir():
            if rundir.is_run_dir(p):
                rundir.read_manifest(p)  # one-line error for a newer or broken run directory
                files = rundir.trace_paths(p)
                if not files:
                    raise InputError(p, "run directory without traces (was --no-profiler used?)")
                out.extend((f, p) for f in files)
                continue
            files = sorted({f for g in TRACE_GLOBS for f in p.glob(g) if f.is_file()})
            if not files:
                raise InputError(p, "directory holds no trace files (*.json, *.json.gz)")
            out.extend((f, None) for f in files)
        else:
            out.append((p, None))
    return out


def load(paths: list[str | Path], progress: Progress | None = None) -> Inputs:
    """Read every input into the normalized schema."""
    files = expand([Path(p) for p in paths])
    traces: list[Trace] = []
    described: list[dict[str, Any]] = []
    run_dirs: list[Path] = []
    for i, (f, run) in enumerate(files, 1):
        fmt = detect(f)
        label = f"[{i}/{len(files)}] {f.name}"
        if progress:
            progress(f"reading {label}")
        size = f.stat().st_size

        def tick(done: int, events: int, label: str = label, size: int = size) -> None:
            if progress:
                progress(f"reading {label}: {done / 1e6:,.0f} MB, {events:,} events")

        trace = read_kineto(f, tick if progress else None)
        traces.append(trace)
        described.append({"path": str(f), "format": fmt, "rank": trace.meta.rank,
                          "events": trace.meta.event_count, "bytes": size})
        if run is not None and run not in run_dirs:
            run_dirs.append(run)
    return Inputs(tuple(traces), tuple(described), tuple(run_dirs))
