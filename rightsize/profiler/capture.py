"""Captures of a running job: asking for one, following it, and finishing it as a run directory.

A request is a file ``<run_dir>/control/<id>.json`` (:func:`request_capture`); the job's
processes take it up (``bootstrap/_rightsize_ondemand.py``), agree on a start step and record
into ``<run_dir>/captures/<id>/``, each writing its part to ``captures/<id>/procs/<pid>.json``.
:func:`progress` says whether every listening process has finished its part; :func:`finish`
then writes the capture's ``manifest.json`` (the job's command, environment and GPUs, the
``capture`` itself, its collectors) and cuts the job's NVML and host samples to the capture's
window, so ``rightsize analyze captures/<id>`` reads it like any run directory. Exactly one
process finishes a capture (:func:`claim`): the ``rightsize run`` parent while it runs, else
``rightsize trigger``.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError
from rightsize.rundir import (
    CAPTURES_DIR,
    CONTROL_DIR,
    PROCS_DIR,
    create_run_dir,
    new_manifest,
    read_json_file,
    read_proc_records,
    trace_paths,
    write_json_atomic,
    write_manifest,
)

FINAL_STATES = ("done", "failed", "missed")
SAMPLE_MARGIN_NS = 500_000_000  # samples kept either side of the capture's window
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # the job's own check, the same


@dataclass(frozen=True, slots=True)
class Request:
    """A capture asked for."""

    id: str
    dir: Path
    steps: int
    reason: str  # "trigger" | "steady" | "every" | "drift"


def request_capture(run_dir: Path, *, steps: int, with_stack: bool = False,
                    memory: bool = False, reason: str = "trigger", expires_s: float = 600.0,
                    extra: dict[str, Any] | None = None) -> Request:
    """Create ``captures/<id>/`` and ask the job for it (``control/<id>.json``); the id is the
    local time, ``-2``, ``-3``... when taken. Processes that see the request after
    ``expires_s`` ignore it."""
    now = datetime.now(UTC)
    extra = {"job_step_ms": job_step_ms(run_dir), **(extra or {})}
    stamp = now.astimezone().strftime("%Y%m%d-%H%M%S")
    base = run_dir / CAPTURES_DIR
    cap_id, n = stamp, 2
    while (base / cap_id).exists():
        cap_id, n = f"{stamp}-{n}", n + 1
    cap_dir = create_run_dir(base / cap_id)
    request = {"id": cap_id, "steps": steps, "with_stack": with_stack, "memory": memory,
               "reason": reason, "requested_at": now.isoformat(),
               "expires_at_ns": time.time_ns() + int(expires_s * 1e9), **extra}
    write_json_atomic(cap_dir / "request.json", request)
    (run_dir / CONTROL_DIR).mkdir(exist_ok=True)
    write_json_atomic(run_dir / CONTROL_DIR / f"{cap_id}.json", request)
    return Request(cap_id, cap_dir, steps, reason)


def pending(run_dir: Path) -> list[str]:
    """Ids of the captures asked for and not finished yet."""
    control = run_dir / CONTROL_DIR
    if not control.is_dir():
        return []
    return sorted(p.stem for p in control.glob("*.json") if _SAFE_ID.fullmatch(p.stem))


def alive(pid: Any) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return not fh.read().rsplit(") ", 1)[-1].startswith("Z")
    except OSError:
        return True  # no /proc: kill(0) said it exists


def listeners(run_dir: Path) -> list[dict[str, Any]]:
    """The job's processes that listen for captures and still run."""
    return [r for r in read_proc_records(run_dir)
            if r.get("on_demand") is True and r.get("state") == "running" and alive(r.get("pid"))]


def published(run_dir: Path) -> dict[str, Any] | None:
    """The step times the lowest listening rank published (``procs/<pid>.steps``)."""
    for record in sorted(listeners(run_dir), key=lambda r: (r.get("rank") or 0, r["pid"])):
        doc = read_json_file(run_dir / PROCS_DIR / f"{record['pid']}.steps")
        if isinstance(doc, dict) and isinstance(doc.get("step_s"), list):
            return doc
    return None


