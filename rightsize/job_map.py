"""The map and the reduce of the pipeline (``rightsize.pipeline``): one trace per task, then the job.

The unit of work is :func:`analyze_one`, a pure function from one trace file (a
:class:`TraceTask`: its path, the read options and the analysis context) to a :class:`RankPart`:
the reader's ``inputs`` keys, what the job check compares (``loader.JobKey``), the rank's compact
summary (:class:`~rightsize.analyzers.job.summary.RankSummary`: per-step and per-call rows,
never the events) and its share of the document (``build.RankDoc``). :func:`map_parts` maps it
over the traces with :mod:`rightsize.engine` (in this process, a local spawn pool, or Ray), each
worker holding one trace at a time within its memory budget, and keeps the headline sections of
the best primary candidate only; :func:`reduce` makes, from the parts alone, the job check, the
job section (``analyzers/job/job.py``), the primary rank, the host timeline and the document.
In this process a task may keep its rank's analyzer results and frames (``keep``: the Python API).

:func:`summarize_path`, :func:`summaries` and :func:`job` give the summaries and the job section
alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize import engine
from rightsize.errors import RightsizeError
from rightsize.pipeline import HERE, Options

if TYPE_CHECKING:
    from rightsize.analyzers.analysis import Context, RankAnalysis
    from rightsize.analyzers.document.build import RankDoc
    from rightsize.analyzers.document.job import Job
    from rightsize.analyzers.job.summary import RankSummary
    from rightsize.pipeline import Result
    from rightsize.traces.loader import JobKey, Plan
    from rightsize.traces.readers import Memory, ReadOptions
    from rightsize.traces.schema import Trace

DEFAULT = Options()
NEED_SHARE_FOR_THREADS = 4  # two threads where the budget holds 4x the trace's estimated need
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class TraceTask:
    """One trace to analyze and what its analysis may use (pickled to the worker)."""

    path: str
    run_dir: str | None  # the run directory it belongs to (its manifest names the host)
    read: ReadOptions  # with the memory this task may take (None: unbounded)
    context: Context
    keep: bool = False  # keep the rank's analyzer results and frames (in this process only)
    summary_only: bool = False  # no share of the document (summaries alone)
    summary: bool = True  # the rank's summary for the job (False: a trace alone, no job)


@dataclass(frozen=True, slots=True)
class RankPart:
    """What a worker sends back for one trace."""

    entry: dict[str, Any]  # the reader's keys of the file's ``inputs`` entry
    key: JobKey
    summary: RankSummary | None  # None: not asked for (one trace: no job to reduce)
    doc: RankDoc | None
    first_event_ns: int | None  # its first host op or kernel (on its clock)
    analysis: RankAnalysis | None = None  # kept (TraceTask.keep)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A trace the worker could not read (a ``RightsizeError``'s one line, raised again by the
    driver as it would have been raised reading the trace there)."""

    message: str


def analyze_one(task: TraceTask, progress: Progress | None = None) -> RankPart | Refusal:
    """Read one trace, analyze it as one rank and return its part (runs in the worker;
    ``progress`` takes the reader's detail when it runs here)."""
    from rightsize.analyzers.analysis import analyze_trace
    from rightsize.analyzers.document.build import rank_doc
    from rightsize.analyzers.job.summary import summarize
    from rightsize.traces import loader

    try:
        read = loader.read_trace(Path(task.path), Path(task.run_dir) if task.run_dir else None,
                                 task.read, progress)
        trace, entry = read.trace, dict(read.entry)
        assert trace is not None
        del read
        rank = analyze_trace(trace, task.context, _threads(task, trace))
    except RightsizeError as exc:
        return Refusal(str(exc))
    return RankPart(entry, loader.job_key(trace),
                    summarize(rank) if task.summary or task.summary_only else None,
                    None if task.summary_only else rank_doc(rank), _first_ns(rank),
                    rank if task.keep else None)


def _threads(task: TraceTask, trace: Trace) -> int:
    """The rank's sections on two threads (``analysis.section_threads``) only where the task's
    memory has ample room: sections at once hold their working frames at once (175 MB Kineto
    trace: peak +20-25 MiB, ~13% of the file; HTA's rows and the self-time table together
    added 0.5 GiB at 5 GB). A trace read over a window, or whose estimated need (its reader's
    memory model, by its events) is over a quarter of the task's budget, is analyzed on one."""
    from rightsize.analyzers.analysis import section_threads
    from rightsize.traces import loader
    from rightsize.traces.budget import need_for_events

    budget = task.read.memory_budget_bytes
    if budget is None:
        return section_threads()
    memory = getattr(loader.detect(Path(task.path)), "memory", None)
    if trace.meta.window is not None or memory is None \
            or NEED_SHARE_FOR_THREADS * need_for_events(memory, trace.meta.event_count) > budget:
        return 1
    return section_threads()


