"""Launching the user's job: what to run, with which environment, and how it ended.

The child is the user's own command line, unchanged: ``python SCRIPT ARGS...``, ``python -m
MODULE ARGS...`` (with this interpreter) or any ``COMMAND...`` (torchrun, accelerate launch,
``python -c``). Instrumentation travels in the environment: ``PYTHONPATH`` starts with
``bootstrap/`` (whose ``sitecustomize`` arms the profiler in every Python process of the job and
then steps aside) and ``RIGHTSIZE_RUN`` carries the settings as JSON. So ``sys.argv``,
``__main__`` and ``sys.path`` are what plain ``python script.py`` gives.

The job dies with ``rightsize``: on Linux the child asks for SIGTERM as its parent-death
signal (``prctl(PR_SET_PDEATHSIG)``), so even a SIGKILL of ``rightsize`` leaves no orphan.

Signals: SIGTERM (and SIGHUP, SIGQUIT) sent to ``rightsize`` are forwarded to the child;
SIGINT too, except when the terminal already delivered Ctrl-C to the child (same foreground
process group), so the job sees one interrupt, not two. ``rightsize`` waits for the child and
reports its exit the way a shell does: the exit code, or 128+N for signal N.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rightsize import allocator
from rightsize.errors import RightsizeError

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@dataclass(frozen=True, slots=True)
class Target:
    """What the user asked to run."""

    kind: str  # "script" | "module" | "command"
    argv: tuple[str, ...]  # the child's full command line
    name: str  # short name for the run directory (script stem, module, program)


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How the child ended."""

    returncode: int  # Popen's: negative for a signal
    exit_code: int  # what a shell reports: the code, or 128+N for signal N
    signal_name: str | None  # "SIGTERM", ... when a signal ended it


def resolve_target(
    first: str, args: tuple[str, ...], *, module: bool = False, command: bool = False
) -> Target:
    """Turn ``rightsize run``'s positional arguments into a :class:`Target`.

    Raises :class:`RightsizeError` (one line) for a script that does not exist or a command that
    is not on PATH.
    """
    if module and command:
        raise RightsizeError("use either -m MODULE or -- COMMAND, not both")
    if module:
        return Target("module", (sys.executable, "-m", first, *args), first.rsplit(".", 1)[-1])
    if command:
        program = shutil.which(first)
        if program is None:
            raise RightsizeError(f"{first}: command not found")
        name = Path(first).name
        for arg in args:  # "torchrun ... train.py" is better named after train.py
            if arg.endswith(".py"):
                name = Path(arg).stem
                break
        return Target("command", (first, *args), name)
    path = Path(first)
    if not path.is_file():
        hint = "" if path.suffix == ".py" else f" (to run a command: rightsize run -- {first} ...)"
        raise RightsizeError(f"{first}: no such script{hint}")
    return Target("script", (sys.executable, first, *args), path.stem)


def child_env(config: dict[str, Any], base: dict[str, str] | None = None) -> dict[str, str]:
    """The job's environment: ``base`` plus the bootstrap on PYTHONPATH and RIGHTSIZE_RUN
    (polars' allocator variable as the user had it: ``rightsize.allocator.job_env``)."""
    env = allocator.job_env(dict(os.environ if base is None else base))
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR) + (os.pathsep + existing if existing else "")
    env["RIGHTSIZE_RUN"] = json.dumps(config)
    return env


def exit_status(returncode: int) -> ExitStatus:
    if returncode < 0:
        signum = -returncode
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return ExitStatus(returncode, 128 + signum, name)
    return ExitStatus(returncode, returncode, None)


def run_child(
    argv: tuple[str, ...],
    env: dict[str, str],
    on_start: Callable[[int], None] | None = None,
    cwd: str | None = None,
) -> ExitStatus:
    """Run the job to completion, forwarding signals, and return how it ended."""
    try:
        # The samplers' threads start only after this (on_start), so the fork is clean.
        proc = subprocess.Popen(list(argv), env=env, cwd=cwd,
                                preexec_fn=_die_with_parent(os.getpid()))  # noqa: PLW1509
    except OSError as exc:
        raise RightsizeError(f"{argv[0]}: cannot start: {exc.strerror or exc}") from exc

    def forward(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and _terminal_delivers_sigint():
            return
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {}
    for signum in FORWARDED:
        try:
            previous[signum] = signal.signal(signum, forward)
        except (ValueError, OSError):  # not the main thread, or not settable here
            continue
    try:
        if on_start is not None:
            on_start(proc.pid)
        returncode = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return exit_status(returncode)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """Linux: a ``preexec_fn`` that asks the kernel to send the job SIGTERM when ``rightsize``
    dies (even by SIGKILL), so a job is never orphaned; elsewhere None.

    It runs in the forked child before ``exec`` and survives the exec (not across a setuid
    program). Only async-signal-safe work there: one ``prctl`` through libc, already loaded.
    If rightsize died between the fork and the ``prctl``, the child ends itself at once.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(128 + int(signal.SIGTERM))

    return preexec


def _terminal_delivers_sigint() -> bool:
    """True when we run in the terminal's foreground process group: then Ctrl-C went to the
    child as well, and forwarding it would interrupt the job twice."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False
