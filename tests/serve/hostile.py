"""The hostile uploads of issue 40, built small and fast: a kernel named ``'cudnn' * 800000``,
a 20 MB device name, gzip with reserved flag bits, gzip of whitespace, a trace of many steps, a
60-byte file that names its own day."""

from __future__ import annotations

import gzip
import json
from typing import Any

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920,
        "computeMajor": 8, "computeMinor": 0, "numSms": 108}


def kineto(events: list[dict[str, Any]], device: dict[str, Any] | None = None) -> bytes:
    """A Kineto trace (gzip, compact JSON) of ``events`` on one A100 (or ``device``)."""
    doc = {"traceEvents": events, "deviceProperties": [device or A100]}
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=9)


def steps(n: int, kernel: str = "ampere_sgemm_128x64_nn") -> list[dict[str, Any]]:
    """``n`` ProfilerSteps of 100 us, each with one 50 us kernel."""
    events: list[dict[str, Any]] = []
    for s in range(n):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                       "pid": 1, "tid": 1, "ts": s * 100, "dur": 100})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7,
                       "ts": s * 100 + 10, "dur": 50,
                       "args": {"device": 0, "stream": 7, "correlation": s + 1}})
    return events


def cudnn_kernel() -> bytes:
    """Issue 40, 1: a kernel named 'cudnn' * 800000 (4 MB, under the per-event cap): about
    30 kB of gzip; ``cudnn.*<float[,>]`` took about 3.4 h on the name."""
    return kineto(steps(3, kernel="cudnn" * 800_000))


def long_device(chars: int = 20_000_000, tag: str = "") -> bytes:
    """Issue 40, 2: a device named with ``chars`` characters (43 kB of gzip for 20 MB);
    ``tag`` makes each upload's bytes its own."""
    return kineto(steps(3), dict(A100, name="NVIDIA " + tag + "x" * chars))


def reserved_flags(data: bytes) -> bytes:
    """Issue 40, 3: ``data`` gzipped with the reserved FLG bits 0xE0 set (zlib's gzip mode
    refuses the header, gzip.GzipFile and isal ignore the bits and read everything)."""
    plain = gzip.compress(data, compresslevel=9, mtime=0)
    return plain[:3] + bytes([plain[3] | 0xE0]) + plain[4:]


def whitespace(mib: int, inside: tuple[bytes, bytes] = (b"", b"")) -> bytes:
    """Issue 40, 4: gzip of ``mib`` MiB of spaces (about 1 kB of gzip per MiB), between the
    two ``inside`` bytes strings: one member per MiB (one compressed once), as many members as
    a gzip file may hold."""
    member = gzip.compress(b" " * (1 << 20), compresslevel=9, mtime=0)
    ends = [gzip.compress(part, mtime=0) for part in inside if part]
    return b"".join([*ends[:1 if inside[0] else 0], *[member] * mib,
                     *ends[1 if inside[0] else 0:]])


def sixty_bytes(day: int) -> bytes:
    """Issue 40, 7: a 60-byte file that is not a trace but carries a wall-clock ``ts`` near its
    start (``day`` days after 2001-09-09): the server read the fleet row's day from it."""
    ts = (1_000_000_000 + day * 86_400) * 1_000_000
    return b'{"traceEvents":[{"ph":"X","ts":' + str(ts).encode() + b',"dur":1,"cat":"x"'
