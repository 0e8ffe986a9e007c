"""Map the per-rank work over a job's traces: one trace in, one compact summary out.

:func:`summarize_path` is the pure unit of work (a path -> a
:class:`~rightsize.analyzers.job.summary.RankSummary`: per-step and per-call rows, never the
events); :func:`summaries` maps it over paths with :mod:`rightsize.engine` (in this process
for one worker, a local spawn pool or Ray otherwise), each worker holding one trace at a time;
:func:`job` reduces the summaries on the caller's side (``analyzers/job/job.py``).
``rightsize analyze`` reads every trace in one process today and builds the same summaries
from its analyses (``analyzers/analysis.py``); this module is the path for jobs too big for
one process.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rightsize import engine
from rightsize.errors import RightsizeError
from rightsize.pipeline import Options

if TYPE_CHECKING:
    from rightsize.analyzers.document.job import Job
    from rightsize.analyzers.job.summary import RankSummary


DEFAULT = Options()
HERE = engine.EngineOptions(workers=1)  # in this process, one input after the other


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


def _task(item: tuple[str | Path, Options]) -> RankSummary:
    return summarize_path(*item)


def summaries(paths: Sequence[str | Path], options: Options = DEFAULT,
              run: engine.EngineOptions = HERE) -> list[RankSummary]:
    """:func:`summarize_path` of each path, in order, on the engine ``run`` says (default:
    here, one after the other); the first input that fails stops it, named in one line."""
    out = []
    for path, result in zip(paths, engine.map_ordered(_task, [(p, options) for p in paths],
                                                      run), strict=True):
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
    return job_of(summaries(paths, options, run), catalog, provider)
