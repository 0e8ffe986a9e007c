"""How much memory reading and analyzing one trace takes, from its size: the memory budget's model.

Role: a worker of ``rightsize analyze`` holds one trace at a time within a budget
(``--memory-budget``; by default a share of the memory available, ``rightsize.engine``). Before
reading, :func:`estimate` says what a whole trace needs; a reader given a budget the estimate
exceeds reads a window of steps that fits instead (``traces/window.py``), sized by the events
each step holds. Ray asks each task's memory from the same estimate.

The model is linear, measured (``benchmarks/worker_memory.py``, figures in benchmarks/README.md):
peak RSS of a fresh worker process that reads one trace (lean) and analyzes it as one rank =
:data:`BASE_BYTES` (Python, polars, numpy and rightsize imported, the catalog loaded) + the
trace's bytes (uncompressed JSON; an export's file size) x ``per_byte``, or its events (Kineto
events; Nsight rows of the kernel, runtime, memcpy, memset and NVTX tables) x ``per_event`` when
they are counted. The factors are the largest ratios measured over traces of 0.2-5 GB, so the
estimate is an upper bound on those traces; a trace unlike them (far more args per event, say)
may need more.

Inputs: a path. Outputs: an :class:`Estimate`. No analysis; reads at most the file's first
8 MiB (a gzip's inflation ratio) and its last bytes.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"

# Measured (benchmarks/worker_memory.py on this repository's machine, Python 3.11, polars 1.x;
# see benchmarks/README.md "Memory of one worker"): the floor of a worker, and peak RSS above it
# per byte of trace and per event.
BASE_BYTES = 330_000_000


@dataclass(frozen=True, slots=True)
class Factor:
    per_byte: float  # peak RSS above BASE_BYTES per byte of the trace (uncompressed JSON)
    per_event: float  # the same per event


FACTORS = {
    "kineto": Factor(per_byte=1.0, per_event=400.0),
    "nsys": Factor(per_byte=1.0, per_event=200.0),
}
SAMPLE_BYTES = 8 << 20  # compressed bytes inflated to learn a gzip trace's ratio
INFLATED_MAX = 64 << 20  # at most this much of it inflated


@dataclass(frozen=True, slots=True)
class Estimate:
    format: str  # "kineto" or "nsys"
    data_bytes: int  # the bytes the model is in: uncompressed JSON, or the export's size
    need_bytes: int  # estimated peak RSS of a worker analyzing the whole trace


def need_for_events(fmt: str, events: int) -> int:
    """Estimated peak RSS of a worker that reads ``events`` events of a ``fmt`` trace."""
    return BASE_BYTES + int(events * FACTORS[fmt].per_event)


def estimate(path: Path) -> Estimate:
    """What analyzing the whole file takes (see the module docstring)."""
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    size = path.stat().st_size
    if head.startswith(SQLITE_MAGIC):
        fmt, data = "nsys", size
    else:
        fmt, data = "kineto", gunzipped_size(path, size) if head[:2] == GZIP_MAGIC else size
    return Estimate(fmt, data, BASE_BYTES + int(data * FACTORS[fmt].per_byte))


def gunzipped_size(path: Path, size: int) -> int:
    """A gzip file's uncompressed size: the trailer's ISIZE (the size modulo 2**32), lifted
    by whole 2**32 steps to where the inflation ratio of the first bytes puts it."""
    with path.open("rb") as fh:
        sample = fh.read(SAMPLE_BYTES)
        fh.seek(max(0, size - 4))
        isize = int.from_bytes(fh.read(4), "little")
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = len(inflate.decompress(sample, INFLATED_MAX))
    except zlib.error:
        return isize
    used = len(sample) - len(inflate.unconsumed_tail)
    if used >= size and inflate.eof:  # the whole file inflated: its size, exactly
        return out
    guess = size * out / max(used, 1)
    return isize + max(0, round((guess - isize) / 2**32)) * 2**32


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``2G``, ``1.5GB``, ``512MiB``, ``800000000`` -> bytes (k/M/G/T: powers of 1000; with
    ``i``, of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (say 2G, 1500M or a number of bytes)")
    scale = 1024 if m.group(3) else 1000
    power = "kmgt".index(m.group(2).lower()) + 1 if m.group(2) else 0
    return int(float(m.group(1)) * scale**power)


def size_text(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


