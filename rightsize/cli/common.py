"""What the commands share: the catalog option and loading, the definitions option, colors,
and writing the rendered analysis and the HTML report.

Everything a command prints about an analysis goes through the renderer interface
(:mod:`rightsize.reports.render`), and colors only through :func:`use_color`, so ``NO_COLOR``
(no-color.org) holds for every command. Only click is imported at module level.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
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


def load_catalog_for_cli(path: Path | None) -> Catalog:
    """The shipped catalog with ``$RIGHTSIZE_CATALOG`` files (``os.pathsep``-separated), then
    ``path``, applied (the last one wins)."""
    from rightsize.catalog import load_catalog, parse_catalog_text
    from rightsize.errors import InputError

    paths = [Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p]
    paths += [path] if path else []
    files = []
    for p in paths:
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(p, f"cannot read the catalog file ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise InputError(p, "the catalog file is not UTF-8 text") from None
        files.append(parse_catalog_text(text, str(p)))
    return load_catalog(files)


def use_color(stream: IO[str] | None = None) -> bool:
    """Colors on a terminal only, and never when ``NO_COLOR`` is set (no-color.org)."""
    stream = sys.stdout if stream is None else stream
    return stream.isatty() and not os.environ.get("NO_COLOR")


def emit(doc: Document, fmt: str, output: Path | None, force: bool, quiet: bool,
         manifest: dict[str, Any] | None = None) -> None:
    """Render ``doc`` as ``fmt`` to stdout, or to ``output`` (never over a file unless force)."""
    from rightsize.cli.output import write_output
    from rightsize.reports.render import render

    text = render(doc, fmt, manifest, color=output is None and use_color())
    write_output(text, output, force)
    if output is not None and not quiet:
        click.echo(f"wrote {output}", err=True)


def write_html_report(doc: Document, paths: list[Path], output: Path | None, force: bool,
                      quiet: bool) -> None:
    """``report.html`` beside ``-o``, in the one run directory, or in the current directory;
    an existing page is kept (with a message) unless ``force``."""
    from rightsize.errors import OutputExistsError
    from rightsize.reports.render import default_html_path, write_report

    target = default_html_path(paths, output)
    try:
        page = write_report(doc, target, force)
    except OutputExistsError:
        if not quiet:
            click.echo(f"kept the existing report {target} (pass --force to replace it)",
                       err=True)
        return
    if not quiet:
        click.echo(f"report: {page}", err=True)
        click.echo(f"next: open {page} in a browser, or rightsize report "
                   f"{' '.join(map(str, paths))} --format text", err=True)
