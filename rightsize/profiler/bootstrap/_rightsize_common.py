"""What every part of the injected hook shares: its settings, its log, and writing files.

Used by :mod:`_rightsize_state` (the profiler of ``rightsize run``) and
:mod:`_rightsize_ondemand` (captures of ``--on-demand``). Stdlib only: it runs in the user's
interpreter, which may not have rightsize installed.
"""

import contextlib
import gzip
import itertools
import json
import os
import shutil
import signal
import sys
import threading

DEFAULTS = {
    "run_dir": None,
    "profiler": True,
    "wait": 1,
    "warmup": 1,
    "active": 3,
    "repeat": 1,
    "record_shapes": True,
    "profile_memory": True,
    "with_stack": False,
    "with_flops": True,
    "window_delay_s": 1.0,
    "window_s": 2.0,
    # On SIGTERM/SIGINT a window recorded for less than this is still exported (about 0.25 s
    # of export per second recorded, so the job stops within about a second); a longer one is
    # cut, not exported.
    "flush_on_signal_s": 2.0,
    # --on-demand: no profiler until a capture is asked for (control/ in the run directory)
    "on_demand": False,
    # how often the control thread looks for requests (each look costs the job ~0.16 ms of CPU
    # on the shared 2-core VM, benchmarks/ondemand_overhead.py part 4)
    "capture_poll_s": 0.5,
    # a capture starts at least this long (in the job's own step time) after it was seen, so
    # every rank has seen it by then
    "capture_lead_s": 1.0,
}
LAUNCHERS = {
    "torchrun",
    "accelerate",
    "deepspeed",
    "torch.distributed.run",
    "torch.distributed.launch",
}
LAUNCHER_MODULES = {
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate.commands.launch",
}
WORKER = "DataLoader worker"

# the settings of this process: DEFAULTS updated from RIGHTSIZE_RUN by arm()
CONFIG = dict(DEFAULTS)


def warn(message):
    """Never into the job's own streams: a line in ``<run_dir>/procs/<pid>.log`` instead."""
    run_dir = CONFIG.get("run_dir")
    if not run_dir:
        return
    try:
        with open(os.path.join(run_dir, "procs", f"{os.getpid()}.log"), "a",
                  encoding="utf-8") as fh:
            fh.write(f"rightsize: {message}\n")
    except OSError:
        pass  # nowhere left to say it; the job must not be harmed


