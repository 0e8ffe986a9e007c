"""The run directory: the versioned contract between collecting and reporting.

``rightsize run`` writes one directory per run; ``rightsize analyze``/``report`` read it any number
of times later. Layout (see docs/run-directory.md)::

    manifest.json              what ran, where, how it ended, what was collected and why not
    traces/rank0.pid1234.pt.trace.json.gz   PyTorch Profiler traces, exactly as torch wrote them
    samples/gpu.parquet        NVML samples     (rightsize.traces.samples.GPU_SAMPLES)
    samples/gpu_processes.parquet            per-process GPU memory
    samples/host.parquet       psutil samples   (rightsize.traces.samples.HOST_SAMPLES)
    procs/<pid>.json           what the startup hook did in each Python process of the job
    analysis.json              the ``rightsize analyze --format json`` document
    control/<id>.json          --on-demand: a capture asked for, until it is finished
    captures/<id>/             --on-demand: each capture, a run directory of its own

This module is stdlib-only (no polars, no torch) so that every layer may import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rightsize.errors import OutputExistsError, RightsizeError, RunDirError

# Bump when a reader of an older rightsize could misread the directory; additive keys do not.
SCHEMA_VERSION = 1

MANIFEST = "manifest.json"
TRACES_DIR = "traces"
SAMPLES_DIR = "samples"
PROCS_DIR = "procs"
ANALYSIS = "analysis.json"
REPORT_HTML = "report.html"
CONTROL_DIR = "control"  # --on-demand: requests for captures (rightsize trigger, --auto)
CAPTURES_DIR = "captures"  # --on-demand: one run directory per capture
TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")

# The profiler's step schedule (torch.profiler.schedule): skip 1 step, warm up 1, trace 3, once.
# The startup hook (profiler/bootstrap, which cannot import rightsize) keeps a copy that
# tests/profiler/test_bootstrap_pins.py holds equal to this one.
SCHEDULE_DEFAULTS = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}


def trace_name(rank: int, pid: int, window: int = 1) -> str:
    """File name of the trace of one profiling window of one process.

    The first window is ``rank0.pid1234.pt.trace.json.gz``; later ones (``--repeat``, or several
    ``rightsize.profile()`` blocks) add ``.w2``, ``.w3``, ...
    """
    suffix = "" if window == 1 else f".w{window}"
    return f"rank{rank}.pid{pid}{suffix}{TRACE_SUFFIXES[0]}"


_TRACE_RE = re.compile(r"^rank(?P<rank>\d+)\.pid(?P<pid>\d+)(?:\.w(?P<window>\d+))?\.pt\.trace")


def parse_trace_name(name: str) -> tuple[int, int, int] | None:
    """``(rank, pid, window)`` of a trace file name written by :func:`trace_name`, else None."""
    m = _TRACE_RE.match(name)
    if m is None:
        return None
    return int(m["rank"]), int(m["pid"]), int(m["window"] or 1)


def trace_paths(run_dir: str | Path) -> list[Path]:
    """The traces of a run directory, sorted by name (rank, then pid)."""
    base = Path(run_dir) / TRACES_DIR
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))


def capture_dirs(run_dir: str | Path) -> list[Path]:
    """The captures of an on-demand run (``captures/<id>/`` holding a manifest), oldest first
    (ids are timestamps)."""
    base = Path(run_dir) / CAPTURES_DIR
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and (p / MANIFEST).is_file())


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory holding a ``manifest.json``."""
    return (Path(path) / MANIFEST).is_file()


