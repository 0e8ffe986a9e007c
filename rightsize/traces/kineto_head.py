"""What a Kineto trace's first bytes say of the job it is one rank of, without reading the rest.

Input: the file's head (up to 256 kB, inflated): torch writes ``distributedInfo`` and
``deviceProperties`` before ``traceEvents``. Output: a
:class:`~rightsize.traces.readers.JobHead` (rank, world size, backend, device names, the first
wall-clock event time, each None when the head does not say) or None for a head that is not a
Kineto trace's. ``rightsize fleet scan`` groups the ranks of one recording by it
(``fleet/discover.py``); serve dates old uploads by its start.
"""

from __future__ import annotations

import json
import re

from rightsize.traces.readers import JobHead

_DIST = re.compile(rb'"distributedInfo"\s*:\s*')
_PROPS = re.compile(rb'"deviceProperties"\s*:\s*')
_TS = re.compile(rb'"ts"\s*:\s*"?(-?[0-9][0-9.eE+]*)')
_EPOCH_MIN_US = 946_684_800e6  # 2000-01-01: earlier "timestamps" are not wall-clock


def job_head(head: bytes) -> JobHead | None:
    """The head's distributedInfo, device names and first wall-clock event time."""
    if b'"traceEvents"' not in head and b'"distributedInfo"' not in head:
        return None
    start_us = first_wall_clock_us(head)
    info = _object_after(_DIST, head)
    if not isinstance(info, dict):
        return JobHead(start_us=start_us)
    backend = info.get("backend")
    props = _object_after(_PROPS, head)
    names = sorted({str(d.get("name")) for d in props if isinstance(d, dict) and d.get("name")}
                   ) if isinstance(props, list) else []
    return JobHead(rank=_int(info.get("rank")), world_size=_int(info.get("world_size")),
                   backend=backend if isinstance(backend, str) else None,
                   devices=", ".join(names) or None, start_us=start_us)


def first_wall_clock_us(head: bytes) -> float | None:
    """The first event time in ``head`` that reads as wall-clock microseconds (Kineto writes
    epoch us; relative clocks give None)."""
    events = head.find(b'"traceEvents"')
    if events < 0:
        return None
    for m in _TS.finditer(head, events):
        try:
            ts = float(m.group(1))
        except ValueError:
            continue
        if ts >= _EPOCH_MIN_US:
            return ts
    return None


def _object_after(key: re.Pattern[bytes], head: bytes) -> object:
    """The JSON value after ``"key":`` in ``head`` (None when absent or cut off)."""
    m = key.search(head)
    if m is None:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(head[m.end():].decode("utf-8", "replace"))
    except ValueError:
        return None
    return obj


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
