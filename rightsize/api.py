"""The Python API: the same analysis as ``rightsize analyze``, as an object for notebooks.

    >>> import rightsize
    >>> a = rightsize.analyze("samples/runs/train_dataloader-cpu")
    >>> a.diagnosis.bound, a.diagnosis.device
    (<Bound.DATALOADER: 'dataloader'>, <DeviceKind.CPU: 'cpu'>)
    >>> a.diagnosis.bound == "dataloader"  # vocabularies are StrEnums: their text compares too
    True
    >>> a.steps.count, a.sizing.recommended  # a CPU-only run: no GPU recommendation earned
    (3, None)
    >>> "ts_ns" in a.ranks[0].ops.columns
    True
    >>> rightsize.Analysis.from_json(a.to_json()).diagnosis == a.diagnosis
    True

:func:`analyze` reads traces (or run directories, Nsight exports, metric logs) and returns an
:class:`Analysis`: the typed document (``diagnosis``, ``sizing``, ``steps``, ``metrics``) and,
per rank, the normalized polars frames it was computed from. :meth:`Analysis.from_json` reads a
saved document back; such an analysis has no frames, and asking for them says so.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import RightsizeError

if TYPE_CHECKING:
    import polars as pl

    from rightsize.analyzers import analysis as results
    from rightsize.analyzers.document import Document
    from rightsize.analyzers.document.diagnosis import Diagnosis
    from rightsize.analyzers.document.metrics import Metrics, StepStats
    from rightsize.analyzers.document.sizing import Sizing
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import Catalog
    from rightsize.engine import EngineOptions


class NoFramesError(RightsizeError):
    """Frames were asked of an analysis read back from JSON (it only has the document)."""


@dataclass(frozen=True, slots=True)
class Rank:
    """One rank's normalized frames (``rightsize.traces.schema``) and its analyzer results."""

    result: results.RankAnalysis

    @property
    def rank(self) -> int | None:
        return self.result.rank

    @property
    def path(self) -> str:
        return self.result.trace.meta.path

    @property
    def kernels(self) -> pl.DataFrame:
        """GPU kernels, one row per execution (``schema.KERNELS``)."""
        return self.result.trace.kernels

    @property
    def ops(self) -> pl.DataFrame:
        """Host operators (``schema.CPU_OPS``)."""
        return self.result.trace.cpu_ops

    @property
    def memcpy(self) -> pl.DataFrame:
        """Memcpy and memset activity (``schema.TRANSFERS``)."""
        return self.result.trace.transfers

    @property
    def runtime(self) -> pl.DataFrame:
        return self.result.trace.runtime

    @property
    def memory(self) -> pl.DataFrame:
        """Caching-allocator events (``schema.MEMORY``)."""
        return self.result.trace.memory

    @property
    def work(self) -> pl.DataFrame | None:
        """The classified device work (compute/memory, and the signal that decided)."""
        return self.result.work

    @property
    def top_kernels(self) -> pl.DataFrame:
        from rightsize.analyzers.metrics.kernels import top_kernels

        return top_kernels(self.result.trace.kernels)

    @property
    def self_ops(self) -> pl.DataFrame:
        """Host ops by self time, one row per call path (``analyzers/metrics/self_ops.py``):
        the document's ``self_ops`` as a frame, times in ms."""
        import polars as pl

        rows = [o.to_json() for o in self.result.values.get("self_ops", ())]
        return pl.DataFrame(rows) if rows else pl.DataFrame(
            schema={"name": pl.String, "path": pl.List(pl.String), "module": pl.String,
                    "calls": pl.Int64, "self_ms": pl.Float64, "host_ms": pl.Float64,
                    "gpu_ms": pl.Float64, "kernels": pl.Int64})

    def frame(self, name: str) -> pl.DataFrame:
        """Any frame of the normalized trace by name (``kernels``, ``steps``, ``flows``...)."""
        from rightsize.traces.schema import FRAMES

        if name not in FRAMES:
            raise RightsizeError(f"no frame {name!r} (frames: {', '.join(FRAMES)})")
        return self.result.trace.frame(name)


