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
                 manifest: Mapping[str, Any] | None = None) -> None:
        self.document = document
        self._result = result
        self._manifest = dict(manifest) if manifest else None

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
            raise NoFramesError("this analysis was read from JSON: it has the document but no "
                                "frames (per-rank numbers are in .document.ranks); call "
                                "rightsize.analyze() on the traces for frames")
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
            samples_per_step: int | None = None) -> Analysis:
    """Analyze traces, run directories, Nsight exports or GPU metric logs, in any mix: what
    ``rightsize analyze`` does, with the same options.

    ``catalog`` defaults to the shipped GPU catalog (so sizing is there); ``constraints`` are
    the sizing targets (``--target-step-ms`` and the others); ``definitions="tb-plugin"``
    reproduces the TensorBoard plugin's numbers, defects included; ``step_range`` names the
    NVTX range that marks a step in an Nsight Systems export (``--step-range``); ``timezone``
    is the zone of an nvidia-smi log's local timestamps (``--timezone``);
    ``samples_per_step`` gives throughput targets and cost per 1k samples
    (``--samples-per-step``).
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
                      definitions=definitions, lean=False)
    result, document = run(list(paths), options)
    return Analysis(document, result)


def open_run(run_dir: str | Path, definitions: str = "rightsize") -> Analysis:
    """The analysis of a run directory written by ``rightsize run``, with its manifest (the
    command, environment and what was collected show in the report)."""
    from rightsize import rundir
    from rightsize.pipeline import Options, run

    manifest = rundir.read_manifest(run_dir)
    result, document = run([run_dir], Options(definitions=definitions, lean=False))
    return Analysis(document, result, manifest)
