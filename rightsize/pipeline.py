"""From input paths to the analysis: the one function the commands and the Python API share.

``run`` reads the inputs (``rightsize.traces``), runs the pure analyzers
(``rightsize.analyzers``) and returns the analyzer results with the typed document
(:class:`~rightsize.analyzers.document.Document`) built from them. ``analyze_document`` returns
the document alone, ``analyze_paths`` its JSON form (the ``rightsize analyze --format json``
contract). ``rightsize run`` calls it at the end of a run; ``rightsize analyze`` and ``report``
and :func:`rightsize.analyze` call it on files users already have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rightsize.analyzers.analysis import Analysis
    from rightsize.analyzers.document import Document
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import Catalog

Progress = Callable[[str], None]


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
    memory_budget_bytes: int | None = None  # one trace's read and analysis (None: unbounded)


def run(paths: list[str | Path], options: Options = Options(),
        progress: Progress | None = None) -> tuple[Analysis, Document]:
    """Read ``paths`` (trace files, per-rank directories, run directories, Nsight exports, GPU
    metric logs) and analyze them: the analyzer results and their document."""
    from rightsize.analyzers.analysis import Context, analyze
    from rightsize.analyzers.document.build import document
    from rightsize.analyzers.metrics.definitions import options_for
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import load_catalog
    from rightsize.traces.loader import ReadOptions, load

    steps_opt, breakdown_opt = options_for(options.definitions)  # fails before any reading
    inputs = load(list(paths), progress,
                  ReadOptions(step_range=options.step_range, timezone=options.timezone,
                              lean=options.lean, steps=options.steps,
                              memory_budget_bytes=options.memory_budget_bytes))
    if progress:
        progress("analyzing")
    context = Context(
        catalog=options.catalog if options.catalog is not None else load_catalog(),
        ncu=inputs.ncu, gpu_samples=inputs.gpu_samples, host_samples=inputs.host_samples,
        constraints=options.constraints if options.constraints is not None else Constraints(),
        step_options=steps_opt, breakdown_options=breakdown_opt,
        samples_per_step=options.samples_per_step)
    analysis = analyze(list(inputs.traces), context)
    return analysis, document(analysis, list(inputs.described), options.definitions)


def analyze_document(paths: list[str | Path], options: Options = Options(),
                     progress: Progress | None = None) -> Document:
    return run(paths, options, progress)[1]


def analyze_paths(paths: list[str | Path], progress: Progress | None = None,
                  step_range: str | None = None, timezone: str | None = None,
                  catalog: Catalog | None = None,
                  constraints: Constraints | None = None,
                  samples_per_step: int | None = None,
                  definitions: str = "rightsize") -> dict[str, Any]:
    """The JSON form of :func:`analyze_document` (plain dicts and lists)."""
    options = Options(step_range, timezone, catalog, constraints, samples_per_step, definitions)
    return analyze_document(paths, options, progress).to_json()
