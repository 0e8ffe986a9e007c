"""Per-process profiler state of the injected hook (see ``_rightsize_inject``).

:class:`State` owns the ``torch.profiler.profile`` of one process: starting it on a schedule or
for a block, exporting each finished window to ``<run_dir>/traces`` exactly as torch writes it,
and keeping ``<run_dir>/procs/<pid>.json`` up to date. Stdlib only besides torch, because it
runs in the user's interpreter.
"""

import contextlib
import gzip
import json
import os
import shutil
import signal
import sys
import threading
import time

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
}
WORKER = "DataLoader worker"

# the settings of this process: DEFAULTS updated from RIGHTSIZE_RUN by arm()
CONFIG = dict(DEFAULTS)


# Called once profiling is over in this process (done, failed, cut): the injector restores the
# job's own signal dispositions there.
ON_DONE: list = []


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


def profiling_over():
    for callback in ON_DONE:
        try:
            callback()
        except Exception:  # noqa: BLE001, S110 - the job must not be harmed
            pass


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


def remove_hooks(state, *names):
    for name in names:
        handle = state.handles.pop(name, None)
        if handle is not None:
            handle.remove()


class State:
    """What the profiler is doing in this process."""

    def __init__(self, torch, skip_reason, announce=True):
        self.torch = torch
        self.pid = os.getpid()
        self.rank = int(os.environ.get("RANK") or 0)
        self.mode = "off" if skip_reason else "auto"  # auto|optimizer|time|manual|off
        self.skip_reason = skip_reason
        self.prof = None
        self.recording_since = 0.0  # time.monotonic() when self.prof started
        self.start_took_s = 0.0  # how long its start took (with CUDA: CUPTI, often seconds)
        self.block = False  # inside rightsize.profile()
        self.done = False
        self.windows = 0
        self.traces = []
        self.steps = 0
        self.first_optimizer = None
        self.optimizer_seen = False
        self.depth = 0
        self.first_forward_s = None
        self.window_end_s = None
        self.notes = []
        self.handles = {}
        self.exports = []  # background trace exports still running
        self.lock = threading.RLock()
        if announce:
            self.write_record("running")

    # -- profiler life cycle ---------------------------------------------------------------
    def start(self, scheduled):
        from torch.profiler import ProfilerAction, profile, schedule

        if scheduled:
            sched = schedule(
                wait=CONFIG["wait"],
                warmup=CONFIG["warmup"],
                active=CONFIG["active"],
                repeat=CONFIG["repeat"],
            )
        else:

            def sched(step):
                return ProfilerAction.RECORD

        self.recording_since = time.monotonic()
        prof = profile(
            schedule=sched,
            on_trace_ready=self.on_trace_ready,
            record_shapes=CONFIG["record_shapes"],
            profile_memory=CONFIG["profile_memory"],
            with_stack=CONFIG["with_stack"],
            with_flops=CONFIG["with_flops"],
            **_trace_only(),
        )
        with signals_held(), quiet_stderr():
            self._spend_free_warning(prof.start)
        self.start_took_s = time.monotonic() - self.recording_since
        self.prof = prof

    def step(self):
        """One ``ProfilerStep`` boundary (the schedule may start, stop and export here)."""
        with signals_held(), quiet_stderr():
            self._spend_free_warning(self.prof.step)
        self.steps += 1

    def _spend_free_warning(self, call):
        """Freeing, while memory is recorded, a CPU block allocated before makes c10 warn once
        per process on stderr: free one such block here, inside :func:`quiet_stderr`, so the
        job's own frees stay silent."""
        early = self.torch.empty(16) if CONFIG["profile_memory"] else None
        call()
        del early

    def advance(self):
        self.step()
        if CONFIG["repeat"] > 0 and self.windows >= CONFIG["repeat"] and not self.block:
            self.stop()
            self.done = True
            remove_hooks(self, "optimizer", "forward_pre", "forward", "compile_warning")
            profiling_over()

    def stop(self):
        prof, self.prof = self.prof, None
        if prof is not None:
            with signals_held(), quiet_stderr():
                prof.stop()

    def on_trace_ready(self, prof):
        """A window ended: export it on a background thread, off the job's next step (the JSON
        writing and gzip take about a quarter of a second per second recorded). The process
        waits for it at exit (:meth:`join_exports`)."""
        self.windows += 1
        self.rank = self._dist_rank()
        name = _trace_name(self.rank, self.pid, self.windows)
        inner = getattr(prof, "profiler", None)
        if inner is None or not hasattr(inner, "export_chrome_trace"):
            self._export(lambda path: prof.export_chrome_trace(path), name)  # unknown torch
            return
        metadata = getattr(prof, "_trace_metadata", None)

        def save(path):
            if metadata is None:
                inner.export_chrome_trace(path)
            else:
                inner.export_chrome_trace(path, metadata)

        thread = threading.Thread(target=self._export, args=(save, name, True),
                                  name="rightsize-trace-export", daemon=True)
        self.exports.append(thread)
        thread.start()

    def _export(self, save, name, gzip_after=False):
        traces = os.path.join(CONFIG["run_dir"], "traces")
        tmp_dir = os.path.join(traces, ".tmp")
        tmp = os.path.join(tmp_dir, name)
        try:
            os.makedirs(tmp_dir, exist_ok=True)
            if gzip_after:  # torch's own .gz path: JSON first, then compressed
                save(tmp + ".json")
                with open(tmp + ".json", "rb") as fin, gzip.open(tmp, "wb", compresslevel=6) as out:
                    shutil.copyfileobj(fin, out, 1 << 20)
                os.remove(tmp + ".json")
            else:
                save(tmp)
            os.replace(tmp, os.path.join(traces, name))
            self.traces.append(name)  # atomic under the GIL; no lock: finish() joins us
        except Exception as exc:  # noqa: BLE001 - a failed export must not break the job
            self.note(f"trace export failed: {exc!r}")
        self.write_record("running")

    def join_exports(self, timeout_s=None):
        """Wait for the background exports (at exit: the trace must be complete)."""
        for thread in list(self.exports):
            thread.join(timeout_s)
            if not thread.is_alive():
                self.exports.remove(thread)

    def _dist_rank(self):
        """The process group's rank when one is up (mp.spawn jobs may not set RANK)."""
        dist = getattr(self.torch, "distributed", None)
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except (RuntimeError, ValueError) as exc:
            self.note(f"rank from torch.distributed unavailable: {exc!r}")
        return self.rank

    def fail(self, exc):
        self.note(f"profiler turned off after an error: {exc!r}")
        warn(f"profiler turned off in pid {os.getpid()}: {exc!r}")
        self.mode = "off"
        remove_hooks(self, "optimizer", "forward_pre", "forward", "compile_warning")
        try:
            self.stop()
        except Exception as stop_exc:  # noqa: BLE001 - the job must not be harmed
            self.note(f"stopping the profiler also failed: {stop_exc!r}")
        profiling_over()

    def cut(self, why):
        """On SIGTERM/SIGINT: give up the window being recorded without exporting it (an
        export takes seconds per minute recorded, and the job was asked to stop now); the
        windows already exported stay, and the record says the trace was cut."""
        if os.getpid() != self.pid:
            return
        recording = self.prof is not None
        if recording and time.monotonic() - self.recording_since < CONFIG["flush_on_signal_s"]:
            self.finish(why)  # a short window: exporting it is cheap
            self.mode = "off"
            return
        self.prof = None  # not stopped: stopping collects and exports; the process ends anyway
        self.mode = "off"
        remove_hooks(self, "optimizer", "forward_pre", "forward", "compile_warning")
        if recording:
            self.note(f"trace cut by {why} after {self.steps} steps: the window being recorded "
                      "was not exported, so the job could stop at once")
        self.join_exports(CONFIG["flush_on_signal_s"])  # a finished window, nearly exported
        self.write_record("cut" if recording else "ended")
        profiling_over()

    def finish(self, why):
        """At exit or on SIGTERM: stop, export what was recorded, write the record."""
        if os.getpid() != self.pid:
            return
        self.join_exports()  # before the lock: a finishing export writes the record too
        with self.lock:
            if self.prof is not None:
                self.note(self._stopped_note(why))
                try:
                    self.stop()
                except Exception as exc:  # noqa: BLE001 - the job must not be harmed
                    self.note(f"stopping the profiler at {why} failed: {exc!r}")
            self.join_exports()  # the window stopped just now
            if not self.traces and self.mode == "auto":
                self.note(self._why_no_window())
            self.write_record("ended")
        profiling_over()

    def _stopped_note(self, why):
        """The job ended while recording; in a time window with under two whole module calls,
        why (the profiler's own start can take seconds with CUDA) and what to change."""
        text = f"profiler stopped at {why} after {self.steps} steps"
        if self.mode != "time" or self.steps >= 2:
            return text
        window = CONFIG["window_s"]
        recorded = max(time.monotonic() - self.recording_since - self.start_took_s, 0.0)
        short = max(window - recorded, 0.1)
        return (f"{text}: the job ended {recorded:.1f} s into the {window:g} s time window "
                f"(starting the profiler took {self.start_took_s:.1f} s), so the trace holds "
                f"{self.steps} whole module call(s); let the job run {short:.1f} s longer, or "
                f"rerun with --window-delay-s 0")

    def _why_no_window(self):
        """Why a job without an optimizer got no time window, with the flag that fixes it."""
        delay = CONFIG["window_delay_s"]
        if self.first_forward_s is None:
            return "no trace: no optimizer step and no module call (nothing to record)"
        span = time.monotonic() - self.first_forward_s
        window = max(0.1, round(span / 2, 1))
        return (f"no trace: no optimizer step, and the job ended {span:.1f} s after its first "
                f"module call, before the time window opened ({delay:g} s after it); rerun "
                f"with --window-delay-s 0 --window-s {window:g}")

    # -- bookkeeping ---------------------------------------------------------------------
    def note(self, text):
        self.notes.append(text)

    def write_record(self, state):
        run_dir = CONFIG.get("run_dir")
        if not run_dir or self.skip_reason == WORKER:  # a worker leaves only its marker
            return
        torch = self.torch
        record = {
            "pid": self.pid,
            "ppid": os.getppid(),
            "rank": self.rank,
            "local_rank": _env_int("LOCAL_RANK"),
            "world_size": _env_int("WORLD_SIZE"),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "python": sys.version.split()[0],
            "torch": getattr(torch, "__version__", None),
            "cuda": getattr(getattr(torch, "version", None), "cuda", None),
            "state": state,
            "step_detection": None if self.mode in ("auto", "off") else self.mode,
            "skipped": self.skip_reason,
            "profiler_steps": self.steps,
            "traces": list(self.traces),
            "notes": list(self.notes),
        }
        path = os.path.join(run_dir, "procs", f"{self.pid}.json")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{threading.get_ident()}.tmp"  # the export thread writes it too
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(record, fh, indent=1)
            os.replace(tmp, path)
        except OSError as exc:
            warn(f"cannot write {path}: {exc}")


def _env_int(name):
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def _trace_name(rank, pid, window):
    suffix = "" if window == 1 else f".w{window}"  # same rule as rightsize.rundir.trace_name
    return f"rank{rank}.pid{pid}{suffix}.pt.trace.json.gz"


def _trace_only():
    """``experimental_config=_ExperimentalConfig(trace_only=True)`` where torch has it (2.13):
    the stop, which runs inside the job's step that closes the window, then skips building the
    Python-side events behind ``events()`` and ``key_averages()``, which rightsize never reads
    (it only exports the trace). The exported trace is the same (pytorch#184306; checked event
    for event, tests/profiler/test_trace_only.py). Not with stacks: torch would warn and build
    the events anyway."""
    if CONFIG["with_stack"]:
        return {}
    try:
        from torch._C._profiler import _ExperimentalConfig

        return {"experimental_config": _ExperimentalConfig(trace_only=True)}
    except (ImportError, TypeError):  # torch before 2.13: no such option
        return {}
