"""``rightsize analyze``: analyze traces users already have."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rightsize.cli.output import Progress, write_output


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json is the documented machine contract.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of standard output.")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@click.option("--step-range", metavar="NAME", default=None,
              help="Nsight Systems: the NVTX range that marks one step (default: ranges named "
                   "like 'step N' or 'ProfilerStep#N').")
@click.option("--timezone", metavar="TZ", default=None,
              help="nvidia-smi logs: the time zone of their timestamps (default UTC).")
@click.option("-q", "--quiet", is_flag=True, help="No progress messages on stderr.")
def analyze(paths: tuple[Path, ...], fmt: str, output: Path | None, force: bool,
            step_range: str | None, timezone: str | None, quiet: bool) -> None:
    """Analyze PyTorch Profiler traces: what holds the job back.

    PATHS are PyTorch Profiler traces (.json, .json.gz), directories of per-rank traces, run
    directories written by `rightsize run`, Nsight Systems SQLite exports, Nsight Compute CSV
    (ncu --csv) and GPU metric logs (nvidia-smi --query-gpu CSV, dcgm-exporter, dcgmi dmon),
    in any mix. The format is detected from the content.

    \b
    Examples:
      rightsize analyze trace.pt.trace.json.gz
      rightsize analyze traces/ --format json -o analysis.json
    """
    from rightsize.pipeline import analyze_paths

    progress = Progress(enabled=not quiet)
    doc = analyze_paths(list(paths), progress, step_range=step_range, timezone=timezone)
    progress.done()
    if fmt == "json":
        import json
        text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    else:
        from rightsize.reports.text import render_text
        text = render_text(doc, color=output is None and sys.stdout.isatty())
    write_output(text, output, force)
    if output is not None and not quiet:
        click.echo(f"wrote {output}", err=True)
        if fmt == "json":
            click.echo(f"next: rightsize analyze {' '.join(map(str, paths))} --format text",
                       err=True)
