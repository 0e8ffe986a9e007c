"""Small CLI helpers: progress on stderr, writing output without clobbering."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize import outputs

if TYPE_CHECKING:
    from rightsize.analyzers.document import Document


class Progress:
    """Progress on stderr for long work.

    On a terminal one line is rewritten in place (at most a few times a second). Elsewhere (CI
    logs, pipes) nothing is printed for work that finishes within ``quiet_s``, then a plain line
    every ``log_interval_s`` (a 5 GB trace read for two minutes leaves a dozen lines, not 250).
    """

    def __init__(self, enabled: bool = True, min_interval_s: float = 0.5,
                 quiet_s: float = 2.0, log_interval_s: float = 10.0) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.min_interval_s = min_interval_s if self.tty else log_interval_s
        self.quiet_s = quiet_s
        self._start_s = time.monotonic()
        self._last_s = 0.0
        self._shown = False

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not self.tty and now - self._start_s < self.quiet_s:
            return
        if now - self._last_s < self.min_interval_s:
            return
        self._last_s = now
        if self.tty:
            sys.stderr.write("\r\033[K" + message[:120])
        else:
            sys.stderr.write(message + "\n")
        sys.stderr.flush()
        self._shown = True

    def done(self) -> None:
        if self.enabled and self.tty and self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def write_output(text: str, output: Path | None, force: bool,
                 inputs: Sequence[Path] = ()) -> None:
    """Print to stdout, or write ``output`` (see :mod:`rightsize.outputs`: never an input, never
    an existing file without ``force``, whole or not at all, mode and owner kept)."""
    if output is None:
        click.echo(text, nl=False)
        return
    outputs.write_text(outputs.check_target(output, inputs, force), text)


def warn(line: str) -> None:
    """A warning on stderr in one line (what the pipeline says it cannot do, before doing
    the rest)."""
    from rightsize.reports.fmt import safe_line

    click.echo(f"rightsize: warning: {safe_line(line)}", err=True)


def note_interrupted(doc: Document, quiet: bool) -> None:
    """Say on stderr when an input run directory was interrupted (its manifest still says
    ``running`` but the rightsize that wrote it is gone): its data may be partial."""
    if quiet:
        return
    from rightsize.reports.fmt import safe_line

    seen: set[str] = set()
    for entry in doc.inputs:
        if entry.run_status != "interrupted":
            continue
        run = str(Path(entry.path).parent.parent)
        if run not in seen:
            seen.add(run)
            click.echo(f"rightsize: note: {safe_line(run)}: the run was interrupted (rightsize "
                       "was killed while it ran); its data may be partial", err=True)
