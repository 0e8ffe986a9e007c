"""The reader protocol: what one input format implements to plug into the loader.

Role: the loader (:mod:`rightsize.traces.loader`) sniffs a file's first bytes and asks each
reader of the registry (:data:`rightsize.traces.registry.READERS`), in order, whether the file is
its own; the first that says yes reads it. Inputs: a path, its first content bytes, the
:class:`ReadOptions` of the command line. Output: a :class:`Read` -- what the file contributes
to the analysis (a normalized Trace, Nsight Compute kernel rows, or GPU samples) and the keys it
adds to the file's ``inputs`` entry of the analysis document. The loader names no format.

Adding a reader: a module with an object implementing :class:`Reader` (conventionally
``READER``) and one entry in ``registry.READERS``; docs/formats.md, "Adding a reader".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from rightsize.traces.schema import Trace

if TYPE_CHECKING:
    from rightsize.traces.nccl_tests import NcclLog

Progress = Callable[[str], None]  # a reader's progress detail ("12 MB, 3,000 events")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    step_range: str | None = None  # nsys: NVTX range name that marks a step
    timezone: str | None = None  # nvidia-smi logs: the zone of their local timestamps
    lean: bool = False  # Kineto: only what the analyzers read (kineto.read_kineto)
    # Kineto and nsys: only the steps first..last (step numbers, both included), read over
    # their time window (traces/window.py); None: every step, unless the trace is too big for
    # memory_budget_bytes, then a window of steps that fits (traces/budget.py)
    steps: tuple[int, int] | None = None
    memory_budget_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """What one file contributes: one of ``trace``, ``ncu`` (NCU_KERNELS rows),
    ``gpu_samples`` (GPU_SAMPLES rows) or ``nccl_tests`` (a measured fabric: ``rightsize comm``
    reads it; the analysis refuses it in one line), and ``entry``: the keys it adds to its
    ``inputs`` entry, in document order (after path, format, bytes and run_status)."""

    entry: Mapping[str, Any]
    trace: Trace | None = None
    ncu: pl.DataFrame | None = None
    gpu_samples: pl.DataFrame | None = None
    nccl_tests: NcclLog | None = None

    @classmethod
    def of_trace(cls, trace: Trace) -> Read:
        """A trace's contribution; its entry says its rank and event count (and the window
        of steps it was read over, when not all of them)."""
        entry: dict[str, Any] = {"rank": trace.meta.rank, "events": trace.meta.event_count}
        if trace.meta.window is not None:
            entry["window"] = trace.meta.window.entry()
        return cls(entry=entry, trace=trace)


class Refused(Exception):
    """Raised by :meth:`Reader.detect` for a file that is surely of the reader's kind (its magic
    bytes say so) but not one it reads: detection stops and the loader reports ``why`` with the
    supported formats (one line, an InputError naming the file)."""

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(why)


class Reader(Protocol):
    """One input format. Readers raise :class:`~rightsize.errors.InputError` for a file they
    claimed and cannot read, and check limits themselves (:mod:`rightsize.traces.limits`)."""

    @property
    def name(self) -> str:
        """The format's name in the document's ``inputs[].format`` (e.g. ``kineto``)."""
        ...

    @property
    def described(self) -> str:
        """How the "supported:" line of an unknown-format error names the format."""
        ...

    def detect(self, path: Path, head: bytes) -> bool:
        """Whether ``path`` is of this format; ``head`` is its first content bytes
        (decompressed, BOM and leading whitespace skipped, never empty). May raise Refused."""
        ...

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        """Read the file (``progress``, when given, takes a short detail of how far it got)."""
        ...


@dataclass(frozen=True, slots=True)
class Deferred:
    """A reader whose module is imported only for files that start with ``magic``: a format with
    heavy imports (nsys: sqlite3, ADBC) costs nothing to the analyses of other formats. The
    module holds the real reader as ``READER``; ``name`` and ``described`` repeat its own (a
    test checks) so that listing the formats imports nothing."""

    name: str
    described: str
    module: str
    magic: bytes

    def _reader(self) -> Reader:
        reader: Reader = importlib.import_module(self.module).READER
        return reader

    def detect(self, path: Path, head: bytes) -> bool:
        return head.startswith(self.magic) and self._reader().detect(path, head)

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        return self._reader().read(path, options, progress)
