"""The ``rightsize`` command line: thin click commands behind one error boundary.

Each subcommand lives in its own module and is imported only when it is invoked or listed, so
``rightsize --help`` stays fast and imports neither torch nor polars (a test checks this).
Library code raises :class:`rightsize.errors.RightsizeError`; :func:`main` turns it into one line
on stderr and exit status 1. :func:`main` changes nothing process-wide; only :func:`entry`, the
console script, adds the garbage-collector tuning of :mod:`rightsize.cli.startup`.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import importlib.util
import os
import sys

import click

from rightsize import __version__
from rightsize.errors import RightsizeError

# command name -> "module:attribute"; modules import their heavy dependencies lazily.
COMMANDS: dict[str, str] = {
    "run": "rightsize.cli.run:run",
    "analyze": "rightsize.cli.analyze:analyze",
    "report": "rightsize.cli.report:report",
    "gpus": "rightsize.cli.gpus:gpus",
    "estimate": "rightsize.cli.estimate:estimate",
    "serve": "rightsize.cli.serve:serve",
    "compare": "rightsize.cli.compare:compare",
    "plan": "rightsize.cli.plan:plan",
    "fleet": "rightsize.cli.fleet:fleet",
    "serving": "rightsize.cli.serving:serving",
    "comm": "rightsize.cli.comm:comm",
    "trigger": "rightsize.cli.trigger:trigger",
    "upload": "rightsize.cli.upload:upload",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _importable(COMMANDS[name])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _importable(target):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


def _importable(target: str) -> bool:
    module = target.split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rightsize")
def cli() -> None:
    """What holds your training job back, and which GPU should it run on?

    \b
    Quick start:
      rightsize run train.py --lr 3e-4      profile an unmodified script, then analyze it
      rightsize analyze trace.json.gz       analyze a PyTorch Profiler trace you already have
    """


_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)


def _quiet_exit(code: int) -> None:
    """Exit without Python's final flush of a stdout that cannot be written."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """The command line: the one place that turns errors into exit codes. It changes nothing
    process-wide (tests and notebooks call it); the console script is :func:`entry`."""
    try:
        code = cli.main(args=argv, prog_name="rightsize", standalone_mode=False)
        sys.stdout.flush()  # a full disk behind stdout fails here, inside the boundary
    except RightsizeError as exc:
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")  # clear a progress line left on the terminal
        from rightsize.reports.fmt import safe_line

        click.echo(f"rightsize: error: {safe_line(exc)}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("rightsize: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("rightsize: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS:
            raise
        # stdout or stderr on a full or failing device: say it once, where it can still go
        with contextlib.suppress(OSError):
            sys.stderr.write(f"rightsize: error: cannot write the output: {exc.strerror}\n")
        _quiet_exit(1)
    except Exception as exc:  # a bug, not bad input: still one line unless debugging
        if os.environ.get("RIGHTSIZE_DEBUG"):
            raise
        from rightsize.reports.fmt import safe_line

        click.echo(f"rightsize: internal error: {type(exc).__name__}: {safe_line(exc)} "
                   "(set RIGHTSIZE_DEBUG=1 for the traceback, and please report it)", err=True)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


def entry() -> None:
    """The ``rightsize`` console script and ``python -m rightsize``: :func:`main` with the
    garbage-collector tuning of :mod:`rightsize.cli.startup` (imported here only, so that
    ``main`` and the library never change the process), then the interpreter's normal exit."""
    from rightsize.cli import startup

    startup.before_command()
    try:
        main()
    finally:
        startup.before_exit()
