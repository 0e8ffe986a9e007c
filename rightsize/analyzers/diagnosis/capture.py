"""Can this capture support a verdict? Facts about the recorded steps, not about the workload.

Input: one rank's trace, its steps, the classified device work and the exclusive shares.
Output: :class:`Capture` - steps seen, step-to-step variation, how much of the step has anything
recorded, kernels in the steps, start-up work inside the steps, and kernel launches without
recorded kernels. ``rightsize.analyzers.diagnosis.verdict`` turns these into an ``inconclusive``
verdict (with what to record instead) or into the confidence of a verdict. Pure.

**Start-up work** (a cold start, not a steady-state step): the union, inside the step windows, of

* runtime/driver calls that initialise a process' GPU state the first time they run (context
  creation behind the first ``cudaFree``/``cudaDeviceGetStreamPriorityRange``, device memory
  reservation, stream creation, module/library loading, ``cuInit``/``hipInit``) - :data:`INIT_CALLS`;
* host ops and annotations of JIT compilation, autotuning and warm-up regions (nvFuser/NVRTC
  compilation: ``KernelExecutor::compileFusion``, ``FusionKernelRuntime::compileKernel``,
  ``ExecutorDispatch::compile2``, ``getKernelRuntimeFor::compileNewKRT``, any ``::compile...``
  method; TorchDynamo/Inductor compilation, Triton autotuning, cuDNN/MIOpen algorithm search, a
  region named ``warmup``) - :data:`STARTUP_OPS`.

**Sampled traces**: the share of the host ops a trace numbers that it holds
(:func:`ops_kept_pct`) and how many of them follow the op numbered just before
(:func:`ids_in_sequence_pct`); a trace sampled after recording keeps few, scattered, and the
time between its kept events is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis.shares import waiting
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps
from rightsize.traces.schema import Trace

INIT_CALLS = (r"^(cudaFree|cudaMalloc|cudaDeviceGetStreamPriorityRange|cudaStreamCreate\w*|"
              r"cudaGetDeviceCount|cudaSetDevice|cudaHostAlloc|cuInit|cuDevicePrimaryCtxRetain|"
              r"cuCtxCreate\w*|cuModuleLoad\w*|cuLibraryLoad\w*|hipInit|hipMalloc|hipFree|"
              r"hipStreamCreate\w*|hipModuleLoad\w*|hipHostMalloc)(_v\d+)?$")
STARTUP_OPS = (r"(?i)(compileFusion|::compile|NVRTC|CompileProgram|autotun|cudnnFind|miopenFind|"
               r"torch/_dynamo/convert_frame|torch/_inductor/compile_fx|async_compile|"
               r"triton/compiler|warm-?up)")
LAUNCH_CALLS = r"(LaunchKernel|cudaLaunch|hipLaunch|hipExtModuleLaunchKernel|cuLaunch)"
# PyTorch numbers the host ops and annotations it records (Kineto ``External id``); recent
# versions hand each thread a block of ids (HTA's CPU-only rank: its two gloo threads' first
# ids are 1,025 and 1,537). An unfiltered trace leaves at most a partly used block per thread
# unseen (every other shared trace: all of its id range once that is forgiven), a filtered one
# most of its range (HTA's sampled TorchRec rank: 1.4% kept; its cut CPU-only rank: 0.3%).
ID_BLOCK = 512


@dataclass(frozen=True, slots=True)
class Capture:
    steps: int
    step_cv: float  # standard deviation / mean of the step durations (0 for one step)
    recorded_pct: float  # of the step time: anything recorded (100 - the idle share)
    kernels: int | None  # kernels of the primary device in the steps; None for a CPU-only run
    startup_pct: float  # of the step time: start-up work (see the module docstring)
    startup_top: tuple[tuple[str, float], ...]  # (name, ms inside the steps), largest first
    launches_without_kernels: int  # GPU launch calls in a trace that recorded no kernel
    host_recorded: bool = True  # the trace holds host ops (activities included CPU)
    python_recorded: bool = False  # ... and Python functions (with_stack=True)
    waiting_pct: float = 0.0  # of the step time: idle, the host in a blocking Python call
    ops_kept_pct: float | None = None  # of the host ops numbered in the trace's id range
    ids_in_sequence_pct: float | None = None  # of its kept ids, those whose id - 1 is kept too


def _spans(df: pl.DataFrame) -> iv.Intervals:
    return iv.union(iv.from_durations(df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()))


def ops_kept_pct(cpu_ops: pl.DataFrame, since_ns: int | None = None) -> float | None:
    """The share (%) of the host ops the trace numbers (``External id``) that it holds, a
    partly used block of ids per thread (:data:`ID_BLOCK`) forgiven; None without ids (Nsight
    Systems ranges, Python frames); ``since_ns``: only the ops begun from then on."""
    ops = _numbered(cpu_ops, since_ns)
    ids = ops["external_id"].unique()
    if ids.len() < 2:
        return None
    span = int(ids.max()) - int(ids.min()) + 1  # type: ignore[arg-type]
    missing = max(0, span - ids.len() - ID_BLOCK * (ops["tid"].n_unique() + 1))
    return 100.0 * ids.len() / (ids.len() + missing)


def ids_in_sequence_pct(cpu_ops: pl.DataFrame, since_ns: int | None = None) -> float | None:
    """Of the kept ids after the first, the share (%) whose id - 1 is kept too: a sampled trace
    keeps scattered ops with their children (HTA's sampled ranks: 38%), an unfiltered one all
    but a thread's first op in each block (93-100% in the shared traces), a trace built by hand
    or cut into whole pieces runs of them; None with fewer than two ids."""
    # polars' sorted unique: numpy 2.4's np.unique takes 0.15 s over 200k ids (a hash pass)
    ids = _numbered(cpu_ops, since_ns)["external_id"].unique().sort().to_numpy()
    if len(ids) < 2:
        return None
    return 100.0 * float((np.diff(ids) == 1).sum()) / (len(ids) - 1)


def _numbered(cpu_ops: pl.DataFrame, since_ns: int | None) -> pl.DataFrame:
    """The host ops and annotations with an ``External id`` (begun at or after ``since_ns``)."""
    ops = cpu_ops.filter(pl.col("cat").is_in(("cpu_op", "user_annotation"))
                         & pl.col("external_id").is_not_null())
    return ops if since_ns is None else ops.filter(pl.col("ts_ns") >= since_ns)


def launches(trace: Trace) -> int:
    """Kernel launch calls in the trace (a GPU job, whether or not its kernels were recorded)."""
    return int(trace.runtime.select(pl.col("name").str.contains(LAUNCH_CALLS).sum()).item())


def check(trace: Trace, steps: Steps, work: pl.DataFrame | None, idle_pct: float,
          step_ns: int, on_gpu: bool, idle: iv.Intervals | None = None) -> Capture:
    """Facts about the capture; ``work``: the classified kernels (None for a CPU-only run);
    ``idle``: the idle share's intervals (blocking calls are counted inside them)."""
    window = iv.union(iv.of(steps.start_ns, steps.end_ns))
    dur = steps.dur_ns.astype(np.float64)
    cv = float(dur.std() / dur.mean()) if len(dur) > 1 and dur.mean() > 0 else 0.0
    kernels = None
    if work is not None and on_gpu:
        ts = work["ts_ns"].to_numpy().astype(np.int64)
        inside = np.zeros(len(ts), dtype=bool)
        for a, b in zip(steps.start_ns.tolist(), steps.end_ns.tolist(), strict=True):
            inside |= (ts >= a) & (ts < b)
        kernels = int(inside.sum())
    init = trace.runtime.filter(pl.col("name").str.contains(INIT_CALLS))
    jit = trace.cpu_ops.filter(pl.col("name").str.contains(STARTUP_OPS))
    startup = iv.intersect(window, iv.union_all(_spans(init), _spans(jit)))
    top = []
    for frame in (init, jit):
        for name, g in frame.group_by("name"):
            ms = iv.total(iv.intersect(window, _spans(g))) / 1e6
            if ms > 0:
                top.append((str(name[0]), ms))
    top.sort(key=lambda x: -x[1])
    # a window of steps: the ops begun before it (kept for overlapping it) carry older ids
    since = int(steps.start_ns.min()) if trace.meta.window is not None and steps.count else None
    return Capture(
        steps=steps.count, step_cv=cv, recorded_pct=max(0.0, 100.0 - idle_pct),
        kernels=kernels,
        startup_pct=100.0 * iv.total(startup) / step_ns if step_ns else 0.0,
        startup_top=tuple(top[:3]),
        launches_without_kernels=launches(trace) if on_gpu and work is not None
        and work.height == 0 else 0,
        host_recorded=bool((trace.cpu_ops["cat"] == "cpu_op").any()),
        python_recorded=bool((trace.cpu_ops["cat"] == "python_function").any()),
        waiting_pct=100.0 * iv.total(iv.intersect(window if idle is None else idle,
                                                  waiting(trace))) / step_ns
        if step_ns else 0.0,
        ops_kept_pct=ops_kept_pct(trace.cpu_ops, since),
        ids_in_sequence_pct=ids_in_sequence_pct(trace.cpu_ops, since),
    )
