"""Where outputs may go, and writing them without losing anybody's data.

Inputs: the paths the user gave as inputs, the output they named (``-o``) and the report path
rightsize derives by itself. Output: checked targets and files written whole or not at all.

Rules (issue 12):

- An output is never one of the inputs (same file by device and inode, so links and symlinks
  count), nor a file read from an input directory.
- ``--force`` covers exactly the files named on the command line. A *derived* path (the HTML
  report beside ``-o``, ``./rightsize-report.html``, ``RUN_DIR/report.html``) is written when it
  is absent, or replaced under ``--force`` only when it holds a report rightsize wrote itself.
- Special files (``/dev/null``, ``/dev/stdout``, FIFOs) are written in place and get no
  derived sibling; a directory is refused.
- A replaced regular file keeps its mode and, where allowed, its owner; a symlink is followed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rightsize.errors import OutputExistsError, RightsizeError
from rightsize.rundir import write_text_atomic

GENERATOR_MARK = b'<meta name="generator" content="rightsize'  # in every HTML report's head
_MARK_SCAN_BYTES = 4096
_WALK_LIMIT_FILES = 100_000  # input directories are walked this far for files to protect


class OutputError(RightsizeError):
    """An output path that must not be written."""


@dataclass(frozen=True, slots=True)
class Target:
    path: Path  # where to write (a symlink resolved)
    special: bool  # a device or FIFO: written in place, no derived sibling


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def input_identities(inputs: Iterable[Path]) -> set[tuple[int, int]]:
    """(device, inode) of every input file and of every non-HTML file under input directories.

    HTML is never read by rightsize, so a run directory's own ``report.html`` stays writable.
    """
    found: set[tuple[int, int]] = set()
    seen = 0
    for p in inputs:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            found.add(_identity(st))
            continue
        for root, _dirs, files in os.walk(p):
            for name in files:
                seen += 1
                if seen > _WALK_LIMIT_FILES:
                    return found
                if name.endswith(".html"):
                    continue
                with contextlib.suppress(OSError):
                    found.add(_identity(os.stat(os.path.join(root, name))))
    return found


def check_target(path: Path, inputs: Iterable[Path], force: bool, derived: bool = False) -> Target:
    """Decide whether ``path`` may be written; raise a one-line error when it may not.

    ``derived``: rightsize chose the path (not the user), so ``force`` only replaces a report
    rightsize wrote there before.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Target(path, special=False)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write {path}: it is a directory")
    if _identity(st) in input_identities(inputs):
        raise OutputError(f"refusing to write {path}: it is one of the inputs")
    if not stat.S_ISREG(st.st_mode):
        return Target(path, special=True)
    if not force:
        raise OutputExistsError(path)
    if derived and not is_rightsize_report(path):
        raise OutputExistsError(path)
    return Target(Path(os.path.realpath(path)), special=False)


def is_rightsize_report(path: Path) -> bool:
    """Whether the file starts like an HTML report rightsize wrote (its generator mark)."""
    try:
        with open(path, "rb") as fh:
            return GENERATOR_MARK in fh.read(_MARK_SCAN_BYTES)
    except OSError:
        return False


def is_special(path: Path) -> bool:
    """An existing path that is neither a regular file nor a directory (device, FIFO, socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def write_text(target: Target, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target``: in place for special files, else whole or not at all.

    Any failure (a full disk, ``/dev/full``, a read-only directory) is one line.
    """
    path = target.path
    if not target.special:
        return write_text_atomic(path, text, mkdir=True)
    try:
        with open(path, "wb") as fh:
            fh.write(text.encode("utf-8"))
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def derived_report_path(output: Path | None, default: Path) -> Path | None:
    """The HTML report's path: named after ``-o`` (``a.json`` -> ``a.report.html``, never ``-o``
    itself), else ``default``; None when ``-o`` is a special file (no sibling of ``/dev/null``)."""
    if output is None:
        return default
    if is_special(output):
        return None
    return output.with_name(f"{output.stem}.report.html")
