"""Small CLI helpers: progress on stderr, writing output without clobbering."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from rightsize.errors import OutputExistsError, RightsizeError


class Progress:
    """Progress on stderr for long work.

    On a terminal one line is rewritten in place (at most a few times a second). Elsewhere (CI
    logs, pipes) nothing is printed for work that finishes within ``quiet_s``, then plain lines.
    """

    def __init__(self, enabled: bool = True, min_interval_s: float = 0.5,
                 quiet_s: float = 2.0) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.min_interval_s = min_interval_s
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


def write_output(text: str, output: Path | None, force: bool) -> None:
    """Print to stdout, or write ``output`` atomically (never over an existing file unless force)."""
    if output is None:
        click.echo(text, nl=False)
        return
    if output.exists() and not force and not _is_device(output):
        raise OutputExistsError(output)
    if _is_device(output):
        with output.open("w") as fh:
            fh.write(text)
        return
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RightsizeError(f"cannot write {output}: {exc.strerror or exc}") from None


def _is_device(path: Path) -> bool:
    return str(path).startswith("/dev/")
