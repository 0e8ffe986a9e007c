"""From input paths to the analysis document: the one function the commands share.

``analyze_paths`` reads the inputs (``rightsize.traces``), runs the pure analyzers and returns
the JSON-able document of the ``rightsize analyze`` contract (``rightsize.reports.json_doc``).
``rightsize run`` calls it at the end of a run; ``rightsize analyze`` and ``report`` call it on
files users already have.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import Catalog

Progress = Callable[[str], None]


def analyze_paths(paths: list[str | Path], progress: Progress | None = None,
                  step_range: str | None = None, timezone: str | None = None,
                  catalog: Catalog | None = None,
                  constraints: Constraints | None = None,
                  samples_per_step: int | None = None) -> dict[str, Any]:
    """Read ``paths`` (trace files, per-rank directories, run directories, Nsight exports,
    GPU metric logs) and analyze them; ``catalog`` defaults to the shipped GPU catalog."""
    from rightsize.analyzers.analysis import Context, analyze
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import load_catalog
    from rightsize.reports.json_doc import document
    from rightsize.traces.loader import ReadOptions, load

    inputs = load(list(paths), progress, ReadOptions(step_range=step_range, timezone=timezone))
    if progress:
        progress("analyzing")
    context = Context(catalog=catalog if catalog is not None else load_catalog(),
                      ncu=inputs.ncu, gpu_samples=inputs.gpu_samples,
                      constraints=constraints if constraints is not None else Constraints(),
                      samples_per_step=samples_per_step)
    analysis = analyze(list(inputs.traces), context)
    return document(analysis, list(inputs.described))
