"""From input paths to the analysis: the one pipeline every front end goes through.

    read plan  ->  engine.map(analyze_one)  ->  reduce
    (loader)       (job_map, one trace each)    (job_map)

:func:`run` expands and detects the inputs and reads on this side those that are not traces
(``traces/loader.plan``: Nsight Compute kernel rows and GPU samples, which every rank's analysis
uses, and a run directory's host samples); maps :func:`rightsize.job_map.analyze_one` over the
traces with :mod:`rightsize.engine` -- in this process when they are small or when the frames
are wanted, else local worker processes or Ray -- each worker holding one trace at a time within
a memory budget; and reduces the parts (``job_map.reduce``) into the typed document
(:class:`~rightsize.analyzers.document.Document`). ``rightsize analyze``, ``report``, ``run``,
``compare``, ``fleet scan``, ``serve`` and :func:`rightsize.analyze` all call it (a test runs one
two-rank job of a toy reader through each of them). :class:`Options` is where the read options
and the analysis context are made, once.

``analyze_document`` returns the document alone, ``analyze_paths`` its JSON form (the
``rightsize analyze --format json`` contract).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize import engine

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers.analysis import Analysis, Context
    from rightsize.analyzers.document import Document
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import Catalog
    from rightsize.traces.loader import Plan
    from rightsize.traces.readers import ReadOptions

Progress = Callable[[str], None]
# Traces that total less than this are analyzed in this process unless workers are asked for:
# a spawned worker costs ~1.5 s of start-up (Python, polars, rightsize) on a 2-core machine,
# longer than these take to read (8 DLRM ranks, 7 MB: 1.6 s here, 4.4 s on 2 workers).
IN_PROCESS_BYTES = 100_000_000
HERE = engine.EngineOptions(workers=1)  # in this process, one input after the other


@dataclass(frozen=True, slots=True)
class Options:
    """How to read and analyze; every field has the default the CLI has."""

    step_range: str | None = None  # nsys: the NVTX range that marks a step
    timezone: str | None = None  # nvidia-smi logs: the zone of their local timestamps
    catalog: Catalog | None = None  # None: the shipped GPU catalog
    constraints: Constraints | None = None  # None: no sizing targets, 10% memory headroom
    samples_per_step: int | None = None
    definitions: str = "rightsize"  # or "tb-plugin": the TensorBoard plugin's, defects included
    # Read only what the analyzers use (Kineto: no flow events, no pid/tid/api of runtime
    # calls: a fifth of the frames' memory); the Python API, which hands out frames, reads all.
    lean: bool = True
    steps: tuple[int, int] | None = None  # --steps A-B: only these steps of each trace
    # One trace's read and analysis (None: a share of the memory available, engine.py)
    memory_budget_bytes: int | None = None

    def read_options(self, budget_bytes: int | None = None) -> ReadOptions:
        """What the readers are given (``budget_bytes``: the memory one trace may take)."""
        from rightsize.traces.readers import ReadOptions

        return ReadOptions(step_range=self.step_range, timezone=self.timezone, lean=self.lean,
                           steps=self.steps, memory_budget_bytes=budget_bytes)

    def context(self, ncu: pl.DataFrame | None = None,
                gpu_samples: pl.DataFrame | None = None) -> Context:
        """What each rank's analysis may use beyond its trace (raises for an unknown
        ``definitions``, before anything is read)."""
        from rightsize.analyzers.analysis import Context
        from rightsize.analyzers.metrics.definitions import options_for
        from rightsize.analyzers.sizing.projection import Constraints
        from rightsize.catalog import load_catalog

        steps_opt, breakdown_opt = options_for(self.definitions)
        return Context(
            catalog=self.catalog if self.catalog is not None else load_catalog(),
            ncu=ncu, gpu_samples=gpu_samples,
            constraints=self.constraints if self.constraints is not None else Constraints(),
            step_options=steps_opt, breakdown_options=breakdown_opt,
            samples_per_step=self.samples_per_step)


@dataclass(frozen=True, slots=True)
class Result:
    """An analysis: its document and, when asked for and made in this process, the analyzer
    results with the frames they were computed from."""

    document: Document
    analysis: Analysis | None = None
    first_event_ns: int | None = None  # the traces' first host op or kernel (their clock)


def run(paths: list[str | Path], options: Options = Options(),
        progress: Progress | None = None, run_on: engine.EngineOptions | None = None,
        frames: bool = False, warn: Progress | None = None) -> Result:
    """Read ``paths`` (trace files, per-rank directories, run directories, Nsight exports,
    GPU metric logs, Nsight Compute CSV) and analyze them on the engine ``run_on`` says
    (default: this process for traces under :data:`IN_PROCESS_BYTES` in all or when
    ``frames`` are wanted, else one local worker per CPU). ``frames``: keep each rank's
    analyzer results and frames (only when analyzed in this process). ``warn`` is told, in
    one line each and before any trace is read, what memory budget cannot be kept."""
    from rightsize.analyzers.metrics.definitions import options_for
    from rightsize.traces.loader import plan, stdin_as_file

    options_for(options.definitions)  # an unknown definition fails before any reading
    with stdin_as_file(list(paths)) as real:
        p = plan(real, options.read_options(), progress)
        return _analyze(p, options, progress, run_on, frames, warn)


def _analyze(p: Plan, options: Options, progress: Progress | None,
             run_on: engine.EngineOptions | None, frames: bool,
             warn: Progress | None) -> Result:
    from rightsize import job_map

    context = options.context(p.ncu, p.gpu_samples)
    run_on = _engine(p, options, run_on, frames)
    budget = options.memory_budget_bytes or engine.task_budget_bytes(run_on, len(p.traces))
    if warn is not None:
        for line in unkept(p, budget, asked=options.memory_budget_bytes is not None):
            warn(line)
    keep = frames and in_process(run_on)
    tasks = [job_map.TraceTask(str(t.path), str(t.run_dir) if t.run_dir else None,
                               options.read_options(budget), context, keep=keep,
                               summary=len(p.traces) > 1)  # a job's ranks only
             for t in p.traces]
    if run_on.engine == "ray" and run_on.item_memory_bytes is None \
            and run_on.memory_bytes is None:
        run_on = replace(run_on, item_memory_bytes=tuple(
            job_map.request_bytes(t.path, t.memory, budget) for t in p.traces))
    parts = job_map.map_parts(tasks, run_on, progress) if tasks else []
    if progress and not tasks:
        progress("analyzing")
    return job_map.reduce(p, parts, context, options.definitions, keep)


def _engine(p: Plan, options: Options, run_on: engine.EngineOptions | None,
            frames: bool) -> engine.EngineOptions:
    """Where the traces are analyzed when the caller did not say how many workers: here for
    small traces or when the frames are wanted, else a local pool (no more workers than the
    memory budget allows)."""
    run_on = run_on or (HERE if frames else engine.EngineOptions())
    if run_on.engine != "local" or run_on.workers is not None:
        return run_on
    total = sum(t.path.stat().st_size for t in p.traces)
    if total < IN_PROCESS_BYTES:
        return replace(run_on, workers=1)
    if options.memory_budget_bytes:
        return replace(run_on, workers=engine.workers_within(options.memory_budget_bytes,
                                                             len(p.traces)))
    return run_on


def unkept(p: Plan, budget: int, asked: bool = True) -> list[str]:
    """What of ``budget`` (the memory one trace's task may take) cannot be kept, said before
    reading: a budget below the floor of any analysis; when the budget was ``asked`` for, a
    trace whose reader declares no memory need (it cannot be sized)."""
    from rightsize.traces.budget import BASE_BYTES, size_text

    if not p.traces:
        return []
    if budget < BASE_BYTES:
        return [(f"a memory budget of {size_text(budget)} per trace cannot be kept: analyzing "
                 f"any trace takes about {size_text(BASE_BYTES)}; each is read over its "
                 "smallest window (one step, or one slice of its time)")]
    return [f"{t.path}: its reader declares no memory need, so the memory budget "
            f"({size_text(budget)}) cannot be kept for it: it is read whole"
            for t in p.traces if t.memory is None and asked]


def in_process(run_on: engine.EngineOptions) -> bool:
    return run_on.engine == "local" and run_on.workers == 1


def analyze_document(paths: list[str | Path], options: Options = Options(),
                     progress: Progress | None = None,
                     run_on: engine.EngineOptions | None = None) -> Document:
    return run(paths, options, progress, run_on).document


def analyze_paths(paths: list[str | Path], progress: Progress | None = None,
                  step_range: str | None = None, timezone: str | None = None,
                  catalog: Catalog | None = None,
                  constraints: Constraints | None = None,
                  samples_per_step: int | None = None,
                  definitions: str = "rightsize") -> dict[str, Any]:
    """The JSON form of :func:`analyze_document` (plain dicts and lists)."""
    options = Options(step_range, timezone, catalog, constraints, samples_per_step, definitions)
    return analyze_document(paths, options, progress).to_json()
