"""On-demand captures inside the job (``rightsize run --on-demand``, ``RIGHTSIZE_ON_DEMAND=1``).

Between captures a process of the job pays for a step counter only: each optimizer step (or
``rightsize.step()``) calls :meth:`OnDemand.on_step`, which keeps the step's duration in a ring
and compares the count with the start of an armed capture. A daemon thread
(``rightsize-control``) looks in ``<run_dir>/control/`` for requests every ``capture_poll_s``
(0.5 s), agrees with the job's other processes on the step they all start recording at, and
publishes the step count and the recent step durations about once a second (``--auto`` reads
them in the ``rightsize`` parent). A capture records steps ``[start, start + steps)`` with
PyTorch Profiler into ``<run_dir>/captures/<id>/traces/``, as ``rightsize run`` records its
window, and exports the trace on a background thread.

The start step is agreed first-come: the first process to take up a request proposes its own
step plus a lead (``capture_lead_s`` of its median step, at least 2 steps) and every other
process takes that value: through torch.distributed's store when a process group is up (one
``compare_set``, atomic across nodes), else through ``captures/<id>/window.json`` (created with
``os.link``, which fails for the second writer). Data-parallel ranks are within a step of each
other, so every rank reaches the start step after it has seen it.

Files::

  control/<id>.json               a request (rightsize trigger, or the --auto policy)
  captures/<id>/window.json       the agreed start step
  captures/<id>/procs/<pid>.json  this process's part: armed -> recording -> exporting -> done
                                  (or missed, failed)
  procs/<pid>.steps               the step count and the durations of the last steps (JSON)

Stdlib only besides torch: it runs in the user's interpreter.
"""

import contextlib
import functools
import json
import math
import os
import re
import threading
import time

from _rightsize_common import (
    CONFIG,
    chrome_saver,
    env_int,
    export_trace,
    new_profile,
    quiet_stderr,
    signals_held,
    trace_name,
    warn,
    write_json,
)

RING = 256  # step durations kept (the --auto window is at most this)
MIN_LEAD_STEPS = 2
MAX_LEAD_STEPS = 100_000
PUBLISH_EVERY_S = 1.0
MAX_FAILURES = 20  # consecutive errors of the control thread before it gives up
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAN = float("nan")


def _record_all(step):
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


class Capture:
    """One request, as this process carries it out."""

    def __init__(self, request, run_dir):
        self.id = request["id"]
        self.steps = max(1, min(int(request.get("steps") or 5), 10_000))
        self.with_stack = bool(request.get("with_stack"))
        self.memory = bool(request.get("memory"))
        self.dir = os.path.join(run_dir, "captures", self.id)
        self.state = "armed"
        self.start_step = None  # agreed
        self.first_step = None  # the first step this process recorded
        self.agreed_by = None  # "store" | "run_dir"
        self.recorded = 0
        self.t_start_ns = None
        self.t_end_ns = None
        self.prof = None
        self.export = None
        self.traces = []
        self.notes = []


