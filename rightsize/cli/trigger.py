"""``rightsize trigger RUN_DIR``: record the next steps of a job running with ``--on-demand``.

Thin: asks for the capture (:func:`rightsize.profiler.capture.request_capture`), then waits for
it. While ``rightsize run`` runs, it finishes and analyzes the capture itself; when no
``rightsize run`` parent is there (``RIGHTSIZE_ON_DEMAND=1`` under another launcher, or the
parent is gone), this command does, once every listening process has finished its part. Prints
the capture's directory on stdout.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from rightsize.errors import RightsizeError


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--steps", default=5, show_default=True, type=click.IntRange(1, 10_000),
              help="Steps to record (optimizer steps, or rightsize.step() calls).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks too (costs more).")
@click.option("--memory", is_flag=True,
              help="Also record the CUDA caching allocator's history (memory/*.pickle, for "
                   "pytorch.org/memory_viz).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the capture is recorded and analyzed.")
@click.option("--timeout-s", default=300.0, show_default=True, type=click.FloatRange(1),
              help="Give up waiting after this long.")
@click.option("--print-env", is_flag=True,
              help="Print the environment that makes a job started by another launcher listen "
                   "for captures in RUN_DIR (for eval in a shell, or a pod's env).")
def trigger(run_dir: Path, steps: int, with_stack: bool, memory: bool, wait: bool,
            timeout_s: float, print_env: bool) -> None:
    """Record the next STEPS steps of a running job started with rightsize run --on-demand
    (or RIGHTSIZE_ON_DEMAND=1): every process of the job records the same steps, into
    RUN_DIR/captures/<time>/, a run directory that rightsize analyze and report read.

    \b
    Examples:
      rightsize trigger runs/live
      rightsize trigger runs/live --steps 20 --with-stack
      eval "$(rightsize trigger --print-env runs/live)"; torchrun --nproc-per-node 8 train.py
    """
    from rightsize.profiler import capture

    if print_env:
        _print_env(run_dir)
        return
    job = _job_manifest(run_dir)
    if not capture.listeners(run_dir):
        raise RightsizeError(f"{run_dir}: no process of the job is listening for captures (it "
                             "ended, or has not imported torch yet)")
    busy = capture.pending(run_dir)
    if busy:
        raise RightsizeError(f"{run_dir}: capture {busy[0]} is under way; wait for it (or its "
                             "--capture-timeout-s)")
    request = capture.request_capture(run_dir, steps=steps, with_stack=with_stack, memory=memory,
                                      reason="trigger", expires_s=timeout_s)
    click.echo(f"rightsize: capture {request.id} asked for: {steps} step(s) of every process "
               f"of the job", err=True)
    if not wait:
        click.echo(str(request.dir))
        return
    manifest = _wait(run_dir, request.id, job, timeout_s)
    from rightsize.cli.captures import line

    doc = None
    if manifest["collectors"]["analysis"].get("status") == "written":
        from rightsize.analyzers.document import Document
        from rightsize.rundir import ANALYSIS

        doc = Document.from_json(request.dir / ANALYSIS)
    click.echo(f"rightsize: {line(request.dir, manifest, doc)}", err=True)
    click.echo(str(request.dir))
    if doc is not None:
        click.echo(f"rightsize: next: rightsize report {request.dir}", err=True)
    sys.stdout.flush()


def _print_env(run_dir: Path) -> None:
    import shlex

    from rightsize.profiler.launch import BOOTSTRAP_DIR

    click.echo(f"export PYTHONPATH={shlex.quote(str(BOOTSTRAP_DIR))}${{PYTHONPATH:+:$PYTHONPATH}}")
    click.echo("export RIGHTSIZE_ON_DEMAND=1")
    click.echo(f"export RIGHTSIZE_RUN_DIR={shlex.quote(str(run_dir.resolve()))}")


def _job_manifest(run_dir: Path) -> dict[str, Any]:
    from rightsize.rundir import read_manifest

    if not run_dir.is_dir():
        raise RightsizeError(f"{run_dir}: no such run directory")
    job = read_manifest(run_dir)
    settings = job.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    if not (settings.get("on_demand") or job.get("on_demand")):
        raise RightsizeError(f"{run_dir}: not an on-demand run (start the job with rightsize run "
                             "--on-demand, or RIGHTSIZE_ON_DEMAND=1)")
    return job


def _parent_running(run_dir: Path) -> bool:
    """Whether the ``rightsize run`` that started the job still runs (it finishes captures)."""
    from rightsize.profiler.capture import alive
    from rightsize.rundir import read_manifest

    job = read_manifest(run_dir)
    return job.get("status") == "running" and alive(job.get("rightsize_pid"))


def _wait(run_dir: Path, cap_id: str, job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Until the capture's manifest says done; finishing it here when no parent will."""
    from rightsize.cli.captures import AfterCapture, handle
    from rightsize.profiler import capture
    from rightsize.rundir import CAPTURES_DIR, read_json_file

    cap_dir = run_dir / CAPTURES_DIR / cap_id
    deadline = time.monotonic() + timeout_s
    while True:
        manifest = read_json_file(cap_dir / "manifest.json")
        if isinstance(manifest, dict) and manifest.get("status") == "done":
            return manifest
        state = capture.progress(run_dir, cap_id)
        late = time.monotonic() > deadline
        if not _parent_running(run_dir) and (state.complete or state.nobody or late) \
                and capture.claim(cap_dir):
            note = f"finished as it was after --timeout-s {timeout_s:g}" if late else None
            manifest = capture.finish(run_dir, cap_id, job, note)
            handle(run_dir, cap_dir, manifest, AfterCapture(warn=_warn, say=lambda _: None))
            return manifest
        if late:
            _give_up(run_dir, cap_id, state, timeout_s)
        time.sleep(0.2)


def _give_up(run_dir: Path, cap_id: str, state: Any, timeout_s: float) -> None:
    if not state.parts:
        raise RightsizeError(f"capture {cap_id}: no process took it within {timeout_s:g} s (the "
                             "job steps on optimizer.step() or rightsize.step(); has it stepped "
                             "since?); it stays asked for until it expires")
    raise RightsizeError(f"capture {cap_id}: not finished within {timeout_s:g} s (waiting for "
                         f"pid {', '.join(map(str, state.waiting_for)) or '?'}); see "
                         f"{run_dir / 'captures' / cap_id}")


def _warn(message: str) -> None:
    from rightsize.reports.fmt import safe_line

    click.echo(f"rightsize: warning: {safe_line(message)}", err=True)