class Analysis:
    """One analysis: the typed document, and the frames when it was computed here."""

    def __init__(self, document: Document, result: results.Analysis | None = None,
                 manifest: Mapping[str, Any] | None = None,
                 frames_gone: str | None = None) -> None:
        self.document = document
        self._result = result
        self._manifest = dict(manifest) if manifest else None
        self._frames_gone = frames_gone  # why there are no frames, when not read from JSON

    @classmethod
    def from_json(cls, source: str | Path | Mapping[str, Any]) -> Analysis:
        """A document-backed analysis (no frames) from a path or a parsed JSON object."""
        from rightsize.analyzers.document import Document

        return cls(Document.from_json(source))

    @property
    def diagnosis(self) -> Diagnosis | None:
        return self.document.diagnosis

    @property
    def sizing(self) -> Sizing | None:
        return self.document.sizing

    @property
    def steps(self) -> StepStats:
        return self.document.steps

    @property
    def metrics(self) -> Metrics:
        return self.document.metrics

    @property
    def has_frames(self) -> bool:
        return self._result is not None

    @property
    def ranks(self) -> tuple[Rank, ...]:
        """Each rank's frames and results; an analysis read from JSON has none, and asking for
        them raises :class:`NoFramesError` (its per-rank numbers are ``document.ranks``)."""
        if self._result is None:
            raise NoFramesError(self._frames_gone or "this analysis was read from JSON: it has "
                                "the document but no frames (per-rank numbers are in "
                                ".document.ranks); call rightsize.analyze() on the traces for "
                                "frames")
        return tuple(Rank(r) for r in self._result.ranks)

    def to_json(self) -> dict[str, Any]:
        return self.document.to_json()

    def report(self, fmt: str = "text") -> str:
        """The report as text: ``text``, ``json`` or ``html`` (one self-contained page)."""
        from rightsize.reports.render import render

        return render(self.document, fmt, self._manifest)

    def write_report(self, path: str | Path, force: bool = False,
                     fmt: str | None = None) -> Path:
        """Write the report (format from ``fmt``, else the suffix: .html, .json, .txt)."""
        from rightsize.reports.render import write_report

        return write_report(self.document, path, force, self._manifest, fmt)

    def _repr_html_(self) -> str:
        from rightsize.reports.model import build_model
        from rightsize.reports.text import render_summary

        text = render_summary(build_model(self.document, self._manifest))
        return f"<pre class='rightsize'>{html.escape(text)}</pre>"

    def __repr__(self) -> str:
        d = self.document.diagnosis
        bound = f"{d.bound}-bound" if d and d.bound else "no verdict"
        return f"<rightsize.Analysis {bound}, {self.steps.count} steps, " \
               f"{len(self.document.ranks)} rank(s)>"


