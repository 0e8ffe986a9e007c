"""Byte and nesting caps for every reader: bounded memory by construction (issue 12).

Each cap is far above what real traces need (the figures are in ``docs/limits.md``) and can be
raised with an environment variable. Exceeding one is a one-line :class:`LimitError` that names
the cap and the variable, never a slow march into swap.

Inputs: the environment. Outputs: :func:`cap` (the current value of a cap),
:class:`LimitError`, and :func:`usable_cpus` (how many threads a reader may keep busy).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from rightsize.errors import InputError, RightsizeError

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class Cap:
    env: str  # the environment variable that overrides it
    default: int
    unit: str  # "bytes" or "levels"
    what: str  # what it bounds, for the error message


INPUT_BYTES = Cap("RIGHTSIZE_MAX_INPUT_BYTES", 8 * GiB, "bytes",
                  "decompressed size of one input file")
EVENT_BYTES = Cap("RIGHTSIZE_MAX_EVENT_BYTES", 4 * MiB, "bytes", "size of one trace event")
ENVELOPE_BYTES = Cap("RIGHTSIZE_MAX_ENVELOPE_BYTES", 64 * MiB, "bytes",
                     "trace metadata outside the event array")
NESTING = Cap("RIGHTSIZE_MAX_NESTING", 128, "levels", "JSON nesting depth outside the events")
LINE_BYTES = Cap("RIGHTSIZE_MAX_LINE_BYTES", 1 * MiB, "bytes",
                 "one line or field of a CSV or metrics log")
TEXT_FILE_BYTES = Cap("RIGHTSIZE_MAX_TEXT_BYTES", 2 * GiB, "bytes",
                      "one CSV, metrics log or JSON side file (manifest, catalog, config)")

ALL = (INPUT_BYTES, EVENT_BYTES, ENVELOPE_BYTES, NESTING, LINE_BYTES, TEXT_FILE_BYTES)


class LimitError(RightsizeError):
    """An input exceeds one of the caps."""

    def __init__(self, c: Cap, where: object = None) -> None:
        prefix = f"{where}: " if where is not None else ""
        super().__init__(
            f"{prefix}{c.what} exceeds the limit of {_human(cap(c), c.unit)} "
            f"(raise it with {c.env}=N {c.unit})"
        )


def cap(c: Cap) -> int:
    """The cap's value: the environment variable when it is a positive integer, else the
    default (a malformed value is an error, not silently ignored)."""
    raw = os.environ.get(c.env)
    if raw is None or raw.strip() == "":
        return c.default
    try:
        value = int(raw.strip())
    except ValueError:
        raise RightsizeError(f"{c.env}={raw!r} is not a whole number of {c.unit}") from None
    if value <= 0:
        raise RightsizeError(f"{c.env}={raw!r} must be positive")
    return value


def _human(n: int, unit: str) -> str:
    if unit != "bytes":
        return f"{n} {unit}"
    for name, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {name}"
    return f"{n} bytes"


BOM = b"\xef\xbb\xbf"


def read_text(path: Path) -> str:
    """A whole CSV/log/side file as text (see :func:`read_bytes`), undecodable bytes replaced."""
    return read_bytes(path).decode("utf-8", errors="replace")


def read_bytes(path: Path) -> bytes:
    """A whole CSV/log/side file: a regular file within TEXT_FILE_BYTES, lines within
    LINE_BYTES, a UTF-8 BOM dropped."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, "not a regular file")
        if st.st_size > cap(TEXT_FILE_BYTES):
            raise LimitError(TEXT_FILE_BYTES, path)
        with open(path, "rb") as fh:
            data = fh.read(cap(TEXT_FILE_BYTES) + 1)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > cap(TEXT_FILE_BYTES):
        raise LimitError(TEXT_FILE_BYTES, path)
    check_lines(data, path)
    return data.removeprefix(BOM)


def check_lines(data: bytes, where: object) -> None:
    """Every line (and so every field) within LINE_BYTES, found without splitting the text."""
    limit = cap(LINE_BYTES)
    if len(data) <= limit:
        return
    start = 0
    while start < len(data):
        end = data.find(b"\n", start, start + limit + 1)
        if end < 0:
            if len(data) - start > limit:
                raise LimitError(LINE_BYTES, where)
            return
        start = end + 1


def check_regular(path: Path, stdin_hint: bool = True) -> None:
    """Refuse FIFOs, devices and sockets before opening them (opening a FIFO blocks)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(path, "no such file or directory") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        hint = "; to read standard input, pass '-'" if stdin_hint else ""
        raise InputError(path, f"not a regular file (a pipe, device or socket){hint}")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1