def write_json(path, doc, indent=1):
    """Write ``doc`` to ``path`` atomically (a temporary file renamed over it); raises OSError."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"  # several threads write records
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=indent)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def export_trace(save, traces_dir, name, gzip_after=False):
    """Write one trace as torch writes it: ``save(path)`` into ``traces_dir/.tmp``, gzip it when
    ``gzip_after`` (torch's own ``.gz`` rule: JSON first, then compressed), then rename it into
    ``traces_dir``. Returns None, or why it failed (never raises: the job must not be harmed)."""
    tmp_dir = os.path.join(traces_dir, ".tmp")
    tmp = os.path.join(tmp_dir, name)
    try:
        os.makedirs(tmp_dir, exist_ok=True)
        if gzip_after:
            save(tmp + ".json")
            with open(tmp + ".json", "rb") as fin, gzip.open(tmp, "wb", compresslevel=6) as out:
                shutil.copyfileobj(fin, out, 1 << 20)
            os.remove(tmp + ".json")
        else:
            save(tmp)
        os.replace(tmp, os.path.join(traces_dir, name))
    except Exception as exc:  # noqa: BLE001 - a failed export must not break the job
        return f"trace export failed: {exc!r}"
    return None


def chrome_saver(prof):
    """``(save, gzip_after)`` for :func:`export_trace`: the profile's own Chrome-trace export
    with the metadata torch keeps for it, as ``profile.export_chrome_trace`` does, gzipped after;
    on a torch without that inner exporter, its public export (which gzips a ``.gz`` path)."""
    inner = getattr(prof, "profiler", None)
    if inner is None or not hasattr(inner, "export_chrome_trace"):
        return prof.export_chrome_trace, False
    metadata = getattr(prof, "_trace_metadata", None)

    def save(path):
        if metadata is None:
            inner.export_chrome_trace(path)
        else:
            inner.export_chrome_trace(path, metadata)

    return save, True


@contextlib.contextmanager
def signals_held():
    """Hold SIGTERM and SIGINT while the profiler changes state (start, step, stop): our handler
    stops the profiler, and one that ran in the middle of a schedule transition would find it
    half-changed (torch asserts "Expected record to be set") and lose the window. A held signal
    is delivered the moment the call returns, so the job still stops at once."""
    held = {signal.SIGTERM, signal.SIGINT}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):  # not POSIX: nothing to hold
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def quiet_stderr():
    """Divert file descriptor 2 into ``<run_dir>/procs/<pid>.log`` while the profiler starts,
    steps its schedule or stops: Kineto and c10 print status lines there ("profiler_start",
    "Memory block of unknown size ...") that the job would not print without rightsize. Only
    for those calls, on the thread that makes them; anything another thread of the job writes
    to stderr in that instant lands in the same log file."""
    run_dir = CONFIG.get("run_dir")
    if not run_dir:
        yield
        return
    try:
        sys.stderr.flush()
        target = open(os.path.join(run_dir, "procs", f"{os.getpid()}.log"), "ab")  # noqa: SIM115
        saved = os.dup(2)
        os.dup2(target.fileno(), 2)
    except (OSError, ValueError):
        yield  # cannot divert: the lines reach stderr, the job is not harmed
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        target.close()


def env_int(name):
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def trace_name(rank, pid, window):
    suffix = "" if window == 1 else f".w{window}"  # same rule as rightsize.rundir.trace_name
    return f"rank{rank}.pid{pid}{suffix}.pt.trace.json.gz"


def trace_only(with_stack=None):
    """``experimental_config=_ExperimentalConfig(trace_only=True)`` where torch has it (2.13):
    the stop, which runs inside the job's step that closes the window, then skips building the
    Python-side events behind ``events()`` and ``key_averages()``, which rightsize never reads
    (it only exports the trace). The exported trace is the same (pytorch#184306; checked event
    for event, tests/profiler/test_trace_only.py). Not with stacks: torch would warn and build
    the events anyway."""
    if CONFIG["with_stack"] if with_stack is None else with_stack:
        return {}
    try:
        from torch._C._profiler import _ExperimentalConfig

        return {"experimental_config": _ExperimentalConfig(trace_only=True)}
    except (ImportError, TypeError):  # torch before 2.13: no such option
        return {}


def new_profile(schedule, on_trace_ready, with_stack=None):
    """A ``torch.profiler.profile`` with the run's settings (``with_stack`` overrides the run's
    for one capture): the one place ``rightsize run``'s window and an on-demand capture build
    their profiler."""
    from torch.profiler import profile

    stack = CONFIG["with_stack"] if with_stack is None else with_stack
    return profile(schedule=schedule, on_trace_ready=on_trace_ready,
                   record_shapes=CONFIG["record_shapes"], profile_memory=CONFIG["profile_memory"],
                   with_stack=stack, with_flops=CONFIG["with_flops"], **trace_only(stack))


def skip_reason():
    if os.environ.get("RIGHTSIZE_SKIP"):
        return "RIGHTSIZE_SKIP is set"
    argv = list(getattr(sys, "orig_argv", sys.argv))
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if prog in LAUNCHERS:
        return f"launcher process ({prog})"
    for flag, value in itertools.pairwise(argv):
        if flag == "-m" and value in LAUNCHER_MODULES:
            return f"launcher process (-m {value})"
    return None


def teardown_cupti(torch):
    """Have Kineto finalize CUPTI when the window ends (``TEARDOWN_CUPTI=1``), unless the user
    chose. Without it CUPTI stays attached and every later step pays for it: on an H100 (torch
    2.11, CUDA 13.0) a transformer step ran 16-40% slower after the window than without
    rightsize. Left alone before CUDA 12.6, where teardown could crash jobs using CUDA graphs
    (pytorch#146604); torch's own CUDA-graph paths set it to 0 themselves."""
    if "TEARDOWN_CUPTI" in os.environ:
        return
    try:
        major, minor = (int(x) for x in str(torch.version.cuda).split(".")[:2])
    except (AttributeError, TypeError, ValueError):
        return  # a CPU build (cuda is None) or a ROCm one: no CUPTI
    if (major, minor) >= (12, 6):
        os.environ["TEARDOWN_CUPTI"] = "1"
