"""The registry of readers: the one list the loader detects formats with.

Role: :data:`READERS` in detection order; :data:`SUPPORTED`, the formats as the loader's
"supported:" error line names them; what the readers declare, gathered for those who must not
know formats (:func:`trace_suffixes`, :func:`input_suffixes`, :func:`job_head`). Inputs: the
readers' own objects (``<module>.READER``, :class:`rightsize.traces.readers.Reader`). Adding a
reader is one entry here (docs/formats.md).

Detection order matters because the detect tests overlap on odd files: exact magic first (SQLite,
which is then an nsys export or refused), then the text formats by their headers (ncu's
``"ID",...,"Kernel Name"`` line, then nvidia-smi/DCGM headers, then nccl-tests' ``# nThread``
or result-table lines), and Kineto -- any JSON object
or array -- last. nsys is :class:`~rightsize.traces.readers.Deferred`: sqlite3 and its readers
are imported for SQLite files only; its entry repeats the reader's declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from rightsize.traces import kineto, metrics_logs, nccl_tests, ncu
from rightsize.traces.readers import FABRIC, TRACE, Deferred, JobHead, Memory, Reader, Refused

# Names so common that a file so named is an input only when a reader that declares the suffix
# recognizes its head (``nvidia-smi --query-gpu ... > gpu.txt``).
BY_HEAD_SUFFIXES = (".txt", ".log")

NSYS = Deferred(name="nsys", described="Nsight Systems SQLite (nsys export --type sqlite)",
                module="rightsize.traces.nsys", magic=b"SQLite format 3\x00",
                contributes=TRACE, memory=Memory(per_byte=3.6, per_event=220.0),
                suffixes=(".sqlite", ".sqlite3"))

READERS: tuple[Reader, ...] = (NSYS, ncu.READER, metrics_logs.READER, nccl_tests.READER,
                               kineto.READER)


def _listed() -> tuple[Reader, ...]:
    """The readers as lines name them: the format most inputs are in first, then the others
    in detection order."""
    return tuple(sorted(READERS, key=lambda r: r is not kineto.READER))


SUPPORTED = ", ".join([*(r.described for r in _listed()), "a directory of traces",
                       "or a run directory"])


def trace_suffixes() -> tuple[str, ...]:
    """The file names a directory of traces is searched for (those of the trace readers;
    looked up at each call, so a test may swap the list)."""
    return _unique(s for r in _listed() if r.contributes == TRACE for s in r.suffixes)


def input_suffixes() -> tuple[str, ...]:
    """The file names of the inputs an analysis takes (a fleet scan's folders are searched
    for them), but the generic ones (:data:`BY_HEAD_SUFFIXES`)."""
    return _unique(s for r in _analyzed() for s in r.suffixes if s not in BY_HEAD_SUFFIXES)


def is_input_name(name: str, head: Callable[[], bytes] | None = None) -> bool:
    """Whether a file found under a folder is an input: by its name (:func:`input_suffixes`);
    a name of :data:`BY_HEAD_SUFFIXES` only when a reader that declares that suffix detects
    its head (``head`` reads it; None: not an input), a measured fabric's log included (its
    row then says what reads it)."""
    lower = name.lower()
    if not lower.endswith(BY_HEAD_SUFFIXES):
        return lower.endswith(input_suffixes())
    if head is None:
        return False
    text = head().lstrip()
    for r in _listed():
        if lower.endswith(r.suffixes) and text:
            try:
                if r.detect(Path(name), text):
                    return True
            except Refused:
                continue
    return False


def _analyzed() -> tuple[Reader, ...]:
    """The readers whose files an analysis takes (not a measured fabric)."""
    return tuple(r for r in _listed() if r.contributes != FABRIC)


def job_head(head: bytes) -> tuple[str, JobHead] | None:
    """The first reader whose format's head says something of its job, and what it says
    (``head``: a file's first bytes, inflated; object-store files are probed this way)."""
    for reader in READERS:
        said = reader.job_head(head)
        if said is not None:
            return reader.name, said
    return None


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
