"""The reader protocol: what one input format implements to plug into the loader.

Role: the loader (:mod:`rightsize.traces.loader`) sniffs a file's first bytes and asks each
reader of the registry (:data:`rightsize.traces.registry.READERS`), in order, whether the file is
its own; the first that says yes reads it. Inputs: a path, its first content bytes, the
:class:`ReadOptions` of the command line. Output: a :class:`Read` -- what the file contributes
to the analysis (a normalized Trace, Nsight Compute kernel rows, or GPU samples) and the keys it
adds to the file's ``inputs`` entry of the analysis document.

A reader also declares, without reading anything, what it contributes (:data:`TRACE`: one
rank's events, analyzed on the engine, one trace at a time per worker; :data:`KERNEL_ROWS` and
:data:`SAMPLES`: small inputs every rank's analysis uses, read by the driver), the memory a
trace takes per byte and per event (:class:`Memory`, the model of ``traces/budget.py``), the
file names a folder of inputs is searched for, and what a file's head says of the job it is a
rank of (:class:`JobHead`: how a fleet scan groups files into jobs before reading them). Only
readers know formats: the loader, the pipeline, fleet and serve go by these declarations.

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

from rightsize.errors import InputError
from rightsize.traces import limits
from rightsize.traces.schema import Trace

if TYPE_CHECKING:
    from rightsize.traces.nccl_tests import NcclLog

Progress = Callable[[str], None]  # a reader's progress detail ("12 MB, 3,000 events")

# What a reader contributes (``Reader.contributes``), each to its field of :class:`Read`:
TRACE = "trace"  # one rank's events: Read.trace, analyzed on the engine (job_map.analyze_one)
KERNEL_ROWS = "kernel rows"  # per-kernel counters for every rank: Read.ncu (NCU_KERNELS)
SAMPLES = "samples"  # GPU samples over time: Read.gpu_samples (GPU_SAMPLES)
FABRIC = "fabric"  # a measured fabric: Read.nccl_tests (rightsize comm; an analysis refuses it)
CONTRIBUTIONS = (TRACE, KERNEL_ROWS, SAMPLES, FABRIC)


@dataclass(frozen=True, slots=True)
class Memory:
    """What reading one trace and analyzing it as one rank takes above the floor
    (``budget.BASE_BYTES``), measured (``benchmarks/memory_budget.py factors``): peak RSS per
    byte of the file (uncompressed) before it is read, per event once its events are counted."""

    per_byte: float
    per_event: float


@dataclass(frozen=True, slots=True)
class JobHead:
    """What a file's first bytes say of the job it is one rank of (fleet scans group the
    files of one recording by it before reading any of them)."""

    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    devices: str | None = None  # the device names, when the head has them
    start_us: float | None = None  # the first wall-clock event time (epoch us), when known


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

    def __post_init__(self) -> None:
        # What every reader emits passes here: each name, label, device, thread and process
        # string it took from the input is capped once (limits.NAME_CHARS).
        if self.trace is not None:
            object.__setattr__(self, "trace", limits.cap_trace(self.trace))
        for name in ("ncu", "gpu_samples"):
            frame = getattr(self, name)
            if frame is not None:
                object.__setattr__(self, name, limits.cap_strings(frame))

    @classmethod
    def of_trace(cls, trace: Trace) -> Read:
        """A trace's contribution; its entry says its rank and event count (and the window
        of steps it was read over, when not all of them)."""
        entry: dict[str, Any] = {"rank": trace.meta.rank, "events": trace.meta.event_count}
        if trace.meta.window is not None:
            entry["window"] = trace.meta.window.entry()
        return cls(entry=entry, trace=trace)


def not_analyzed(path: object, reader: Reader) -> InputError:
    """The analysis' one line for a file whose contribution it does not take: a measured
    fabric (:data:`FABRIC`) is checked and fitted by ``rightsize comm``."""
    return InputError(path, f"{reader.name} output measures a fabric, it is not a trace: check "
                            f"it with `rightsize comm check {path}`, or fit the communication "
                            f"model on it with `rightsize comm fit {path} -o comm.json` and "
                            "pass `--comm-model comm.json`")


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

    @property
    def contributes(self) -> str:
        """:data:`TRACE`, :data:`KERNEL_ROWS`, :data:`SAMPLES` or :data:`FABRIC`: which field
        of ``Read``."""
        ...

    @property
    def memory(self) -> Memory | None:
        """A trace reader's memory model (``traces/budget.py``); None for the small inputs
        read on the driver."""
        ...

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The file names (lower case endings) that a folder of inputs is searched for."""
        ...

    def job_head(self, head: bytes) -> JobHead | None:
        """What ``head`` (a file's first bytes, up to 256 kB, inflated) says of the job the
        file is a rank of; None when the format's head does not say (or it is not this
        format)."""
        ...

    def detect(self, path: Path, head: bytes) -> bool:
        """Whether ``path`` is of this format; ``head`` is its first content bytes
        (decompressed, BOM and leading whitespace skipped, never empty). May raise Refused."""
        ...

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        """Read the file (``progress``, when given, takes a short detail of how far it got)."""
        ...


class SmallInput:
    """What the readers of small inputs (not traces) declare alike: no memory model (the
    driver reads them, once for every rank) and nothing of a job in their heads."""

    memory: Memory | None = None

    def job_head(self, head: bytes) -> JobHead | None:
        return None


@dataclass(frozen=True, slots=True)
class Deferred:
    """A reader whose module is imported only for files that start with ``magic``: a format with
    heavy imports (nsys: sqlite3, ADBC) costs nothing to the analyses of other formats. The
    module holds the real reader as ``READER``; ``name``, ``described`` and the declarations
    repeat its own (a test checks) so that listing the formats imports nothing."""

    name: str
    described: str
    module: str
    magic: bytes
    contributes: str
    memory: Memory | None
    suffixes: tuple[str, ...]

    def _reader(self) -> Reader:
        reader: Reader = importlib.import_module(self.module).READER
        return reader

    def detect(self, path: Path, head: bytes) -> bool:
        return head.startswith(self.magic) and self._reader().detect(path, head)

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        return self._reader().read(path, options, progress)

    def job_head(self, head: bytes) -> JobHead | None:
        return self._reader().job_head(head) if head.startswith(self.magic) else None
