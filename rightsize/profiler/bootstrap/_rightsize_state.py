"""Per-process profiler state of the injected hook (see ``_rightsize_inject``).

:class:`State` owns the ``torch.profiler.profile`` of one process: starting it on a schedule or
for a block, exporting each finished window to ``<run_dir>/traces`` exactly as torch writes it,
and keeping ``<run_dir>/procs/<pid>.json`` up to date. Stdlib only besides torch, because it
runs in the user's interpreter.
"""

import contextlib
import os
import sys
import threading
import time
import warnings

from _rightsize_common import (
    CONFIG,
    DEFAULTS,  # noqa: F401 - re-exported: the settings' one home is _rightsize_common
    WORKER,
    chrome_saver,
    env_int,
    export_trace,
    new_profile,
    quiet_stderr,
    signals_held,
    trace_name,
    trace_only,
    warn,
    write_json,
)

# Called once profiling is over in this process (done, failed, cut): the injector restores the
# job's own signal dispositions there.
ON_DONE: list = []


def profiling_over():
    for callback in ON_DONE:
        try:
            callback()
        except Exception:  # noqa: BLE001, S110 - the job must not be harmed
            pass


def remove_hooks(state, *names):
    for name in names:
        handle = state.handles.pop(name, None)
        if handle is not None:
            handle.remove()


# torch.compile(module) warns on every call while any global module hook exists; ours are
# compile-safe (see _compiling) and counted once per top-level call, so that warning is ours to
# keep quiet. The filter matches only that message and goes when the hooks go.
_COMPILE_HOOK_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"


def mute_compile_hook_warning(state):
    warnings.filterwarnings("ignore", message=_COMPILE_HOOK_WARNING, category=UserWarning)
    entry = warnings.filters[0]

    class _Unmute:
        def remove(self):
            with contextlib.suppress(ValueError):
                warnings.filters.remove(entry)
            warnings._filters_mutated()

    state.handles["compile_warning"] = _Unmute()



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
        self.ondemand = None  # _rightsize_ondemand.OnDemand under --on-demand
        self.lock = threading.RLock()
        if announce:
            self.write_record("running")

    # -- profiler life cycle ---------------------------------------------------------------
    def start(self, scheduled):
        from torch.profiler import ProfilerAction, schedule

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
        prof = new_profile(sched, self.on_trace_ready)
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
        name = trace_name(self.rank, self.pid, self.windows)
        save, gzip_after = chrome_saver(prof)
        if not gzip_after:  # an unknown torch: its own export, here
            self._export(save, name, gzip_after)
            return
        thread = threading.Thread(target=self._export, args=(save, name, True),
                                  name="rightsize-trace-export", daemon=True)
        self.exports.append(thread)
        thread.start()

    def _export(self, save, name, gzip_after):
        error = export_trace(save, os.path.join(CONFIG["run_dir"], "traces"), name, gzip_after)
        if error is None:
            self.traces.append(name)  # atomic under the GIL; no lock: finish() joins us
        else:
            self.note(error)
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
        if self.ondemand is not None:
            self.ondemand.close()
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
            "local_rank": env_int("LOCAL_RANK"),
            "world_size": env_int("WORLD_SIZE"),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "python": sys.version.split()[0],
            "torch": getattr(torch, "__version__", None),
            "cuda": getattr(getattr(torch, "version", None), "cuda", None),
            "state": state,
            "step_detection": None if self.mode in ("auto", "off") else self.mode,
            "skipped": self.skip_reason,
            "profiler_steps": self.steps,
            # --on-demand: this process listens for captures (rightsize trigger, --auto)
            "on_demand": self.ondemand is not None and self.mode == "ondemand",
            "traces": list(self.traces),
            "notes": list(self.notes),
        }
        path = os.path.join(run_dir, "procs", f"{self.pid}.json")
        try:
            write_json(path, record)  # the export thread writes it too
        except OSError as exc:
            warn(f"cannot write {path}: {exc}")


# the names tests and older callers know
_trace_name = trace_name
_trace_only = trace_only
