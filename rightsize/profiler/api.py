"""``rightsize.step()`` and ``rightsize.profile()``: control from inside the script.

Under ``rightsize run`` these talk to the injected hook of the current process:

* ``rightsize.step()`` marks the end of one step and drives the wait/warmup/active schedule in
  place of the optimizer hook (for loops without ``optimizer.step()``, or with several);
* ``with rightsize.profile(): ...`` records exactly the block, each ``rightsize.step()`` inside
  it being one ``ProfilerStep``.

Without ``rightsize run``, ``step()`` is a no-op outside a ``profile()`` block, and ``profile()``
records the block into a fresh run directory (traces and manifest; no samples) that
``rightsize analyze`` reads like any other. Importing this module imports neither torch nor
polars.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from rightsize.rundir import (
    create_run_dir,
    default_run_dir,
    new_manifest,
    read_proc_records,
    trace_paths,
    write_manifest,
)

_HOOK_MODULE = "_rightsize_inject"
_BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap"


def step() -> None:
    """One step ended: advance the profiler schedule (no-op when nothing is profiling)."""
    hook = sys.modules.get(_HOOK_MODULE)
    if hook is not None:
        hook.step()


@contextlib.contextmanager
def profile(out: str | Path | None = None) -> Iterator[Path]:
    """Record the block with PyTorch Profiler; yields the run directory.

    Under ``rightsize run`` the trace goes to that run's directory (``out`` is ignored); otherwise
    to ``out`` (default ``rightsize-runs/<script>-<timestamp>/``), which must not exist yet.
    """
    hook = sys.modules.get(_HOOK_MODULE)
    if hook is not None and os.environ.get("RIGHTSIZE_RUN"):
        hook.begin_block()
        try:
            yield Path(hook._CONFIG["run_dir"])
        finally:
            hook.end_block()
        return
    with _standalone(out) as run_dir:
        yield run_dir


@contextlib.contextmanager
def _standalone(out: str | Path | None) -> Iterator[Path]:
    started = datetime.now(UTC)
    script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "python"
    stamp = started.astimezone().strftime("%Y%m%d-%H%M%S")
    run_dir = create_run_dir(out or default_run_dir(script or "python", stamp))
    manifest = new_manifest(
        {"kind": "in-process", "argv": list(sys.orig_argv), "name": script},
        started.isoformat(),
        {
            "profiler": {"status": "pending"},
            "nvml": {"status": "missing", "reason": "rightsize.profile() without rightsize run"},
            "host": {"status": "missing", "reason": "rightsize.profile() without rightsize run"},
            "analysis": {"status": "skipped", "reason": "run rightsize analyze on this directory"},
        },
    )
    write_manifest(run_dir, manifest)
    importlib.import_module("torch")  # the hook starts with torch; profiling needs it anyway
    hook = sys.modules.get(_HOOK_MODULE) or _load_hook()
    hook.arm({"run_dir": str(run_dir.resolve())})
    hook.begin_block()
    try:
        yield run_dir
    finally:
        hook.end_block()
        hook._CONFIG["run_dir"] = None  # later blocks get their own directory
        traces = [f"traces/{p.name}" for p in trace_paths(run_dir)]
        records = read_proc_records(run_dir)
        manifest["status"] = "done"
        manifest["ended_at"] = datetime.now(UTC).isoformat()
        manifest["files"]["traces"] = traces
        manifest["collectors"]["profiler"] = {
            "status": "collected" if traces else "missing",
            "reason": None if traces else "no trace was written (see procs/)",
            "step_detection": "manual",
            "traces": len(traces),
            "processes": records,
        }
        write_manifest(run_dir, manifest)


def _load_hook() -> ModuleType:
    """Load the injected modules by path (the bootstrap directory is not on ``sys.path``)."""
    module = None
    # each imports the ones before it
    for name in ("_rightsize_common", "_rightsize_state", "_rightsize_ondemand",
                 "_rightsize_environ", _HOOK_MODULE):
        spec = importlib.util.spec_from_file_location(name, _BOOTSTRAP / f"{name}.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {name} from {_BOOTSTRAP}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    assert module is not None
    return module
