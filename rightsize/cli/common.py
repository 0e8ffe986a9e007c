"""What the commands share: the catalog option and loading, the definitions option, colors,
and writing the rendered analysis and the HTML report.

Everything a command prints about an analysis goes through the renderer interface
(:mod:`rightsize.reports.render`), and colors only through :func:`use_color`, so ``NO_COLOR``
(no-color.org) holds for every command. Only click is imported at module level.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rightsize.analyzers.document import Document
    from rightsize.catalog import Catalog

CATALOG_ENV = "RIGHTSIZE_CATALOG"

catalog_option: Callable[[Any], Any] = click.option(
    "--catalog", "catalog_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help=f"Extra GPUs/prices (CSV or JSON) that add to or override the shipped catalog; "
         f"also read from ${CATALOG_ENV}.")

definitions_option: Callable[[Any], Any] = click.option(
    "--definitions", type=click.Choice(["rightsize", "tb-plugin"]), default="rightsize",
    show_default=True,
    help="tb-plugin: the TensorBoard plugin's step and breakdown numbers exactly, its defects "
         "included (to compare with what TensorBoard showed; see docs/metrics.md).")


def read_input_text(path: Path, what: str, encoding: str = "utf-8") -> str:
    """The text of the input file ``path``; a one-line error naming ``what`` (``the requests
    CSV``, without the article) when it cannot be read or is not UTF-8 text."""
    from rightsize.errors import InputError

    try:
        return path.read_text(encoding=encoding)
    except OSError as exc:
        raise InputError(path, f"cannot read the {what} ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(path, f"the {what} is not UTF-8 text") from None


def read_input_json(path: Path, what: str) -> Any:
    """The parsed JSON of the input file ``path``, with :func:`read_input_text`'s errors and a
    one-line error for text that is not JSON."""
    import json

    from rightsize.errors import InputError

    try:
        return json.loads(read_input_text(path, what))
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None


def load_catalog_for_cli(path: Path | None) -> Catalog:
    """The shipped catalog with ``$RIGHTSIZE_CATALOG`` files (``os.pathsep``-separated), then
    ``path``, applied (the last one wins)."""
    from rightsize.catalog import load_catalog, parse_catalog_text
    from rightsize.errors import InputError
    from rightsize.outputs import is_special

    paths = [Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p]
    paths += [path] if path else []
    files = []
    for p in paths:
        if is_special(p):  # a FIFO would block the read
            raise InputError(p, "not a regular file (a pipe, device or socket)")
        files.append(parse_catalog_text(read_input_text(p, "catalog file"), str(p)))
    return load_catalog(files)


_NO_COLOR_FLAG: list[bool] = []  # set by --no-color for this process (never in the job's env)


def use_color(stream: IO[str] | None = None) -> bool:
    """Colors on a terminal only, never with ``--no-color`` or ``NO_COLOR`` (no-color.org)."""
    stream = sys.stdout if stream is None else stream
    return stream.isatty() and not os.environ.get("NO_COLOR") and not _NO_COLOR_FLAG


def no_color_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--no-color`` on every command: the same as ``NO_COLOR`` for this invocation (commands
    without colors accept it too, so scripts can pass it everywhere)."""

    def _set(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            _NO_COLOR_FLAG.append(True)

    return click.option("--no-color", is_flag=True, expose_value=False, is_eager=True,
                        callback=_set, help="No colors (as NO_COLOR does).")(fn)


def emit(doc: Document, fmt: str, output: Path | None, force: bool, quiet: bool,
         inputs: Sequence[Path] = (), manifest: dict[str, Any] | None = None) -> None:
    """Render ``doc`` as ``fmt`` to stdout, or to ``output`` (never an input, never over a file
    unless ``force``; see :mod:`rightsize.outputs`)."""
    from rightsize.cli.output import write_output
    from rightsize.reports.fmt import safe_line
    from rightsize.reports.render import render

    text = render(doc, fmt, manifest, color=output is None and use_color())
    write_output(text, output, force, inputs)
    if output is not None and not quiet:
        click.echo(f"wrote {safe_line(output)}", err=True)


def write_html_report(doc: Document, paths: list[Path], output: Path | None, force: bool,
                      quiet: bool) -> None:
    """The optional HTML page: named after ``-o`` (``a.json`` -> ``a.report.html``), in the one
    run directory, or in the current directory. An existing page is replaced when rightsize
    wrote it (with or without ``force``), else kept with a note; a failure to write it is a warning."""
    from rightsize import outputs
    from rightsize.errors import OutputExistsError, RightsizeError
    from rightsize.reports.fmt import safe_line
    from rightsize.reports.render import default_html_path, render

    target = outputs.derived_report_path(output, default_html_path(paths))
    if target is None:
        if not quiet:
            click.echo(f"no HTML report: {safe_line(output)} is not a regular file", err=True)
        return
    try:
        # a derived page rightsize wrote before is its own: replaced, never silently kept
        checked = outputs.check_target(target, paths, True, derived=True)
        page = outputs.write_text(checked, render(doc, "html"))
    except OutputExistsError:
        if not quiet:
            click.echo(f"kept the existing report {safe_line(target)} (it is not a report "
                       "rightsize wrote)", err=True)
        return
    except RightsizeError as exc:
        click.echo(f"rightsize: warning: no HTML report: {safe_line(exc)}", err=True)
        return
    if not quiet:
        click.echo(f"report: {safe_line(page)}", err=True)
        opener = "open" if sys.platform == "darwin" else "xdg-open"
        click.echo(f"next: rightsize report {safe_line(' '.join(map(str, paths)))} "
                   "--format text", err=True)
        click.echo(f"      {opener} {safe_line(page)}", err=True)
