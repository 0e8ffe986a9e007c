"""Byte and nesting caps for every reader: bounded memory by construction (issue 12).

Each cap is far above what real traces need (the figures are in ``docs/limits.md``) and can be
raised with an environment variable. Exceeding one is a one-line :class:`LimitError` that names
the cap and the variable, never a slow march into swap.

Strings are capped rather than refused (issue 40): every name, label, device, thread and
process string a reader takes from an input keeps its first :data:`NAME_CHARS` characters and
the rest becomes an ellipsis and its byte count (:func:`cap_text`, :func:`cap_strings` for a
frame), so the CLI, the document, serve's index and the fleet table all hold a bounded text
whatever a trace names. Readers call them on what they emit.

Inputs: the environment. Outputs: :func:`cap` (the current value of a cap),
:class:`LimitError`, :func:`cap_text` and :func:`cap_strings`, and :func:`usable_cpus` (how
many threads a reader may keep busy).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

NAME_CHARS = Cap("RIGHTSIZE_MAX_NAME_CHARS", 512, "characters",
                 "a name, label, device, thread or process string (longer ones are cut)")

ALL = (INPUT_BYTES, EVENT_BYTES, ENVELOPE_BYTES, NESTING, LINE_BYTES, TEXT_FILE_BYTES,
       NAME_CHARS)
# String columns that are data, not names: JSON text of shapes and types, a process group's
# rank list. They are parsed, never shown, and bounded by EVENT_BYTES.
DATA_TEXT_COLUMNS = frozenset({"input_dims", "input_types", "concrete_inputs", "pg_ranks"})


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


def cap_text(text: str, limit: int | None = None) -> str:
    """``text`` within :data:`NAME_CHARS` characters: beyond it, the first ones, an ellipsis and
    how many bytes (UTF-8) were cut, e.g. ``cudnncudnn…(+3999488 bytes)``."""
    limit = cap(NAME_CHARS) if limit is None else limit
    if len(text) <= limit:
        return text
    rest = len(text[limit:].encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}…(+{rest} bytes)"


def cap_optional(text: str | None) -> str | None:
    return None if text is None else cap_text(text)


def cap_strings(df: Any, keep: frozenset[str] = DATA_TEXT_COLUMNS) -> Any:
    """A polars frame with every string column but ``keep`` within :data:`NAME_CHARS`
    characters (:func:`cap_text`'s form); the frame itself when none is longer (one pass of
    length checks)."""
    import polars as pl

    limit = cap(NAME_CHARS)
    columns = [c for c, t in df.schema.items() if t == pl.String and c not in keep]
    if not columns or df.height == 0:
        return df
    over = df.select(pl.any_horizontal(pl.col(c).str.len_chars().max() > limit
                                       for c in columns)).item()
    if not over:
        return df
    cut = []
    for c in columns:
        col = pl.col(c)
        rest = col.str.slice(limit).str.len_bytes()
        cut.append(pl.when(col.str.len_chars() > limit)
                   .then(pl.concat_str([col.str.slice(0, limit), pl.lit("…(+"),
                                        rest.cast(pl.String), pl.lit(" bytes)")]))
                   .otherwise(col).alias(c))
    return df.with_columns(cut)


def cap_json(value: Any) -> Any:
    """Every string (keys too) of a JSON-like value within :data:`NAME_CHARS`."""
    if isinstance(value, str):
        return cap_text(value)
    if isinstance(value, dict):
        return {cap_json(k): cap_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(cap_json(v) for v in value)
    return value


def cap_trace(trace: Any) -> Any:
    """A :class:`~rightsize.traces.schema.Trace` with its frames' names and its metadata's
    strings within :data:`NAME_CHARS`; the trace itself when nothing was longer."""
    from dataclasses import replace

    from rightsize.traces.schema import FRAMES

    frames = {name: cap_strings(trace.frame(name)) for name in FRAMES}
    meta = trace.meta
    backend, profiler = cap_optional(meta.backend), cap_json(meta.profiler)
    if backend != meta.backend or profiler != meta.profiler:
        meta = replace(meta, backend=backend, profiler=profiler)
    if meta is trace.meta and all(frames[n] is trace.frame(n) for n in FRAMES):
        return trace
    return replace(trace, meta=meta, **frames)


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