def default_run_dir(name: str, stamp: str, base: str | Path = "rightsize-runs") -> Path:
    """``rightsize-runs/<name>-<stamp>``, with ``-2``, ``-3``... if that is taken."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "run"
    candidate = Path(base) / f"{safe}-{stamp}"
    n = 2
    while candidate.exists():
        candidate = Path(base) / f"{safe}-{stamp}-{n}"
        n += 1
    return candidate


def create_run_dir(path: str | Path) -> Path:
    """Create an empty run directory; refuse an existing non-empty one (a run is never
    overwritten)."""
    run_dir = Path(path)
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise OutputExistsError(run_dir)
    for sub in (TRACES_DIR, SAMPLES_DIR, PROCS_DIR):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    return run_dir


def write_text_atomic(path: str | Path, text: str, mkdir: bool = False) -> Path:
    """The one atomic writer: ``text`` goes to a temporary file beside ``path`` that is then
    renamed over it, so readers see the old file or the whole new one, never half. A replaced
    file keeps its mode and owner; a new one gets the usual 0666 & ~umask (not mkstemp's 0600).
    ``mkdir`` creates missing parent directories. A failure raises a one-line
    :class:`RightsizeError` and leaves no temporary file behind. Callers decide about
    overwriting (``--force``) and about special files (written in place, see ``outputs``)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        old: os.stat_result | None = os.stat(target) if target.exists() else None
        if mkdir:
            target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if old is not None:
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
            with contextlib.suppress(PermissionError):  # only root may give files away
                os.chown(tmp, old.st_uid, old.st_gid)
        os.replace(tmp, target)
    except OSError as exc:
        raise RightsizeError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            with contextlib.suppress(OSError):
                tmp.unlink()
    return target


def write_json_atomic(path: str | Path, doc: Any) -> None:
    """Write ``doc`` as indented JSON with :func:`write_text_atomic`."""
    write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")


def new_manifest(command: dict[str, Any], started_at: str, collectors: dict[str, Any],
                 **extra: Any) -> dict[str, Any]:
    """The manifest of a run that has just started, for ``rightsize run`` and for
    ``rightsize.profile()`` alike: what ran, where, when, and every collector's status so far;
    ``extra`` adds keys (environment, host, settings...) before ``collectors``."""
    from rightsize import __version__

    return {
        "tool": {"name": "rightsize", "version": __version__},
        "status": "running",
        "command": command,
        "cwd": os.getcwd(),
        "started_at": started_at,
        "exit": None,
        **extra,
        "collectors": collectors,
        "files": {"traces": [], "samples": [], "analysis": None},
    }


def write_manifest(run_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json``; ``schema_version`` is set here, not by callers."""
    write_json_atomic(Path(run_dir) / MANIFEST, {"schema_version": SCHEMA_VERSION, **manifest})


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """The manifest of a run directory.

    Raises :class:`RunDirError` (one line) when the manifest is missing, is not a JSON object,
    has no integer ``schema_version``, or was written by a newer rightsize.
    """
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise RunDirError(f"{run_dir}: not a rightsize run directory (no {MANIFEST})")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: unreadable manifest ({exc.__class__.__name__})") from exc
    if not isinstance(doc, dict):
        raise RunDirError(f"{path}: corrupt manifest (not a JSON object)")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunDirError(f"{path}: corrupt manifest (no integer schema_version)")
    if version > SCHEMA_VERSION:
        raise RunDirError(
            f"{run_dir}: run directory schema_version {version} is newer than this rightsize "
            f"supports ({SCHEMA_VERSION}); upgrade rightsize to read it"
        )
    return doc


def read_json_file(path: str | Path) -> Any:
    """The JSON value of a small file the run directory holds, or None when it is missing or
    unreadable (files written atomically by another process: a reader sees none or all)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def read_proc_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """The per-process records the startup hook wrote under ``procs/`` (unreadable ones are
    returned as ``{"file": ..., "error": ...}`` so the manifest can say so)."""
    base = Path(run_dir) / PROCS_DIR
    records: list[dict[str, Any]] = []
    for path in sorted(base.glob("*.json")) if base.is_dir() else []:
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            records.append({"file": path.name, "error": f"unreadable: {exc.__class__.__name__}"})
    return records


Scalar = str | int | float | None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What reports show of a manifest, read once (:func:`run_info`): the command, when it ran,
    how it ended, the environment, and the collectors that did not collect (with why)."""

    argv: tuple[str, ...]
    times: tuple[tuple[str, Scalar], ...]  # cwd, started_at, ended_at, duration_s (when set)
    exit: str | None  # "code 0" / "signal 15"; None while running
    environment: tuple[tuple[str, Scalar], ...]
    not_collected: tuple[tuple[str, str, str], ...]  # (collector, status, reason)


def run_info(manifest: Mapping[str, Any]) -> RunInfo:
    """The :class:`RunInfo` of a manifest as :func:`read_manifest` returns it; keys an older
    manifest lacks are simply absent, never an error."""
    command = _obj(manifest.get("command"))
    env = _obj(manifest.get("environment"))
    exit_ = _obj(manifest.get("exit"))
    collectors = _obj(manifest.get("collectors"))
    return RunInfo(
        argv=tuple(str(a) for a in command.get("argv") or []),
        times=tuple((k, manifest[k]) for k in ("cwd", "started_at", "ended_at", "duration_s")
                    if _scalar(manifest.get(k)) and manifest.get(k) is not None),
        exit=(f"signal {exit_['signal']}" if exit_.get("signal")
              else f"code {exit_.get('code')}") if exit_ else None,
        environment=tuple((str(k), v) for k, v in env.items() if _scalar(v)),
        not_collected=tuple(
            (str(name), str(c.get("status")), str(c.get("reason") or "no reason recorded"))
            for name, c in collectors.items()
            if isinstance(c, Mapping) and c.get("status") not in ("collected", "written", None)),
    )


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _scalar(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))
