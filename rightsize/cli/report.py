"""``rightsize report``: the HTML page, JSON or text of a run directory or of traces.

Thin: finds the analysis (a run directory's ``analysis.json`` when its ``schema_version`` is
this rightsize's, else a fresh analysis), then hands over to ``rightsize.reports.render``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rightsize.cli.common import use_color

if TYPE_CHECKING:
    from rightsize.analyzers.document import Document

EPILOG = """\b
Examples:
  rightsize report rightsize-runs/train-20250101-120000
  rightsize report trace.pt.trace.json.gz -o resnet.html
  rightsize report RUN_DIR --format text
  rightsize report RUN_DIR --format json -o analysis.json
"""


@click.command(epilog=EPILOG)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "json", "text"]),
    default="html",
    show_default=True,
    help="html: one self-contained page that works offline.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here. Default for html: RUN_DIR/report.html for one run directory, "
    "else ./rightsize-report.html; json and text go to standard output.",
)
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on the terminal.")
def report(
    paths: tuple[Path, ...], fmt: str, output: Path | None, force: bool, quiet: bool
) -> None:
    """Report on RUN_DIR_OR_TRACE...: verdict, evidence, sizing, charts.

    Arguments are run directories written by `rightsize run` or anything `rightsize analyze`
    reads. A run directory's analysis.json is reused when it is current.
    """
    from rightsize.errors import OutputExistsError
    from rightsize.reports import render

    if output is None and fmt == "html":
        output = render.default_html_path(list(paths))
    if output is not None and output.exists() and not force:
        raise OutputExistsError(output)  # before a long analysis, not after
    doc, manifest = _analysis(list(paths), quiet)
    if output is None:
        color = use_color()
        click.echo(render.render(doc, fmt, manifest, color=color), nl=False)
        return
    written = render.write_report(doc, output, force, manifest, fmt=fmt)
    if quiet:
        return
    if fmt == "html":
        click.echo(render.summary(doc, written, manifest, color=use_color()), nl=False)
    else:
        click.echo(f"wrote {written}", err=True)
    click.echo(
        f"next: {_open_command(written) if fmt == 'html' else _text_command(paths)}",
        err=fmt != "html",
    )


def _analysis(paths: list[Path], quiet: bool) -> tuple[Document, dict[str, Any] | None]:
    """The analysis document and, for one run directory, its manifest."""
    from rightsize import rundir

    run_dirs = [p for p in paths if rundir.is_run_dir(p)]
    manifest = rundir.read_manifest(run_dirs[0]) if len(run_dirs) == 1 else None
    if len(paths) == 1 and run_dirs:
        doc = _stored_analysis(paths[0])
        if doc is not None:
            return doc, manifest
    from rightsize.cli.output import Progress
    from rightsize.pipeline import analyze_document

    progress = Progress(enabled=not quiet)
    doc = analyze_document(list(paths), progress=progress)
    progress.done()
    return doc, manifest


def _stored_analysis(run_dir: Path) -> Document | None:
    """``analysis.json`` when this rightsize can read it (same or older schema version);
    otherwise (missing, half-written, newer) the traces are analyzed again."""
    from rightsize.analyzers.document import Document
    from rightsize.errors import RightsizeError
    from rightsize.rundir import ANALYSIS

    try:
        return Document.from_json(run_dir / ANALYSIS)
    except RightsizeError:
        return None


def _open_command(path: Path) -> str:
    opener = "open" if sys.platform == "darwin" else "xdg-open"
    return f"{opener} {path}"


def _text_command(paths: tuple[Path, ...]) -> str:
    return "rightsize report " + " ".join(str(p) for p in paths) + " --format text"
