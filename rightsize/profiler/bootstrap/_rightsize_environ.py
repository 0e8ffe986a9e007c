"""``RIGHTSIZE_ON_DEMAND=1``: on-demand captures in a job that another launcher started.

With the bootstrap directory first on ``PYTHONPATH`` (``rightsize trigger --print-env RUN_DIR``
prints the lines), every Python process of the job listens for captures as under ``rightsize
run --on-demand``, in the run directory ``RIGHTSIZE_RUN_DIR`` (default
``rightsize-runs/<script>-<id>``, the id being torchrun's ``TORCHELASTIC_RUN_ID`` so that every
rank finds the same directory, else the process id). The first process creates the directory
and writes its ``manifest.json`` (``status`` ``running``, ``on_demand.started_by``
``environment``: no ``rightsize`` parent samples the GPUs or finishes captures, so ``rightsize
trigger`` does).

Stdlib only: it runs in the user's interpreter.
"""

import contextlib
import os
import platform
import re
import socket
import sys
import time
from datetime import datetime, timezone

from _rightsize_common import write_json

_TRUE = ("1", "true", "yes", "on")


def wanted():
    """Whether this process should listen for captures without ``rightsize run``."""
    return (not os.environ.get("RIGHTSIZE_RUN")
            and os.environ.get("RIGHTSIZE_ON_DEMAND", "").strip().lower() in _TRUE)


def config():
    """The hook's settings for ``RIGHTSIZE_ON_DEMAND=1``; creates the run directory."""
    run_dir = os.path.abspath(os.environ.get("RIGHTSIZE_RUN_DIR") or _default_dir())
    for sub in ("traces", "samples", "procs", "control", "captures"):
        os.makedirs(os.path.join(run_dir, sub), exist_ok=True)
    _write_manifest(run_dir)
    os.environ["RIGHTSIZE_RUN_DIR"] = run_dir  # the job's later processes: the same directory
    return {"run_dir": run_dir, "on_demand": True}


def _default_dir():
    argv = list(getattr(sys, "orig_argv", sys.argv))
    script = next((a for a in argv[1:] if a.endswith(".py")), argv[-1] if argv else "python")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(script).removesuffix(".py")) or "job"
    job_id = os.environ.get("TORCHELASTIC_RUN_ID") or str(os.getpid())
    return os.path.join("rightsize-runs", f"{name}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', job_id)}")


def _write_manifest(run_dir):
    """The run's manifest, once: the first process to get here writes it (``os.link``)."""
    path = os.path.join(run_dir, "manifest.json")
    if os.path.exists(path):
        return
    now = datetime.now(timezone.utc).isoformat()  # noqa: UP017 - any Python the job runs
    argv = list(getattr(sys, "orig_argv", sys.argv))
    why = "not sampled: the job was not started by rightsize run"
    manifest = {
        "schema_version": 1,
        "tool": {"name": "rightsize", "version": None},
        "status": "running",
        "command": {"kind": "environment", "argv": argv,
                    "name": os.path.basename(run_dir).rsplit("-", 1)[0]},
        "cwd": os.getcwd(),
        "started_at": now,
        "exit": None,
        "on_demand": {"started_by": "environment", "pid": os.getpid()},
        "environment": {"python": platform.python_version(), "python_executable": sys.executable},
        "host": {"hostname": socket.gethostname()},
        "gpus": [],
        "settings": {"on_demand": True},
        "collectors": {"profiler": {"status": "pending"},
                       "nvml": {"status": "missing", "reason": why},
                       "host": {"status": "missing", "reason": why},
                       "analysis": {"status": "skipped",
                                    "reason": "on-demand: each capture is analyzed in "
                                              "captures/<id>/"}},
        "files": {"traces": [], "samples": [], "analysis": None},
    }
    tmp = f"{path}.{os.getpid()}.{time.time_ns()}"
    write_json(tmp, manifest)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process of the job was first
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)
