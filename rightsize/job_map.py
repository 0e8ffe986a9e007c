"""``rightsize analyze`` of many traces: each trace analyzed by a worker, the document reduced here.

The unit of work is :func:`analyze_one`, a pure function from one trace file (a
:class:`TraceTask`: its path and what the analysis may use) to a :class:`RankPart`: the reader's
``inputs`` keys, what the job check compares (``loader.JobKey``), the rank's compact summary
(:class:`~rightsize.analyzers.job.summary.RankSummary`: per-step and per-call rows, never the
events) and its share of the document (``build.RankDoc``; the headline sections only from the
rank that turns out to be the primary). :func:`analyze` maps it over the inputs' traces with
:mod:`rightsize.engine` (in this process for one worker, a local spawn pool, or Ray), each worker
holding one trace at a time within a memory budget (a trace too big for it is read over a window
of steps: ``traces/budget.py``), and reduces on this side over the parts alone: the job check,
the job section (``analyzers/job/job.py``), the primary rank and the document, as
:func:`rightsize.pipeline.run` makes it for the same inputs (a test compares them).

:func:`summarize_path`, :func:`summaries` and :func:`job` give the summaries and the job section
alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize import engine
from rightsize.errors import RightsizeError
from rightsize.pipeline import Options

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers.document import Document
    from rightsize.analyzers.document.build import RankDoc
    from rightsize.analyzers.document.job import Job
    from rightsize.analyzers.job.summary import RankSummary
    from rightsize.traces.loader import JobKey


DEFAULT = Options()
HERE = engine.EngineOptions(workers=1)  # in this process, one input after the other
# Traces that total less than this are analyzed in this process unless workers are asked for:
# a spawned worker costs ~1.5 s of start-up (Python, polars, rightsize) on a 2-core machine,
# longer than these take to read (8 DLRM ranks, 7 MB: 1.6 s here, 4.4 s on 2 workers).
IN_PROCESS_BYTES = 100_000_000
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class TraceTask:
    """One trace to analyze and what its analysis may use (pickled to the worker)."""

    path: str
    run_dir: str | None  # the run directory it belongs to (its manifest names the host)
    options: Options
    ncu: pl.DataFrame | None = None  # Nsight Compute rows of the inputs (for every rank)
    gpu_samples: pl.DataFrame | None = None
    budget_bytes: int | None = None  # memory this task may take (None: unbounded)
    summary_only: bool = False  # no share of the document (summaries alone)


@dataclass(frozen=True, slots=True)
class RankPart:
    """What a worker sends back for one trace."""

    entry: dict[str, Any]  # the reader's keys of the file's ``inputs`` entry
    key: JobKey
    summary: RankSummary
    doc: RankDoc | None


@dataclass(frozen=True, slots=True)
class Refusal:
    """A trace the worker could not read (a ``RightsizeError``'s one line, raised again by the
    driver as it would have been raised reading the trace there)."""

    message: str


def analyze_one(task: TraceTask) -> RankPart | Refusal:
    """Read one trace, analyze it as one rank and return its part (runs in the worker)."""
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.analyzers.document.build import rank_doc
    from rightsize.analyzers.job.summary import summarize
    from rightsize.analyzers.metrics.definitions import options_for
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import load_catalog
    from rightsize.traces import loader
    from rightsize.traces.readers import Read, ReadOptions

    o = task.options
    try:
        path = Path(task.path)
        reader = loader.detect(path)
        read = reader.read(path, ReadOptions(step_range=o.step_range, timezone=o.timezone,
                                             lean=o.lean, steps=o.steps,
                                             memory_budget_bytes=task.budget_bytes), None)
        if read.trace is None:
            raise RightsizeError(f"{path}: holds no trace (format {reader.name})")
        trace = read.trace
        if task.run_dir is not None:
            trace = loader.with_host(trace, Path(task.run_dir))
        steps_opt, breakdown_opt = options_for(o.definitions)
        context = Context(
            catalog=o.catalog if o.catalog is not None else load_catalog(),
            ncu=task.ncu, gpu_samples=task.gpu_samples,
            constraints=o.constraints if o.constraints is not None else Constraints(),
            step_options=steps_opt, breakdown_options=breakdown_opt,
            samples_per_step=o.samples_per_step)
        del read
        rank = analyze_trace(trace, context)
    except RightsizeError as exc:
        return Refusal(str(exc))
    return RankPart(dict(Read.of_trace(trace).entry), loader.job_key(trace),
                    summarize(rank), None if task.summary_only else rank_doc(rank))


def analyze(paths: Sequence[str | Path], options: Options = DEFAULT,
            run: engine.EngineOptions | None = None,
            progress: Progress | None = None) -> Document:
    """The document of ``paths`` (as ``rightsize analyze`` takes them), its traces analyzed
    on the engine ``run`` says (default: a local pool of one worker per CPU, at most one per
    trace); the other inputs (Nsight Compute CSV, GPU metric logs, a run's samples) are read
    here."""
    from rightsize.traces.loader import stdin_as_file

    with stdin_as_file(list(paths)) as real:
        return _analyze(real, options, run, progress)


@dataclass(slots=True)
class _Inputs:
    """The inputs sorted out on the driver: traces to map, the rest read."""

    entries: list[dict[str, Any]]  # every file's inputs entry, in input order
    traces: list[tuple[int, Path, Path | None]]  # (entry index, file, run directory)
    run_dirs: list[Path]
    one_run: bool  # every file comes from one run directory (one recording)
    ncu: pl.DataFrame | None = None
    gpu_samples: pl.DataFrame | None = None
    host_samples: pl.DataFrame | None = None


def _analyze(paths: list[Path], options: Options, run: engine.EngineOptions | None,
             progress: Progress | None) -> Document:
    from rightsize.analyzers.analysis import Context  # noqa: F401 - fails early, as run() does
    from rightsize.analyzers.metrics.definitions import options_for
    from rightsize.pipeline import analyze_document

    options_for(options.definitions)  # an unknown definition fails before any reading
    inputs = _sort_out(paths, options, progress)
    if not inputs.traces:  # nothing to map: GPU metric logs or Nsight Compute rows alone
        return analyze_document([str(p) for p in paths], options, progress)
    n = len(inputs.traces)
    run = run or engine.EngineOptions()
    if run.engine == "local" and run.workers is None:
        total = sum(f.stat().st_size for _, f, _ in inputs.traces)
        if total < IN_PROCESS_BYTES:
            run = replace(run, workers=1)
        elif options.memory_budget_bytes:
            run = replace(run, workers=engine.workers_within(options.memory_budget_bytes, n))
    budget = options.memory_budget_bytes or engine.task_budget_bytes(run, n)
    tasks = [TraceTask(str(f), str(r) if r else None, options, inputs.ncu, inputs.gpu_samples,
                       budget) for _, f, r in inputs.traces]
    if run.engine == "ray" and run.item_memory_bytes is None and run.memory_bytes is None:
        run = replace(run, item_memory_bytes=tuple(_request(Path(t.path), budget)
                                                   for t in tasks))
    parts = _map(tasks, run, progress)
    return _reduce(inputs, parts, options)


def _request(path: Path, budget: int) -> int:
    """What a task asks Ray for: the trace's estimated need, at most the budget (a trace
    that needs more is read over a window that fits it)."""
    from rightsize.traces.budget import estimate

    return min(estimate(path).need_bytes, budget)


def _sort_out(paths: list[Path], options: Options, progress: Progress | None) -> _Inputs:
    """Expand the paths, detect each file, read the files that are not traces."""
    import polars as pl

    from rightsize.analyzers.document.metrics import TRACE_FORMATS
    from rightsize.traces import loader, nccl_tests, ncu
    from rightsize.traces.readers import ReadOptions
    from rightsize.traces.samples import read_kind

    files = loader.expand(paths)
    out = _Inputs([], [], [], one_run=all(r is not None for _, r in files))
    ncu_frames: list[pl.DataFrame] = []
    gpu_frames: list[pl.DataFrame] = []
    statuses: dict[Path, str | None] = {}
    for i, (f, run_dir) in enumerate(files):
        reader = loader.detect(f)
        entry: dict[str, Any] = {"path": str(f), "format": reader.name, "bytes": f.stat().st_size}
        if run_dir is not None:
            entry["run_status"] = statuses.setdefault(run_dir, loader.run_status(run_dir))
            if run_dir not in out.run_dirs:
                out.run_dirs.append(run_dir)
        if reader.name in TRACE_FORMATS:
            out.traces.append((i, f, run_dir))
        else:
            if progress:
                progress(f"reading [{i + 1}/{len(files)}] {f.name}")
            read = reader.read(f, ReadOptions(step_range=options.step_range,
                                              timezone=options.timezone, lean=options.lean),
                               None)
            if read.nccl_tests is not None:
                raise nccl_tests.not_a_trace(f)
            if read.ncu is not None:
                ncu_frames.append(read.ncu)
            if read.gpu_samples is not None:
                gpu_frames.append(read.gpu_samples)
            entry.update(read.entry)
        out.entries.append(entry)
    out.one_run = out.one_run and len(out.run_dirs) == 1
    host_frames = []
    for run_dir in out.run_dirs:
        gpu, host = read_kind(run_dir, "gpu"), read_kind(run_dir, "host")
        if gpu.height:
            gpu_frames.append(gpu)
        if host.height:
            host_frames.append(host)
    out.ncu = ncu.combine_ncu(ncu_frames) if ncu_frames else None
    out.gpu_samples = pl.concat(gpu_frames, how="vertical") if gpu_frames else None
    out.host_samples = pl.concat(host_frames, how="vertical") if host_frames else None
    return out


def _map(tasks: list[TraceTask], run: engine.EngineOptions,
         progress: Progress | None) -> list[RankPart]:
    """The parts in input order. Only the best primary candidate seen so far keeps its
    headline sections (most kernel time, the first on a tie), so the driver holds one."""
    from rightsize.traces.budget import size_text

    n = len(tasks)
    where = f"Ray ({run.address or 'auto'})" if run.engine == "ray" else \
        f"{run.workers or engine.default_workers(n)} local worker(s)"
    if progress:
        progress(f"analyzing {n} trace(s) on {where}, at most "
                 f"{size_text(tasks[0].budget_bytes or 0)} each")
    start = time.monotonic()
    parts: list[RankPart | None] = [None] * n
    best: int | None = None
    for done, (i, result) in enumerate(engine.map_unordered(analyze_one, tasks, run), 1):
        if isinstance(result, Refusal):
            raise RightsizeError(result.message)
        if isinstance(result, engine.Failed):
            raise RightsizeError(f"{tasks[i].path}: {result}")
        assert result.doc is not None
        if best is None or _better(result, i, parts[best], best):  # type: ignore[arg-type]
            if best is not None:
                parts[best] = _without_primary(parts[best])  # type: ignore[arg-type]
            best = i
        else:
            result = _without_primary(result)
        parts[i] = result
        if progress:
            progress(f"analyzed {done}/{n} traces ({Path(tasks[i].path).name}, rank "
                     f"{result.key.rank if result.key.rank is not None else '-'}) "
                     f"in {time.monotonic() - start:,.0f} s")
    return [p for p in parts if p is not None]


def _better(a: RankPart, ia: int, b: RankPart, ib: int) -> bool:
    ka, kb = a.doc.kernel_ns, b.doc.kernel_ns  # type: ignore[union-attr]
    return ka > kb or (ka == kb and ia < ib)


def _without_primary(part: RankPart) -> RankPart:
    return part if part.doc is None else replace(part, doc=replace(part.doc, primary=None))


def _reduce(inputs: _Inputs, parts: list[RankPart], options: Options) -> Document:
    """The job check, the job section and the document from the parts."""
    from rightsize.analyzers.analysis import job_of_summaries
    from rightsize.analyzers.document.build import assemble, primary_index, rounded
    from rightsize.analyzers.metrics.host_timeline import host_timeline
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import load_catalog
    from rightsize.traces.loader import check_keys

    if len(parts) > 1 and not inputs.one_run:
        check_keys([p.key for p in parts])
    for (index, _, _), part in zip(inputs.traces, parts, strict=True):
        inputs.entries[index].update(part.entry)
    docs = [p.doc for p in parts if p.doc is not None]
    first = primary_index(docs)
    primary = docs[first].primary if first is not None else None
    catalog = options.catalog if options.catalog is not None else load_catalog()
    constraints = options.constraints if options.constraints is not None else Constraints()
    job = job_of_summaries([p.key.rank for p in parts], [p.summary for p in parts], catalog,
                           constraints.provider, constraints.comm_model)
    host = host_timeline(inputs.host_samples, primary.window_ns if primary else None)
    return rounded(assemble(docs, primary, inputs.entries, options.definitions, host=host,
                            job=job))


def summarize_path(path: str | Path, options: Options = DEFAULT) -> RankSummary:
    """Read one trace, analyze it as one rank and return its summary (raises
    ``RightsizeError`` for a file that is not one trace)."""
    result = analyze_one(TraceTask(str(path), None, options, summary_only=True))
    if isinstance(result, Refusal):
        raise RightsizeError(result.message)
    return result.summary


def _summary_task(item: tuple[str | Path, Options]) -> RankSummary:
    return summarize_path(*item)


def summaries(paths: Sequence[str | Path], options: Options = DEFAULT,
              run: engine.EngineOptions = HERE) -> list[RankSummary]:
    """:func:`summarize_path` of each path, in order, on the engine ``run`` says (default:
    here, one after the other); the first input that fails stops it, named in one line."""
    out = []
    for path, result in zip(paths, engine.map_ordered(_summary_task,
                                                      [(p, options) for p in paths], run),
                            strict=True):
        if isinstance(result, engine.Failed):
            raise RightsizeError(f"{path}: {result}")
        out.append(result)
    return out


def job(paths: Sequence[str | Path], options: Options = DEFAULT,
        run: engine.EngineOptions = HERE) -> Job | None:
    """The job section of ``paths`` (the ranks of one job), reduced from their summaries."""
    from rightsize.analyzers.job.job import job_of
    from rightsize.catalog import load_catalog

    catalog = options.catalog if options.catalog is not None else load_catalog()
    provider = options.constraints.provider if options.constraints is not None else None
    model = options.constraints.comm_model if options.constraints is not None else None
    return job_of(summaries(paths, options, run), catalog, provider, model)
