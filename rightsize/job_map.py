"""Map the per-rank work over a job's traces: one trace in, one compact summary out.

:func:`summarize_path` is the pure unit of work an engine maps (a path -> a
:class:`~rightsize.analyzers.job.summary.RankSummary`: per-step and per-call rows, never the
events); :func:`summaries` maps it over paths in this process (``workers=1``) or in a local
process pool (``spawn``: polars' threads do not survive ``fork``), each worker holding one trace
at a time; :func:`job` reduces the summaries on the caller's side
(``analyzers/job/job.py``). ``rightsize analyze`` reads every trace in one process today and
builds the same summaries from its analyses (``analyzers/analysis.py``); this module is the
path the engine takes for jobs too big for one process.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from rightsize.pipeline import Options

if TYPE_CHECKING:
    from rightsize.analyzers.document.job import Job
    from rightsize.analyzers.job.summary import RankSummary


DEFAULT = Options()


def summarize_path(path: str | Path, options: Options = DEFAULT) -> RankSummary:
    """Read one trace, analyze it as one rank and return its summary (raises
    ``RightsizeError`` for a file that is not one trace)."""
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.analyzers.job.summary import summarize
    from rightsize.analyzers.metrics.definitions import options_for
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import load_catalog
    from rightsize.errors import InputError
    from rightsize.traces.loader import ReadOptions, load

    steps_opt, breakdown_opt = options_for(options.definitions)
    inputs = load([path], None, ReadOptions(step_range=options.step_range,
                                             timezone=options.timezone, lean=True))
    if len(inputs.traces) != 1:
        raise InputError(Path(path), f"holds {len(inputs.traces)} traces, not one rank's")
    context = Context(
        catalog=options.catalog if options.catalog is not None else load_catalog(),
        constraints=options.constraints if options.constraints is not None else Constraints(),
        step_options=steps_opt, breakdown_options=breakdown_opt)
    return summarize(analyze_trace(inputs.traces[0], context))


def summaries(paths: Sequence[str | Path], options: Options = DEFAULT,
              workers: int = 1) -> list[RankSummary]:
    """:func:`summarize_path` of each path, in order; ``workers`` > 1: in that many local
    processes (at most one per path)."""
    if workers <= 1 or len(paths) < 2:
        return [summarize_path(p, options) for p in paths]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(paths)), mp_context=context) as pool:
        return list(pool.map(summarize_path, paths, [options] * len(paths)))


def job(paths: Sequence[str | Path], options: Options = DEFAULT,
        workers: int = 1) -> Job | None:
    """The job section of ``paths`` (the ranks of one job), reduced from their summaries."""
    from rightsize.analyzers.job.job import job_of
    from rightsize.catalog import load_catalog

    catalog = options.catalog if options.catalog is not None else load_catalog()
    provider = options.constraints.provider if options.constraints is not None else None
    return job_of(summaries(paths, options, workers), catalog, provider)
