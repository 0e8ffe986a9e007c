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

Configuration: the JSON in ``RIGHTSIZE_RUN`` (keys in ``_rightsize_state.DEFAULTS``).
"""

import atexit
import functools
import json
import os
import signal
import sys
import threading
import time

import _rightsize_environ
import _rightsize_ondemand  # here: the bootstrap directory leaves sys.path once armed
import _rightsize_state
from _rightsize_common import skip_reason as _skip_reason
from _rightsize_common import teardown_cupti as _teardown_cupti
from _rightsize_state import CONFIG, WORKER, State, mute_compile_hook_warning, remove_hooks, warn

_CONFIG = CONFIG  # shared with _rightsize_state
_STATE = None  # this process's State once torch is imported
_HOOKED = False  # whether the global hooks are installed in this process (inherited by fork)


def arm(config=None):
    """Read the configuration (``RIGHTSIZE_RUN``, else ``RIGHTSIZE_ON_DEMAND=1``) and wait for
    torch to be imported."""
    if config is None and _rightsize_environ.wanted():
        config = {"on_demand": True, "from_environment": True}
    elif config is None:
        if not os.environ.get("RIGHTSIZE_RUN"):
            return  # RIGHTSIZE_ON_DEMAND=0
        config = json.loads(os.environ["RIGHTSIZE_RUN"])
    _CONFIG.update(config)
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


def _on_torch(torch):
    global _STATE
    try:
        skip = _skip_reason() or (None if _CONFIG["profiler"] else "--no-profiler")
        if skip is None and _CONFIG.get("from_environment"):  # RIGHTSIZE_ON_DEMAND=1
            _CONFIG.update(_rightsize_environ.config())
        _STATE = State(torch, skip)
        if _STATE.mode != "off":
            _teardown_cupti(torch)
            if _CONFIG["on_demand"]:
                _listen(torch)
            else:
                _install_hooks(torch)
    except Exception as exc:  # noqa: BLE001 - the import of torch must succeed whatever happens
        warn(f"profiler disabled in pid {os.getpid()}: {exc!r}")
        if _STATE is not None:
            _STATE.fail(exc)


# -- hooks (module-level functions, so a forked child's fresh State takes them over) --------
def _compiling():
    """Whether dynamo is tracing: it then inlines the hooks into the graph, so they must
    return before touching anything it cannot trace (``os.getpid``, the lock)."""
    return False


def _guarded(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _compiling():  # first: dynamo folds this to a constant and traces nothing else
            return
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
        remove_hooks(state, "forward_pre", "forward", "compile_warning")
        state.start(scheduled=True)
        state.write_record("running")
    else:
        state.advance()


def _count_step(optimizer, args, kwargs):
    """--on-demand's optimizer hook, on every step of the job: kept lean (no lock, no pid check:
    a forked child's state is not "ondemand"); the capture's work takes the lock itself."""
    if _compiling():
        return
    state = _STATE
    ondemand = state.ondemand if state is not None else None
    if ondemand is None or state.mode != "ondemand":
        return
    if state.first_optimizer is None:
        state.first_optimizer = id(optimizer)
        ondemand.detection = "optimizer"
    elif id(optimizer) != state.first_optimizer:
        return  # a second optimizer (GAN, multi-optimizer) does not add steps
    try:
        ondemand.on_step()
    except Exception as exc:  # noqa: BLE001 - never raise into the user's training step
        state.fail(exc)


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
            remove_hooks(state, "forward_pre", "forward", "optimizer", "compile_warning")
            state.write_record("running")
        else:
            state.step()


def _on_forward(module, args, output):
    if _compiling():
        return
    state = _STATE
    if state is not None and state.depth > 0:
        state.depth -= 1


def _install_hooks(torch):
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    global _compiling
    compiler = getattr(torch, "compiler", None)
    if hasattr(compiler, "is_compiling"):
        _compiling = compiler.is_compiling
    state = _STATE
    mute_compile_hook_warning(state)
    state.handles["optimizer"] = optim_module.register_optimizer_step_post_hook(_on_optimizer_step)
    state.handles["forward_pre"] = nn_module.register_module_forward_pre_hook(_on_forward_pre)
    state.handles["forward"] = nn_module.register_module_forward_hook(_on_forward, always_call=True)
    _patch_optimizer_init(optim_module.Optimizer)
    _patch_worker_loop()
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    _install_signal_handlers()


def _listen(torch):
    """--on-demand: only the optimizer step hook (the step counter) and the control thread;
    no profiler, no module hooks, no signal handlers until a capture is asked for."""
    global _HOOKED, _compiling
    if _HOOKED:
        return
    _HOOKED = True
    from torch.optim import optimizer as optim_module

    compiler = getattr(torch, "compiler", None)
    if hasattr(compiler, "is_compiling"):
        _compiling = compiler.is_compiling
    state = _STATE
    state.mode = "ondemand"
    state.ondemand = _rightsize_ondemand.OnDemand(state)
    state.handles["optimizer"] = optim_module.register_optimizer_step_post_hook(_count_step)
    _patch_worker_loop()
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    state.write_record("running")


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
        remove_hooks(state, "optimizer", "forward_pre", "forward", "compile_warning")
        if state.ondemand is not None:
            state.ondemand.close()
    run_dir = _CONFIG.get("run_dir")
    if run_dir:
        procs = os.path.join(run_dir, "procs")
        try:
            open(os.path.join(procs, f"{os.getpid()}.worker"), "w").close()
            # a spawned worker announced itself on importing torch; it is only a worker
            if os.path.exists(os.path.join(procs, f"{os.getpid()}.json")):
                os.remove(os.path.join(procs, f"{os.getpid()}.json"))
        except OSError as exc:
            warn(f"cannot mark DataLoader worker {os.getpid()}: {exc}")


def _after_fork_in_child():
    global _STATE
    parent = _STATE
    if parent is None:
        return
    # A fork inherits the hooks but not the profiler: start afresh, unless the parent was
    # recording (the child's copy of that session cannot be driven safely).
    busy = parent.prof is not None or parent.mode in ("off", "ondemand")
    reason = (parent.skip_reason or ("forked from a process listening for captures"
                                     if parent.mode == "ondemand" else
                                     "forked while the parent was profiling")) if busy else None
    child = State(parent.torch, reason, announce=False)
    child.optimizer_seen = parent.optimizer_seen
    child.handles = dict(parent.handles)
    _STATE = child


def _at_exit():
    if _STATE is not None:
        if _STATE.ondemand is not None and os.getpid() == _STATE.pid:
            _STATE.ondemand.finish("exit")
        _STATE.finish("exit")


# -- signals: cut the trace, then do what the job would have done ----------------------------
# Installed only over the job's defaults (SIG_DFL for SIGTERM, Python's KeyboardInterrupt for
# SIGINT) and only while profiling may still happen: once it is over, or on the first signal,
# the job's own dispositions are back.
_PREVIOUS: dict = {}  # signum -> the disposition ours replaced


def _install_signal_handlers():
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, default in ((signal.SIGTERM, signal.SIG_DFL),
                            (signal.SIGINT, signal.default_int_handler)):
        try:
            if signal.getsignal(signum) == default:
                _PREVIOUS[signum] = signal.signal(signum, _on_signal)
        except (ValueError, OSError):  # not settable in this interpreter
            continue
    _rightsize_state.ON_DONE.append(_restore_signal_handlers)


def _restore_signal_handlers():
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only there; the handler then restores on its first call
    for signum, previous in list(_PREVIOUS.items()):
        try:
            if signal.getsignal(signum) == _on_signal:  # unless the job set its own since
                signal.signal(signum, previous)
        except (ValueError, OSError):
            continue
        _PREVIOUS.pop(signum, None)


def _on_signal(signum, frame):
    previous = _PREVIOUS.get(signum, signal.SIG_DFL)
    if _STATE is not None:
        _STATE.cut(signal.Signals(signum).name)
    _restore_signal_handlers()
    if callable(previous):  # Python's SIGINT handler: KeyboardInterrupt, as without rightsize
        previous(signum, frame)
        return
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
            if state.mode == "ondemand":  # rightsize.step() counts the steps from now on
                remove_hooks(state, "optimizer")
                state.ondemand.detection = "manual"
                state.ondemand.on_step()
                return
            if state.block:
                state.step()
                return
            if state.done:
                return
            if state.mode != "manual":
                if state.mode == "time":
                    state.stop()
                state.mode = "manual"
                remove_hooks(state, "forward_pre", "forward", "optimizer", "compile_warning")
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
    if state is None or state.mode in ("off", "ondemand") or os.getpid() != state.pid:
        return  # under --on-demand only captures record
    try:
        with state.lock:
            state.stop()
            state.mode = "manual"
            remove_hooks(state, "forward_pre", "forward", "optimizer", "compile_warning")
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
            state.join_exports()  # the block's trace is on disk when the block ends
            state.write_record("running")
    except Exception as exc:  # noqa: BLE001 - the job must not be harmed
        state.fail(exc)
