"""How much memory reading and analyzing one trace takes, from its size: the memory budget's model.

Role: a worker of ``rightsize analyze`` holds one trace at a time within a budget
(``--memory-budget``; by default a share of the memory available, ``rightsize.engine``). Before
reading, :func:`estimate` says what a whole trace needs; a reader given a budget the estimate
exceeds reads a window of steps that fits instead (``traces/window.py``), sized by the events
each step holds. Ray asks each task's memory from the same estimate.

The model is linear, measured (``benchmarks/memory_budget.py factors``, figures in
benchmarks/README.md): peak RSS of a fresh worker process that reads one trace (lean) and
analyzes it as one rank = :data:`BASE_BYTES` (the floor: Python, polars, rightsize and a small
trace's analysis) + the trace's bytes (uncompressed JSON; an export's file size) x ``per_byte``
before it is read, or its events (Kineto events; Nsight rows of the kernel, runtime, memcpy,
memset and NVTX tables) x ``per_event`` once counted (a window's size is chosen by events). The
factors are the largest ratios measured (traces of 16 MB to 1 GB), so the estimate bounds those
traces from above (by up to 1.6x on a 1 GB one); a trace unlike them (far more args per event,
say) may need more.

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

# Measured with benchmarks/memory_budget.py factors on this repository's 2-core machine
# (Python 3.11, polars 1.x; benchmarks/README.md "Memory of one worker"): peak RSS of a fresh
# worker = BASE_BYTES + the larger of bytes x per_byte and events x per_event, each factor the
# largest ratio (peak - BASE_BYTES) / size seen. Kineto: a make_job.py rank of 155 MB (617k
# events, compact JSON with collective args: 366 MB peak), make_big_trace.py traces of 175 MB
# and 1.05 GB (545k / 3.27M events: 288 / 866 MB). Nsight: a kernel-heavy export of 155 MB
# (nsys_large.py, 2.5M rows: 745 MB) and an NVTX-heavy one of 267 MB with 256 steps
# (memory_budget.py nsys-steps, 3.7M rows: 880 MB). A 16 MB rank peaks at 165 MB: the floor.
BASE_BYTES = 200_000_000


@dataclass(frozen=True, slots=True)
class Factor:
    per_byte: float  # peak RSS above BASE_BYTES per byte of the trace (uncompressed JSON)
    per_event: float  # the same per event (Kineto event; Nsight activity or NVTX row)


FACTORS = {
    "kineto": Factor(per_byte=1.1, per_event=270.0),
    "nsys": Factor(per_byte=3.6, per_event=220.0),
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


