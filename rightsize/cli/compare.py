"""``rightsize compare A B``: what changed between two runs, or between two GPUs.

A and B are anything ``analyze`` reads (a trace, a run directory, an Nsight export) or a saved
analysis JSON (``rightsize analyze --format json``), detected by its ``schema_version`` and
``tool.name``. Each side is analyzed with the usual pipeline (:func:`rightsize.analyze`), then
:mod:`rightsize.analyzers.compare` matches and diffs them; the renderer is
``rightsize.reports.compare_text.COMPARE``. Only click is imported at module level.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize.cli.common import load_catalog_for_cli, use_color

if TYPE_CHECKING:
    from rightsize.analyzers.compare import Side

_SNIFF_BYTES = 4096


def _is_saved_analysis(path: Path) -> bool:
    """A JSON object whose first keys are rightsize's ``schema_version`` and ``tool`` (a
    Kineto trace is JSON too, so only the head is sniffed before parsing the whole file)."""
    if not path.is_file() or path.suffix.lower() != ".json":
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return False
    if not head.lstrip().startswith("{") or '"schema_version"' not in head:
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    tool = data.get("tool") if isinstance(data, dict) else None
    return isinstance(tool, dict) and tool.get("name") == "rightsize"


def load_side(path: Path) -> Side:
    """One side: a saved document (no frames), or the analysis of the path with its frames."""
    from rightsize.analyzers.compare import Side
    from rightsize.api import Analysis, analyze

    if _is_saved_analysis(path):
        return Side(str(path), Analysis.from_json(path).document)
    analysis = analyze(path)
    ranks = analysis.ranks
    if not ranks:  # metric logs alone: a document without frames
        return Side(str(path), analysis.document)
    # the document's top level is the rank with the most kernel time; compare that one
    primary = max(ranks, key=lambda r: r.result.kernel_ns)
    note = (f"{path}: {len(ranks)} ranks; the one with the most kernel time (rank "
            f"{primary.rank}) is compared")
    notes = (note,) if len(ranks) > 1 else ()
    return Side(str(path), analysis.document, primary.kernels, primary.ops, notes, primary.work)


@click.command()
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="json is the documented contract (docs/compare.md).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of standard output.")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No messages on stderr.")
def compare(a: Path, b: Path, fmt: str, output: Path | None, force: bool, quiet: bool) -> None:
    """What changed from A to B: step time (with its noise), shares, ops and kernels.

    A and B are traces, run directories, Nsight exports, or saved analysis JSON
    (rightsize analyze --format json). Ops are matched by call path, so the same model
    matches across GPU vendors; when the GPUs differ, rightsize's projection of A onto B's
    GPU is checked against what B measured.
    """
    from rightsize.analyzers.compare import compare_sides
    from rightsize.cli.output import write_output
    from rightsize.errors import RightsizeError

    for p in (a, b):
        if not p.exists():
            raise RightsizeError(f"{p}: no such file or directory")
    result = compare_sides(load_side(a), load_side(b), load_catalog_for_cli(None))
    from rightsize.reports.compare_text import COMPARE
    from rightsize.reports.renderer import Style, render_as

    tty = output is None and sys.stdout.isatty()
    style = Style(color=output is None and use_color(),
                  width=shutil.get_terminal_size((80, 24)).columns if tty else 80)
    text = render_as(COMPARE, result, fmt, style)
    write_output(text, output, force)
    if output is not None and not quiet:
        click.echo(f"wrote {output}", err=True)