def analyze(*paths: str | Path, catalog: Catalog | None = None,
            constraints: Constraints | None = None, definitions: str = "rightsize",
            step_range: str | None = None, timezone: str | None = None,
            samples_per_step: int | None = None, steps: tuple[int, int] | None = None,
            memory_budget: int | str | None = None, engine: str | None = None,
            workers: int | None = None, ray_address: str | None = None) -> Analysis:
    """Analyze traces, run directories, Nsight exports or GPU metric logs, in any mix: what
    ``rightsize analyze`` does, with the same options.

    ``catalog`` defaults to the shipped GPU catalog (so sizing is there); ``constraints`` are
    the sizing targets (``--target-step-ms`` and the others); ``definitions="tb-plugin"``
    reproduces the TensorBoard plugin's numbers, defects included; ``step_range`` names the
    NVTX range that marks a step in an Nsight Systems export (``--step-range``); ``timezone``
    is the zone of an nvidia-smi log's local timestamps (``--timezone``);
    ``samples_per_step`` gives throughput targets and cost per 1k samples
    (``--samples-per-step``); ``steps=(A, B)`` analyzes only steps A to B of each trace
    (``--steps A-B``); ``memory_budget`` (bytes, or text such as ``"2G"``) is what one trace's
    read and analysis may take, a trace that needs more being analyzed over a window that fits
    (``--memory-budget``; default: 60% of the memory available).

    By default everything runs in this process and the analysis keeps each rank's frames
    (``ranks``). ``engine="local"`` with ``workers`` (processes) or ``engine="ray"`` with
    ``ray_address`` (``--engine``, ``--workers``, ``--ray-address``) analyze the traces in
    worker processes instead: the document is the same, and the frames stay with the workers
    (``ranks`` raises :class:`NoFramesError`; ``workers=1`` is this process, with frames).
    """
    from rightsize.pipeline import Options, run

    if not paths:
        raise RightsizeError("analyze() needs at least one path")
    if samples_per_step is not None and (isinstance(samples_per_step, bool)
                                         or not isinstance(samples_per_step, int)
                                         or samples_per_step < 1):
        raise RightsizeError(f"samples_per_step must be a positive integer, not "
                             f"{samples_per_step!r}")
    if constraints is not None and constraints.target_throughput is not None \
            and samples_per_step is None:
        raise RightsizeError("a throughput target (constraints.target_throughput) needs "
                             "samples_per_step, as --target-throughput needs "
                             "--samples-per-step")
    options = Options(step_range=step_range, timezone=timezone, catalog=catalog,
                      constraints=constraints, samples_per_step=samples_per_step,
                      definitions=definitions, lean=False, steps=_steps(steps),
                      memory_budget_bytes=_budget(memory_budget))
    result = run(list(paths), options, run_on=_engine(engine, workers, ray_address),
                 frames=True, warn=_warn)
    return Analysis(result.document, result.analysis,
                    frames_gone=None if result.analysis is not None else
                    "its traces were analyzed by worker processes (engine="
                    f"{engine!r}, workers={workers!r}): it has the document but no frames "
                    "(per-rank numbers are in .document.ranks); analyze in this process "
                    "(no engine, or workers=1) for frames")


def open_run(run_dir: str | Path, definitions: str = "rightsize") -> Analysis:
    """The analysis of a run directory written by ``rightsize run``, with its manifest (the
    command, environment and what was collected show in the report)."""
    from rightsize import rundir
    from rightsize.pipeline import Options, run

    manifest = rundir.read_manifest(run_dir)
    result = run([run_dir], Options(definitions=definitions, lean=False), frames=True)
    return Analysis(result.document, result.analysis, manifest)


def _warn(line: str) -> None:
    """What the analysis cannot keep (a memory budget), as a Python warning."""
    import warnings

    warnings.warn(line, RuntimeWarning, stacklevel=5)  # at the caller of analyze()


def _steps(steps: tuple[int, int] | None) -> tuple[int, int] | None:
    if steps is None:
        return None
    if not (isinstance(steps, tuple | list) and len(steps) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in steps)
            and 0 <= steps[0] <= steps[1]):
        raise RightsizeError(f"steps must be (A, B), two step numbers with 0 <= A <= B, not "
                             f"{steps!r}")
    return int(steps[0]), int(steps[1])


def _budget(budget: int | str | None) -> int | None:
    from rightsize.traces.budget import MIN_BUDGET_BYTES, parse_size

    if budget is None:
        return None
    try:
        n = parse_size(budget) if isinstance(budget, str) else budget
    except ValueError as exc:
        raise RightsizeError(f"memory_budget: {exc}") from None
    if isinstance(n, bool) or not isinstance(n, int) or n < MIN_BUDGET_BYTES:
        raise RightsizeError(f"memory_budget must be at least {MIN_BUDGET_BYTES:,} bytes "
                             f"(100 MB), not {budget!r}: too little to analyze a trace in")
    return n


def _engine(engine: str | None, workers: int | None,
            address: str | None) -> EngineOptions | None:
    from rightsize.engine import ENGINES, EngineOptions

    if engine is None and workers is None and address is None:
        return None  # this process, with the frames
    engine = engine or ("ray" if address is not None else "local")
    if engine not in ENGINES:
        raise RightsizeError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine != "ray" and address is not None:
        raise RightsizeError("ray_address needs engine='ray'")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1 or engine == "ray"):
        raise RightsizeError(f"workers must be a positive integer, for the local engine, "
                             f"not {workers!r}")
    return EngineOptions(engine=engine, workers=workers, address=address)
