"""The profiler that ``rightsize run`` injects into every Python process of the job.

Armed by the ``sitecustomize`` beside it; stdlib and torch only, because it runs in the user's
interpreter. Nothing happens until the process imports torch; then, unless the process is a
launcher (torchrun, accelerate launch) or a DataLoader worker:

* **optimizer steps** (training): a global ``register_optimizer_step_post_hook`` starts
  ``torch.profiler.profile`` on the first step of the first optimizer that steps and advances its
  wait/warmup/active schedule on each later step of that optimizer, so ``ProfilerStep#N`` spans
  one optimizer step;
* **time window** (no optimizer constructed, e.g. inference): global module forward hooks open a
  window ``window_delay_s`` after the first top-level module call, mark each top-level call as a
  ``ProfilerStep``, and close it after ``window_s``;
* **manual**: ``rightsize.step()`` replaces the optimizer hook; ``rightsize.profile()`` records a
  block.

All hooks are removed once the profiling is done, so the rest of the job runs unhooked. Traces go
to ``<run_dir>/traces/rank{R}.pid{P}.pt.trace.json.gz`` exactly as torch exports them; what
happened is written to ``<run_dir>/procs/<pid>.json``. A failure here warns once on stderr and
turns the profiler off; it never raises into the user's code.

Configuration: the JSON in ``RIGHTSIZE_RUN`` (keys in :data:`DEFAULTS`).
"""

import atexit
import functools
import itertools
import json
import os
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

_CONFIG = dict(DEFAULTS)
_STATE = None  # this process's _State once torch is imported
_HOOKED = False  # whether the global hooks are installed in this process (inherited by fork)


def arm(config=None):
    """Read the configuration and wait for torch to be imported."""
    _CONFIG.update(config if config is not None else json.loads(os.environ["RIGHTSIZE_RUN"]))
    if "torch" in sys.modules:
        _on_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder())