def job_step_ms(run_dir: Path, window: int = 50) -> float | None:
    """The job's own step time now: the median of its last ``window`` unprofiled steps, ms."""
    doc = published(run_dir)
    durations = [d for d in (doc or {}).get("step_s", [])[-window:] if isinstance(d, int | float)]
    return round(statistics.median(durations) * 1e3, 3) if durations else None


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a capture stands."""

    parts: tuple[dict[str, Any], ...]  # each process's record, by rank then pid
    waiting_for: tuple[int, ...]  # pids of listeners that have not finished their part
    window: dict[str, Any] | None  # the agreed start step (window.json)

    @property
    def complete(self) -> bool:
        return not self.waiting_for and bool(self.parts)

    @property
    def nobody(self) -> bool:
        """No process took the request and none is left to (the job ended, or never listened)."""
        return not self.parts and not self.waiting_for


def progress(run_dir: Path, cap_id: str) -> Progress:
    cap_dir = run_dir / CAPTURES_DIR / cap_id
    parts = sorted((r for r in read_proc_records(cap_dir) if "pid" in r),
                   key=lambda r: (r.get("rank") or 0, r["pid"]))
    final = {r["pid"] for r in parts if r.get("state") in FINAL_STATES}
    live = {r["pid"] for r in listeners(run_dir)}
    # a part not final whose process died will never be: it is not waited for
    waiting = sorted((live - final) | {r["pid"] for r in parts
                                       if r["pid"] not in final and alive(r["pid"])})
    window = read_json_file(cap_dir / "window.json")
    return Progress(tuple(parts), tuple(waiting), window if isinstance(window, dict) else None)


def claim(cap_dir: Path) -> bool:
    """Whether this process is the one to finish the capture (the first to ask)."""
    try:
        fd = os.open(cap_dir / ".finishing", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(str(os.getpid()))
    return True


def finish(run_dir: Path, cap_id: str, job: dict[str, Any], note: str | None = None,
           ) -> dict[str, Any]:
    """Write ``captures/<id>/manifest.json`` from the parts the processes wrote and the job's
    manifest ``job``, with the job's samples cut to the capture's window; the request leaves
    ``control/``. Returns the manifest (``status`` ``analyzing`` when a trace was written,
    else ``done`` with the profiler collector saying why not)."""
    cap_dir = run_dir / CAPTURES_DIR / cap_id
    state = progress(run_dir, cap_id)
    request = read_json_file(cap_dir / "request.json") or {}
    parts = [p for p in state.parts if p.get("state") in FINAL_STATES or not alive(p["pid"])]
    traces = [f"traces/{p.name}" for p in trace_paths(cap_dir)]
    t0 = min((p["t_start_ns"] for p in parts if p.get("t_start_ns")), default=None)
    t1 = max((p["t_end_ns"] for p in parts if p.get("t_end_ns")), default=None)
    samples = _cut_samples(run_dir, cap_dir, t0, t1)
    manifest = new_manifest(
        job.get("command") or {}, _iso(t0) or request.get("requested_at") or "",
        _collectors(job, parts, traces, samples, note),
        rightsize_pid=os.getpid(), ended_at=_iso(t1), duration_s=None if t0 is None or t1 is None
        else round((t1 - t0) / 1e9, 3), environment=job.get("environment"),
        host=job.get("host"), gpus=job.get("gpus") or [], driver=job.get("driver"),
        labels=job.get("labels"), capture=_capture_entry(cap_id, request, state, parts),
        job={"run_dir": str(run_dir.resolve()), "started_at": job.get("started_at")},
    )
    manifest["status"] = "analyzing" if traces else "done"
    manifest["files"]["traces"] = traces
    manifest["files"]["samples"] = samples
    write_manifest(cap_dir, manifest)
    with contextlib.suppress(FileNotFoundError):
        (run_dir / CONTROL_DIR / f"{cap_id}.json").unlink()
    return manifest


def _iso(t_ns: int | None) -> str | None:
    return None if t_ns is None else datetime.fromtimestamp(t_ns / 1e9, UTC).isoformat()


def _capture_entry(cap_id: str, request: dict[str, Any], state: Progress,
                   parts: list[dict[str, Any]]) -> dict[str, Any]:
    recorded = [p for p in parts if p.get("first_step") is not None]
    firsts = sorted({p["first_step"] for p in recorded})
    return {
        "id": cap_id,
        "reason": request.get("reason"),
        "requested_at": request.get("requested_at"),
        "steps": request.get("steps"),
        "with_stack": request.get("with_stack"),
        "memory": request.get("memory"),
        "job_step_ms": request.get("job_step_ms"),
        "start_step": (state.window or {}).get("start_step"),
        "agreed_by": (state.window or {}).get("agreed_by"),
        # every rank recorded the same steps: one first step, one count
        "same_steps": len(firsts) == 1 and len({p.get("recorded_steps") for p in recorded}) == 1,
        "ranks": [{k: p.get(k) for k in ("rank", "pid", "state", "first_step", "recorded_steps",
                                         "traces", "notes")} for p in parts],
    }


def _collectors(job: dict[str, Any], parts: list[dict[str, Any]], traces: list[str],
                samples: list[str], note: str | None) -> dict[str, Any]:
    notes = [n for p in parts for n in p.get("notes") or []] + ([note] if note else [])
    if traces:
        profiler: dict[str, Any] = {"status": "collected", "reason": None}
    else:
        why = "; ".join(notes) or "no process of the job recorded the capture"
        profiler = {"status": "missing", "reason": why}
    modes = sorted({p["step_detection"] for p in parts if p.get("step_detection")})
    profiler |= {"step_detection": modes[0] if len(modes) == 1 else ("mixed" if modes else None),
                 "traces": len(traces), "notes": notes,
                 "processes": [{k: p.get(k) for k in ("pid", "rank", "state", "traces", "notes")}
                               | {"step_detection": p.get("step_detection"),
                                  "profiler_steps": p.get("recorded_steps")} for p in parts]}
    collectors = dict(job.get("collectors") or {})
    out: dict[str, Any] = {"profiler": profiler}
    sampled_by_parent = job.get("rightsize_pid") is not None
    for kind, files in (("nvml", [f for f in samples if "gpu" in f]),
                        ("host", [f for f in samples if "host" in f])):
        was = collectors.get(kind) or {}
        if files:
            out[kind] = {"status": "collected", "reason": None}
        elif isinstance(was, dict) and was.get("status") in ("missing", "failed", "disabled"):
            out[kind] = {"status": was.get("status"), "reason": was.get("reason")}
        elif sampled_by_parent:
            out[kind] = {"status": "missing", "reason": "no samples in the capture's window"}
        else:
            out[kind] = {"status": "missing", "reason": "not sampled: the job was not started "
                                                       "by rightsize run"}
    out["analysis"] = {"status": "pending", "reason": None}
    return out


def _cut_samples(run_dir: Path, cap_dir: Path, t0: int | None, t1: int | None) -> list[str]:
    """The job's samples from ``t0 - margin`` to ``t1 + margin`` into the capture."""
    if t0 is None or t1 is None:
        return []
    import polars as pl

    from rightsize.traces.samples import SAMPLE_FILES, SAMPLES_DIR, read_kind

    written = []
    for kind in SAMPLE_FILES:
        try:
            rows = read_kind(run_dir, kind)
        except RightsizeError:
            continue
        cut = rows.filter(pl.col("t_ns").is_between(t0 - SAMPLE_MARGIN_NS, t1 + SAMPLE_MARGIN_NS))
        if cut.height:
            (cap_dir / SAMPLES_DIR).mkdir(exist_ok=True)
            cut.write_parquet(cap_dir / SAMPLES_DIR / f"{kind}.parquet")
            written.append(f"{SAMPLES_DIR}/{kind}.parquet")
    return written


def captures_bytes(run_dir: Path) -> int:
    """Disk used by every capture of the run (for the disk budget)."""
    total = 0
    for root, _dirs, files in os.walk(run_dir / CAPTURES_DIR):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