class OnDemand:
    """The step counter and control channel of one process of the job."""

    def __init__(self, state):
        self.state = state
        self.run_dir = CONFIG["run_dir"]
        self.steps = 0
        self.detection = None  # "optimizer" | "manual": what counts the steps
        self.ring = [NAN] * RING  # duration of step i in ring[i % RING], seconds
        self.last_s = None
        self.armed = None
        self.recording = None
        self.captures = []  # every capture of this process (their exports are joined at exit)
        self.waiting = []  # requests seen while another capture was under way
        self.seen = set()
        self.published = -1
        self.failures = 0
        self.record_lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="rightsize-control", daemon=True)
        self.thread.start()

    # -- in the job's step ---------------------------------------------------------------------
    def on_step(self):
        """One step of the job. Between captures: a clock read and three stores, no lock (the
        control thread only sets ``armed``, read once here); a capture's start, steps and stop
        take the state's lock."""
        now = time.perf_counter()
        self.steps += 1
        if self.recording is None and self.armed is None:
            self.ring[self.steps % RING] = NAN if self.last_s is None else now - self.last_s
            self.last_s = now
            return
        with self.state.lock:
            self._capture_step(now)

    def _capture_step(self, now):
        slot = self.steps % RING
        cap = self.recording
        if cap is not None:
            self.ring[slot] = NAN  # a profiled step is not the job's own step time
            self._advance(cap)
            self.last_s = time.perf_counter()
            return
        self.ring[slot] = NAN if self.last_s is None else now - self.last_s
        self.last_s = now
        cap = self.armed
        if cap is not None and self.steps >= cap.start_step:
            self._start(cap)
            self.last_s = time.perf_counter()  # the profiler's start is not the next step's

    def _advance(self, cap):
        try:
            cap.recorded += 1
            if cap.recorded >= cap.steps:
                self._stop(cap)
            else:
                with signals_held(), quiet_stderr():
                    self.state._spend_free_warning(cap.prof.step)
        except Exception as exc:  # noqa: BLE001 - a failed capture must not harm the job
            self._fail(cap, exc)

    def _start(self, cap):
        self.armed = None
        cap.first_step = self.steps
        if cap.first_step > cap.start_step:
            cap.notes.append(f"started {cap.first_step - cap.start_step} step(s) late: this "
                             f"process reached step {cap.start_step} before it took the request")
        try:
            prof = new_profile(_record_all, functools.partial(self._ready, cap), cap.with_stack)
            prof.step_num = cap.first_step  # ProfilerStep#N is the job's own step N
            if cap.memory:
                self._memory_history(cap, on=True)
            cap.t_start_ns = time.time_ns()
            with signals_held(), quiet_stderr():
                self.state._spend_free_warning(prof.start)
            cap.prof = prof
            cap.state = "recording"
            self.recording = cap
        except Exception as exc:  # noqa: BLE001 - a failed capture must not harm the job
            self._fail(cap, exc)
            return
        self._write(cap)

    def _stop(self, cap):
        self.recording = None
        cap.t_end_ns = time.time_ns()
        prof, cap.prof = cap.prof, None
        cap.state = "exporting"
        with signals_held(), quiet_stderr():
            prof.stop()  # -> _ready: the export starts on its own thread
        if cap.memory:
            self._memory_history(cap, on=False)
        self._write(cap)

    def _fail(self, cap, exc):
        cap.notes.append(f"capture failed: {exc!r}")
        cap.state = "failed"
        if self.recording is cap:
            self.recording = None
        prof, cap.prof = cap.prof, None
        if prof is not None:
            with contextlib.suppress(Exception):
                prof.stop()
        warn(f"capture {cap.id} failed in pid {os.getpid()}: {exc!r}")
        self._write(cap)

    def _ready(self, cap, prof):
        self.state.rank = self.state._dist_rank()
        save, gzip_after = chrome_saver(prof)
        name = trace_name(self.state.rank, self.state.pid, 1)
        if not gzip_after:
            self._export(cap, save, name, False)
            return
        cap.export = threading.Thread(target=self._export, args=(cap, save, name, True),
                                      name="rightsize-trace-export", daemon=True)
        cap.export.start()

    def _export(self, cap, save, name, gzip_after):
        error = export_trace(save, os.path.join(cap.dir, "traces"), name, gzip_after)
        if error is None:
            cap.traces.append(name)
            cap.state = "done"
        else:
            cap.notes.append(error)
            cap.state = "failed"
        self._write(cap)

    def _memory_history(self, cap, on):
        """``--memory``: the CUDA caching allocator's history (torch.cuda.memory), dumped as
        ``memory/rank{R}.pid{P}.pickle`` (https://pytorch.org/memory_viz reads it)."""
        cuda = getattr(self.state.torch, "cuda", None)
        if cuda is None or not cuda.is_available():
            if on:
                cap.notes.append("--memory: no CUDA device in this process, no allocator history")
            return
        memory = cuda.memory
        if on:
            memory._record_memory_history(max_entries=100_000)
            return
        folder = os.path.join(cap.dir, "memory")
        os.makedirs(folder, exist_ok=True)
        memory._dump_snapshot(os.path.join(folder, f"rank{self.state.rank}.pid{os.getpid()}.pickle"))
        memory._record_memory_history(enabled=None)

    # -- the control thread ------------------------------------------------------------------
    def _watch(self):
        next_publish_s = 0.0
        while not self.stop_event.wait(CONFIG["capture_poll_s"]):
            try:
                self._poll()
                if time.monotonic() >= next_publish_s:
                    self._publish()
                    next_publish_s = time.monotonic() + PUBLISH_EVERY_S
                self.failures = 0
            except Exception as exc:  # noqa: BLE001 - the job must not be harmed
                self.failures += 1
                warn(f"on-demand control in pid {os.getpid()}: {exc!r}")
                if self.failures >= MAX_FAILURES:
                    self.state.note(f"on-demand control stopped after {exc!r}")
                    return

    def _poll(self):
        self.waiting += self._new_requests()
        with self.state.lock:
            busy = self.armed is not None or self.recording is not None
        # the first step has run: the job's process group (if any) is up, a step time is known
        if self.waiting and not busy and self.steps > 0:
            self._arm(Capture(self.waiting.pop(0), self.run_dir))

    def _new_requests(self):
        control = os.path.join(self.run_dir, "control")
        try:
            names = sorted(os.listdir(control))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            if not name.endswith(".json") or name in self.seen:
                continue
            self.seen.add(name)
            try:
                with open(os.path.join(control, name), encoding="utf-8") as fh:
                    request = json.load(fh)
            except (OSError, ValueError) as exc:
                warn(f"control/{name} unreadable: {exc!r}")
                continue
            if (isinstance(request, dict) and _SAFE_ID.fullmatch(str(request.get("id", "")))
                    and int(request.get("expires_at_ns") or 0) > time.time_ns()):
                found.append(request)
        return found

    def _arm(self, cap):
        proposal = self.steps + self._lead_steps()
        cap.start_step, cap.agreed_by = self._agree(cap, proposal)
        self._write(cap)  # "armed", before the job's step can make it "recording"
        with self.state.lock:
            self.armed = cap
            self.captures.append(cap)

    def _lead_steps(self):
        recent = [self.ring[i % RING] for i in range(max(self.steps - 49, 1), self.steps + 1)]
        recent = sorted(d for d in recent if not math.isnan(d))
        if not recent:
            return MIN_LEAD_STEPS
        median_s = max(recent[len(recent) // 2], 1e-6)
        return max(MIN_LEAD_STEPS, min(MAX_LEAD_STEPS, math.ceil(CONFIG["capture_lead_s"] / median_s)))

    def _agree(self, cap, proposal):
        """The start step every process of the job uses: the first proposal made."""
        store = self._store()
        if store is not None:
            try:
                value = store.compare_set(f"rightsize/capture/{cap.id}/start", "", str(proposal))
                start = int(value)
            except Exception as exc:  # noqa: BLE001 - fall back on the run directory
                cap.notes.append(f"torch.distributed store unusable ({exc!r}): run directory used")
            else:
                written = self._agree_by_file(cap, start, "store")
                if written != start:
                    cap.notes.append(f"window.json says step {written}, the store {start}")
                return start, "store"
        return self._agree_by_file(cap, proposal, "run_dir"), "run_dir"

    def _agree_by_file(self, cap, proposal, how):
        path = os.path.join(cap.dir, "window.json")
        tmp = f"{path}.{os.getpid()}.proposal"
        write_json(tmp, {"start_step": proposal, "agreed_by": how, "pid": os.getpid(),
                         "rank": self.state.rank, "t_ns": time.time_ns()})
        try:
            os.link(tmp, path)  # complete when it appears; a second link fails
            return proposal
        except FileExistsError:
            with open(path, encoding="utf-8") as fh:
                return int(json.load(fh)["start_step"])
        finally:
            os.remove(tmp)

    def _store(self):
        dist = getattr(self.state.torch, "distributed", None)
        try:
            if dist is None or not dist.is_available() or not dist.is_initialized():
                return None
            from torch.distributed import distributed_c10d

            return distributed_c10d._get_default_store()
        except (AttributeError, ImportError, RuntimeError, ValueError):
            return None

    def _publish(self):
        steps = self.steps
        if steps == self.published:
            return
        self.published = steps
        first = max(steps - RING + 1, 1)
        durations = [self.ring[i % RING] for i in range(first, steps + 1)]
        cap = self.recording or self.armed
        write_json(os.path.join(self.run_dir, "procs", f"{os.getpid()}.steps"), {
            "pid": os.getpid(), "rank": self.state.rank, "steps": steps, "t_ns": time.time_ns(),
            "first_step": first, "step_s": [None if math.isnan(d) else round(d, 6) for d in durations],
            "capturing": cap.id if cap is not None else None,
        }, indent=None)

    def _write(self, cap):
        """This process's part of the capture, as it is now (the latest write wins)."""
        with self.record_lock:
            record = {
                "pid": os.getpid(), "rank": self.state.rank, "local_rank": env_int("LOCAL_RANK"),
                "world_size": env_int("WORLD_SIZE"), "state": cap.state,
                "step_detection": self.detection, "steps": cap.steps,
                "start_step": cap.start_step, "first_step": cap.first_step,
                "recorded_steps": cap.recorded if cap.first_step is not None else 0,
                "agreed_by": cap.agreed_by, "t_start_ns": cap.t_start_ns,
                "t_end_ns": cap.t_end_ns, "with_stack": cap.with_stack, "memory": cap.memory,
                "traces": list(cap.traces), "notes": list(cap.notes),
                "torch": getattr(self.state.torch, "__version__", None),
            }
            try:
                write_json(os.path.join(cap.dir, "procs", f"{os.getpid()}.json"), record)
            except OSError as exc:
                warn(f"cannot write the record of capture {cap.id}: {exc}")

    # -- the end -----------------------------------------------------------------------------
    def close(self):
        """Stop listening (a DataLoader worker, a forked child)."""
        self.stop_event.set()

    def finish(self, why):
        """At exit: a capture being recorded is stopped and exported, an armed one missed."""
        self.stop_event.set()
        with self.state.lock:
            cap = self.recording
            if cap is not None:
                cap.notes.append(f"the job ended ({why}) after {cap.recorded} of "
                                 f"{cap.steps} steps of the capture")
                self._stop(cap)
            cap = self.armed
            self.armed = None
            if cap is not None:
                cap.state = "missed"
                cap.notes.append(f"the job ended ({why}) at step {self.steps}, before step "
                                 f"{cap.start_step} where the capture was to start")
                self._write(cap)
        for cap in self.captures:
            if cap.export is not None:
                cap.export.join()
        with contextlib.suppress(OSError):
            self._publish()