def _first_ns(rank: RankAnalysis) -> int | None:
    frames = (rank.trace.cpu_ops, rank.trace.kernels)
    firsts = [int(f["ts_ns"].min()) for f in frames if f.height]  # type: ignore[arg-type]
    return min(firsts) if firsts else None


def request_bytes(path: Path, memory: Memory | None, budget: int) -> int:
    """What a task asks Ray for: the trace's estimated need, at most the budget (a trace
    that needs more is read over a window that fits it)."""
    from rightsize.traces.budget import estimate

    return min(estimate(path, memory).need_bytes, budget) if memory is not None else budget


def map_parts(tasks: list[TraceTask], run: engine.EngineOptions,
              progress: Progress | None) -> list[RankPart]:
    """The parts in input order. Only the best primary candidate seen so far keeps its
    headline sections (most kernel time, the first on a tie), so the driver holds one."""
    from rightsize.traces.budget import size_text

    n = len(tasks)
    where = f"Ray ({run.address or 'auto'})" if run.engine == "ray" else \
        f"{run.workers or engine.default_workers(n)} local worker(s)"
    if progress:
        progress(f"analyzing {n} trace(s) on {where}, at most "
                 f"{size_text(tasks[0].read.memory_budget_bytes or 0)} each")
    here = run.engine == "local" and run.workers == 1
    fn = partial(analyze_one, progress=progress) if here and progress else analyze_one
    start = time.monotonic()
    parts: list[RankPart | None] = [None] * n
    best: int | None = None
    for done, (i, result) in enumerate(engine.map_unordered(fn, tasks, run), 1):
        if isinstance(result, Refusal):
            raise RightsizeError(result.message)
        if isinstance(result, engine.Failed):
            if result.exception is not None:  # in this process: the bug as it was raised
                raise result.exception
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


def reduce(plan: Plan, parts: list[RankPart], context: Context, definitions: str,
           keep: bool = False) -> Result:
    """The job check, the job section and the document from the parts (no part: the verdict
    of the GPU samples or kernel rows alone); ``keep``: with the analyzer results."""
    from rightsize.analyzers.analysis import Analysis, counters, job_of_summaries
    from rightsize.analyzers.document.build import assemble, primary_index, rounded
    from rightsize.analyzers.metrics.host_timeline import host_timeline
    from rightsize.pipeline import Result
    from rightsize.traces.loader import check_keys

    if len(parts) > 1 and plan.checks_ranks:
        check_keys([p.key for p in parts])
    for t, part in zip(plan.traces, parts, strict=True):
        plan.entries[t.index].update(part.entry)
    docs = [p.doc for p in parts if p.doc is not None]
    first = primary_index(docs)
    primary = docs[first].primary if first is not None else None
    summaries = [p.summary for p in parts if p.summary is not None]
    job = job_of_summaries([p.key.rank for p in parts], summaries, context.catalog,
                           context.constraints.provider, context.constraints.comm_model) \
        if len(summaries) == len(parts) else None
    host = host_timeline(plan.host_samples, primary.window_ns if primary else None)
    found = None if parts else counters(context)
    doc = rounded(assemble(docs, primary, plan.entries, definitions, counters=found,
                           host=host, job=job))
    ranks = tuple(p.analysis for p in parts if p.analysis is not None)
    firsts = [p.first_event_ns for p in parts if p.first_event_ns is not None]
    return Result(doc, Analysis(ranks, found, host, job) if keep else None,
                  min(firsts) if firsts else None)


def summarize_path(path: str | Path, options: Options = DEFAULT) -> RankSummary:
    """Read one trace, analyze it as one rank and return its summary (raises
    ``RightsizeError`` for a file that is not one trace)."""
    read = options.read_options(options.memory_budget_bytes)
    result = analyze_one(TraceTask(str(path), None, read, options.context(), summary_only=True))
    if isinstance(result, Refusal):
        raise RightsizeError(result.message)
    assert result.summary is not None
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