class _TorchFinder:
    """A meta path finder that runs :func:`_on_torch` right after ``import torch`` completes."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _on_torch(module)

        loader.exec_module = exec_module
        return spec


def _warn(message):
    sys.stderr.write(f"rightsize: {message}\n")


def _skip_reason():
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


def _on_torch(torch):
    global _STATE
    try:
        _STATE = _State(torch, _skip_reason() or (None if _CONFIG["profiler"] else "--no-profiler"))
        if _STATE.mode != "off":
            _install_hooks(torch)
    except Exception as exc:  # noqa: BLE001 - the import of torch must succeed whatever happens
        _warn(f"profiler disabled in pid {os.getpid()}: {exc!r}")
        if _STATE is not None:
            _STATE.fail(exc)


class _State:
    """What the profiler is doing in this process."""

    def __init__(self, torch, skip_reason, announce=True):
        self.torch = torch
        self.pid = os.getpid()
        self.rank = int(os.environ.get("RANK") or 0)
        self.mode = "off" if skip_reason else "auto"  # auto|optimizer|time|manual|off
        self.skip_reason = skip_reason
        self.prof = None
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
        self.lock = threading.RLock()
        if announce:
            self.write_record("running")

    # -- profiler life cycle ---------------------------------------------------------------
    def start(self, scheduled):
        from torch.profiler import ProfilerAction, profile, schedule

        if scheduled:
            sched = schedule(
                wait=_CONFIG["wait"],
                warmup=_CONFIG["warmup"],
                active=_CONFIG["active"],
                repeat=_CONFIG["repeat"],
            )
        else:

            def sched(step):
                return ProfilerAction.RECORD

        self.prof = profile(
            schedule=sched,
            on_trace_ready=self.on_trace_ready,
            record_shapes=_CONFIG["record_shapes"],
            profile_memory=_CONFIG["profile_memory"],
            with_stack=_CONFIG["with_stack"],
            with_flops=_CONFIG["with_flops"],
        )
        self.prof.start()

    def advance(self):
        self.prof.step()
        self.steps += 1
        if _CONFIG["repeat"] > 0 and self.windows >= _CONFIG["repeat"] and not self.block:
            self.stop()
            self.done = True
            _remove_hooks(self, "optimizer", "forward_pre", "forward")

    def stop(self):
        prof, self.prof = self.prof, None
        if prof is not None:
            prof.stop()

    def on_trace_ready(self, prof):
        self.windows += 1
        name = _trace_name(self.rank, self.pid, self.windows)
        traces = os.path.join(_CONFIG["run_dir"], "traces")
        tmp_dir = os.path.join(traces, ".tmp")
        os.makedirs(tmp_dir, exist_ok=True)
        tmp = os.path.join(tmp_dir, name)
        try:
            prof.export_chrome_trace(tmp)
            os.replace(tmp, os.path.join(traces, name))
            self.traces.append(name)
        except Exception as exc:  # noqa: BLE001 - a failed export must not break the job
            self.note(f"trace export failed: {exc!r}")
        self.write_record("running")

    def fail(self, exc):
        self.note(f"profiler turned off after an error: {exc!r}")
        _warn(f"profiler turned off in pid {os.getpid()}: {exc!r}")
        self.mode = "off"
        _remove_hooks(self, "optimizer", "forward_pre", "forward")
        try:
            self.stop()
        except Exception as stop_exc:  # noqa: BLE001 - the job must not be harmed
            self.note(f"stopping the profiler also failed: {stop_exc!r}")

    def finish(self, why):
        """At exit or on SIGTERM: stop, export what was recorded, write the record."""
        if os.getpid() != self.pid:
            return
        with self.lock:
            if self.prof is not None:
                self.note(f"profiler stopped at {why} after {self.steps} steps")
                try:
                    self.stop()
                except Exception as exc:  # noqa: BLE001 - the job must not be harmed
                    self.note(f"stopping the profiler at {why} failed: {exc!r}")
            if not self.traces and self.mode == "auto":
                self.note(
                    "no trace: no optimizer step, and no module call "
                    f"{_CONFIG['window_delay_s']} s after the first one"
                )
            self.write_record("ended")

    # -- bookkeeping ---------------------------------------------------------------------
    def note(self, text):
        self.notes.append(text)

    def write_record(self, state):
        run_dir = _CONFIG.get("run_dir")
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
            with open(path + ".tmp", "w", encoding="utf-8") as fh:
                json.dump(record, fh, indent=1)
            os.replace(path + ".tmp", path)
        except OSError as exc:
            _warn(f"cannot write {path}: {exc}")


def _env_int(name):
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def _trace_name(rank, pid, window):
    suffix = "" if window == 1 else f".w{window}"  # same rule as rightsize.rundir.trace_name
    return f"rank{rank}.pid{pid}{suffix}.pt.trace.json.gz"


# -- hooks (module-level functions, so a forked child's fresh _State takes them over) --------
def _guarded(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        state = _STATE
        if state is None or state.mode == "off" or state.done or os.getpid() != state.pid:
            return
        try:
            with state.lock:
                fn(state, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - never raise into the user's training step
            state.fail(exc)

    return wrapper


@_guarded
def _on_optimizer_step(state, optimizer, args, kwargs):
    if state.mode not in ("auto", "optimizer"):
        return
    if state.first_optimizer is None:
        state.first_optimizer = id(optimizer)
    elif id(optimizer) != state.first_optimizer:
        return  # a second optimizer (GAN, multi-optimizer) does not add steps
    if state.mode == "auto":
        state.mode = "optimizer"
        _remove_hooks(state, "forward_pre", "forward")
        state.start(scheduled=True)
        state.write_record("running")
    else:
        state.advance()


@_guarded
def _on_forward_pre(state, module, args):
    state.depth += 1
    if state.depth != 1:
        return
    now_s = time.monotonic()
    if state.mode == "auto" and not state.optimizer_seen:
        if state.first_forward_s is None:
            state.first_forward_s = now_s
        if now_s - state.first_forward_s >= _CONFIG["window_delay_s"]:
            state.mode = "time"
            state.start(scheduled=False)
            # from when recording began: the first start of Kineto alone can take a second
            state.window_end_s = time.monotonic() + _CONFIG["window_s"]
            state.write_record("running")
    elif state.mode == "time" and state.prof is not None:
        if now_s >= state.window_end_s:
            state.stop()
            state.done = True
            _remove_hooks(state, "forward_pre", "forward", "optimizer")
            state.write_record("running")
        else:
            state.prof.step()
            state.steps += 1


def _on_forward(module, args, output):
    state = _STATE
    if state is not None and state.depth > 0:
        state.depth -= 1


def _remove_hooks(state, *names):
    for name in names:
        handle = state.handles.pop(name, None)
        if handle is not None:
            handle.remove()


def _install_hooks(torch):
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    state = _STATE
    state.handles["optimizer"] = optim_module.register_optimizer_step_post_hook(_on_optimizer_step)
    state.handles["forward_pre"] = nn_module.register_module_forward_pre_hook(_on_forward_pre)
    state.handles["forward"] = nn_module.register_module_forward_hook(_on_forward, always_call=True)
    _patch_optimizer_init(optim_module.Optimizer)
    _patch_worker_loop()
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, _on_sigterm)


def _patch_optimizer_init(cls):
    """Note that an optimizer exists, so a slow first step is not mistaken for inference."""
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if _STATE is not None:
            _STATE.optimizer_seen = True
        original(self, *args, **kwargs)

    cls.__init__ = __init__


def _patch_worker_loop():
    """Turn the profiler off in DataLoader workers (fork and spawn) and leave a marker file."""
    from torch.utils.data._utils import worker

    original = getattr(worker, "_worker_loop", None)
    if original is None:
        _STATE.note("torch.utils.data._utils.worker._worker_loop not found: workers not tracked")
        return

    @functools.wraps(original)
    def _worker_loop(*args, **kwargs):
        _mark_dataloader_worker()
        return original(*args, **kwargs)

    worker._worker_loop = _worker_loop


def _mark_dataloader_worker():
    state = _STATE
    if state is not None:
        state.mode = "off"
        state.skip_reason = WORKER
        _remove_hooks(state, "optimizer", "forward_pre", "forward")
    run_dir = _CONFIG.get("run_dir")
    if run_dir:
        procs = os.path.join(run_dir, "procs")
        try:
            open(os.path.join(procs, f"{os.getpid()}.worker"), "w").close()
            # a spawned worker announced itself on importing torch; it is only a worker
            if os.path.exists(os.path.join(procs, f"{os.getpid()}.json")):
                os.remove(os.path.join(procs, f"{os.getpid()}.json"))
        except OSError as exc:
            _warn(f"cannot mark DataLoader worker {os.getpid()}: {exc}")


def _after_fork_in_child():
    global _STATE
    parent = _STATE
    if parent is None:
        return
    # A fork inherits the hooks but not the profiler: start afresh, unless the parent was
    # recording (the child's copy of that session cannot be driven safely).
    busy = parent.prof is not None or parent.mode == "off"
    reason = (parent.skip_reason or "forked while the parent was profiling") if busy else None
    child = _State(parent.torch, reason, announce=False)
    child.optimizer_seen = parent.optimizer_seen
    child.handles = dict(parent.handles)
    _STATE = child


def _at_exit():
    if _STATE is not None:
        _STATE.finish("exit")


def _on_sigterm(signum, frame):
    if _STATE is not None:
        _STATE.finish("SIGTERM")
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


# -- the public API behind rightsize.step() and rightsize.profile() -------------------------
def step():
    """End of one step, by the user's word: drives the schedule instead of the optimizer hook."""
    state = _STATE
    if state is None or state.mode == "off" or os.getpid() != state.pid:
        return
    try:
        with state.lock:
            if state.block:
                state.prof.step()
                state.steps += 1
                return
            if state.done:
                return
            if state.mode != "manual":
                if state.mode == "time":
                    state.stop()
                state.mode = "manual"
                _remove_hooks(state, "forward_pre", "forward", "optimizer")
            if state.prof is None:
                state.start(scheduled=True)
                state.write_record("running")
            else:
                state.advance()
    except Exception as exc:  # noqa: BLE001 - the job must not be harmed
        state.fail(exc)


def begin_block():
    """Enter ``rightsize.profile()``: record everything until :func:`end_block`."""
    state = _STATE
    if state is None or state.mode == "off" or os.getpid() != state.pid:
        return
    try:
        with state.lock:
            state.stop()
            state.mode = "manual"
            _remove_hooks(state, "forward_pre", "forward", "optimizer")
            state.start(scheduled=False)
            state.block = True
    except Exception as exc:  # noqa: BLE001 - the job must not be harmed
        state.fail(exc)


def end_block():
    state = _STATE
    if state is None or not state.block:
        return
    try:
        with state.lock:
            state.block = False
            state.stop()
            state.write_record("running")
    except Exception as exc:  # noqa: BLE001 - the job must not be harmed
        state.fail(exc)
