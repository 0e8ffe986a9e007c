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

Inputs: a path and its reader's declared :class:`~rightsize.traces.readers.Memory`. Outputs: an
:class:`Estimate`. No analysis; reads at most the file's first
8 MiB (a gzip's inflation ratio) and its last bytes.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from rightsize.traces.readers import Memory

GZIP_MAGIC = b"\x1f\x8b"

# The floor: peak RSS of a fresh worker process that reads and analyzes a small trace (Python,
# polars, rightsize; a 16 MB rank peaks at 165 MB). Each trace reader declares its factors
# above it (``Reader.memory``: kineto.MEMORY, nsys.MEMORY), measured with
# benchmarks/memory_budget.py factors on this repository's 2-core machine (Python 3.11,
# polars 1.x; benchmarks/README.md "Memory of one worker"): the largest ratio
# (peak - BASE_BYTES) / size seen.
BASE_BYTES = 200_000_000
MIN_BUDGET_BYTES = 100_000_000  # a --memory-budget below this is refused: no trace fits in it
SAMPLE_BYTES = 8 << 20  # compressed bytes inflated to learn a gzip trace's ratio
INFLATED_MAX = 64 << 20  # at most this much of it inflated


@dataclass(frozen=True, slots=True)
class Estimate:
    data_bytes: int  # the bytes the model is in: uncompressed JSON, or the export's size
    need_bytes: int  # estimated peak RSS of a worker analyzing the whole trace


def need_for_events(memory: Memory, events: int) -> int:
    """Estimated peak RSS of a worker that reads ``events`` events of a trace whose reader
    declares ``memory``."""
    return BASE_BYTES + int(events * memory.per_event)


def estimate(path: Path, memory: Memory) -> Estimate:
    """What analyzing the whole file takes, by its reader's ``memory`` (see the module
    docstring): its bytes, uncompressed when it is gzip."""
    with path.open("rb") as fh:
        head = fh.read(len(GZIP_MAGIC))
    size = path.stat().st_size
    data = gunzipped_size(path, size) if head == GZIP_MAGIC else size
    return Estimate(data, BASE_BYTES + int(data * memory.per_byte))


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


_SIZE = re.compile(r"(\d++(?:\.\d++)?)\s*+([kmgt]?)(i?)b?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``2G``, ``1.5GB``, ``512MiB``, ``800000000`` -> bytes (k/M/G/T: powers of 1000; with
    ``i``, of 1024)."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r} (say 2G, 1500M or a number of bytes)")
    scale = 1024 if m.group(3) else 1000
    power = "kmgt".index(m.group(2).lower()) + 1 if m.group(2) else 0
    return int(float(m.group(1)) * scale**power)


def size_text(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


