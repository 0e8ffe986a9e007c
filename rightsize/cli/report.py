"""``rightsize report``: the HTML page, JSON or text of a run directory or of traces.

Thin: finds the analysis (a run directory's ``analysis.json`` when its ``schema_version`` is
this rightsize's, else a fresh analysis), then hands over to ``rightsize.reports.render``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rightsize.cli.common import no_color_option, use_color

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
    "else ./<input>.rightsize.html (re-rendered in place when rightsize wrote it); json and "
    "text go to standard output.",
)
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on the terminal.")
@no_color_option
def report(
    paths: tuple[Path, ...], fmt: str, output: Path | None, force: bool, quiet: bool
) -> None:
    """Report on RUN_DIR_OR_TRACE...: verdict, evidence, sizing, charts.

    Arguments are run directories written by `rightsize run` or anything `rightsize analyze`
    reads. A run directory's analysis.json is reused when it is current.
    """
    from rightsize import outputs
    from rightsize.reports import render
    from rightsize.reports.fmt import safe_line

    derived = output is None and fmt == "html"
    if derived:
        output = render.default_html_path(list(paths))
    # the derived page is rightsize's own when it wrote it: re-rendered in place
    force = force or (derived and output is not None and outputs.is_rightsize_report(output))
    if output is not None:  # before a long analysis, not after
        outputs.check_target(output, paths, force, derived=derived)
    color = use_color() if output is None else False
    doc, manifest, text = _rendered(list(paths), fmt, quiet, color)
    if output is None:
        click.echo(text, nl=False)
        return
    target = outputs.check_target(output, paths, force, derived=derived)
    written = outputs.write_text(target, text)
    if quiet:
        return
    if fmt == "html":
        click.echo(render.summary(doc, safe_line(written), manifest, color=use_color()), nl=False)
    else:
        click.echo(f"wrote {safe_line(written)}", err=True)
    click.echo(
        safe_line(f"next: {_open_command(written) if fmt == 'html' else _text_command(paths)}"),
        err=fmt != "html",
    )


# What a manifest.json whose fields have the wrong types raises while it is rendered (the
# report model trusts the documented shapes; a stored analysis.json is validated on reading).
_MISSHAPEN = (TypeError, KeyError, ValueError, AttributeError, IndexError)


def _rendered(
    paths: list[Path], fmt: str, quiet: bool, color: bool
) -> tuple[Document, dict[str, Any] | None, str]:
    """The analysis, the manifest and the rendered report. A manifest that cannot be shown is
    left out, with a note."""
    from rightsize.reports import render

    doc, manifest = _analysis(paths, quiet)
    try:
        return doc, manifest, render.render(doc, fmt, manifest, color=color)
    except _MISSHAPEN:
        if manifest is None:
            raise
    _note(f"{paths[0]}: manifest.json does not match its schema; the report leaves it out", quiet)
    return doc, None, render.render(doc, fmt, None, color=color)


def _note(message: str, quiet: bool) -> None:
    from rightsize.reports.fmt import safe_line

    if not quiet:
        click.echo(f"rightsize: note: {safe_line(message)}", err=True)


def _analysis(paths: list[Path], quiet: bool) -> tuple[Document, dict[str, Any] | None]:
    """The analysis document and, for one run directory, its manifest. The stored analysis is
    reused unless a custom catalog is set (the stored sizing used the shipped one)."""
    from rightsize import rundir
    from rightsize.cli.common import CATALOG_ENV

    if len(paths) == 1 and _is_document(paths[0]):  # a saved `analyze --format json`
        from rightsize.analyzers.document import Document

        return Document.from_json(paths[0]), None
    run_dirs = [p for p in paths if rundir.is_run_dir(p)]
    manifest = rundir.read_manifest(run_dirs[0]) if len(run_dirs) == 1 else None
    if manifest is not None and not isinstance(manifest, dict):
        manifest = None
    if len(paths) == 1 and run_dirs and not os.environ.get(CATALOG_ENV):
        doc = _stored_analysis(paths[0])
        if doc is not None:
            return doc, manifest
    return _fresh_analysis(paths, quiet), manifest


def _is_document(path: Path) -> bool:
    """A rightsize analysis document (``rightsize analyze --format json -o analysis.json``),
    told from a trace by its first keys."""
    try:
        with path.open("rb") as fh:
            head = fh.read(256).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and b'"schema_version"' in head and b'"tool"' in head


def _fresh_analysis(paths: list[Path], quiet: bool) -> Document:
    from rightsize.cli.common import load_catalog_for_cli
    from rightsize.cli.output import Progress, note_interrupted, warn
    from rightsize.pipeline import Options, run

    progress = Progress(enabled=not quiet)
    doc = run(list(paths), Options(catalog=load_catalog_for_cli(None)), progress=progress,
              warn=warn).document
    progress.done()
    note_interrupted(doc, quiet)
    return doc


def _stored_analysis(run_dir: Path) -> Document | None:
    """``analysis.json`` when this rightsize can read it (same or older schema version);
    otherwise (missing, half-written, misshapen, newer) the traces are analyzed again."""
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
