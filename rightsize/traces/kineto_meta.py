"""What a Kineto trace says about itself: its envelope -> :class:`~rightsize.traces.schema.TraceMeta`.

Input: the envelope (``distributedInfo``, ``deviceProperties``, ``baseTimeNanoseconds``, the
profiler's settings and versions), the event categories seen and the event count. Output: the
trace's meta (rank, world size, backend, vendor, base time, what the profiler recorded). A
``baseTimeNanoseconds`` that int64 ns cannot hold is an InputError. Used by ``kineto.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rightsize.errors import InputError
from rightsize.traces import kineto_frames as kf
from rightsize.traces.schema import TraceMeta


def meta(path: Path, env: dict[str, Any], cats: set[str], n_events: int) -> TraceMeta:
    """The trace's :class:`TraceMeta` from its envelope (every key but ``traceEvents``), the
    categories its events use and their count."""
    dist = env.get("distributedInfo") or {}
    if not isinstance(dist, dict):
        dist = {}
    base = env.get("baseTimeNanoseconds")
    props = env.get("deviceProperties") or env.get("computeProperties") or []
    props = props if isinstance(props, list) else []
    names = " ".join(str(p.get("name", "")) for p in props if isinstance(p, dict))
    if "roctracer_version" in env or "hip_runtime_version" in env or "AMD" in names:
        vendor = "amd"
    elif not (cats & kf.GPU_CATS):
        vendor = "none"
    else:
        vendor = "nvidia"
    keep = (
        "schemaVersion", "traceName", "displayTimeUnit", "record_shapes", "profile_memory",
        "with_stack", "with_flops", "with_modules", "cupti_version", "cuda_runtime_version",
        "cuda_driver_version", "roctracer_version", "hip_runtime_version", "hip_driver_version",
        "metadata",
    )
    profiler = {k: env[k] for k in keep if k in env}
    if "nccl_version" in dist:
        profiler["nccl_version"] = dist["nccl_version"]
    if "pg_count" in dist:
        profiler["pg_count"] = dist["pg_count"]
    if isinstance(dist.get("pg_config"), list):  # the process groups (name, ranks) it is in
        profiler["pg_config"] = dist["pg_config"]
    return TraceMeta(
        path=str(path),
        format="kineto",
        rank=_int_or_none(dist.get("rank")),
        world_size=_int_or_none(dist.get("world_size")),
        backend=dist.get("backend") if isinstance(dist.get("backend"), str) else None,
        vendor=vendor,
        base_time_ns=_base_time(path, base),
        legacy_names=bool(cats & kf.LEGACY_CATS),
        profiler=profiler,
        event_count=n_events,
    )


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):  # OverflowError: a huge float
        return None


INT64_MAX = (1 << 63) - 1


def _base_time(path: Path, value: Any) -> int | None:
    """``baseTimeNanoseconds``: an epoch time that int64 ns can hold, else an error (adding
    it must never wrap the event times)."""
    base = _int_or_none(value)
    if base is None:
        if value is not None and not isinstance(value, bool):
            raise InputError(path, f"baseTimeNanoseconds is not a whole number: {value!r:.40}")
        return None
    if not 0 <= base <= INT64_MAX:
        raise InputError(path, f"baseTimeNanoseconds {str(value)[:40]} is outside int64 "
                               "nanoseconds")
    return base
