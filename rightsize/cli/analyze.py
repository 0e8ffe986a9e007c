"""``rightsize analyze``: analyze traces users already have."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rightsize import outputs
from rightsize.cli.gpus import catalog_option, load_catalog_for_cli
from rightsize.cli.output import Progress, note_interrupted, tune_allocator, write_output
from rightsize.errors import OutputExistsError, RightsizeError
from rightsize.reports.fmt import safe_line


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
@catalog_option
@click.option("--target-step-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Sizing: only recommend GPUs projected to reach this step time.")
@click.option("--target-throughput", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Sizing: samples per second to reach (needs --samples-per-step).")
@click.option("--samples-per-step", type=click.IntRange(min=1), default=None,
              help="Samples (or tokens) one step processes, for throughput and cost per 1k.")
@click.option("--max-usd-per-hour", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Sizing: price cap for all GPUs of a candidate together.")
@click.option("--headroom", type=click.FloatRange(min=0, max=0.9), default=0.10,
              show_default=True, help="Sizing: fraction of GPU memory kept free above the peak.")
@click.option("--provider", default=None, help="Sizing: price GPUs from this provider only.")
@click.option("--no-report", is_flag=True, help="Do not write the HTML report.")
@click.option("-q", "--quiet", is_flag=True, help="No progress messages on stderr.")
def analyze(paths: tuple[Path, ...], fmt: str, output: Path | None, force: bool,
            step_range: str | None, timezone: str | None, catalog_path: Path | None,
            target_step_ms: float | None, target_throughput: float | None,
            samples_per_step: int | None, max_usd_per_hour: float | None, headroom: float,
            provider: str | None, no_report: bool, quiet: bool) -> None:
    """Analyze PyTorch Profiler traces: what holds the job back.

    PATHS are PyTorch Profiler traces (.json, .json.gz), directories of per-rank traces, run
    directories written by `rightsize run`, Nsight Systems SQLite exports, Nsight Compute CSV
    (ncu --csv) and GPU metric logs (nvidia-smi --query-gpu CSV, dcgm-exporter, dcgmi dmon),
    in any mix. The format is detected from the content.

    An HTML report is written too: beside -o (a.json -> a.report.html), into a run directory,
    or to ./rightsize-report.html. --force replaces only the files named on the command line and
    reports rightsize wrote itself; an output is never one of the inputs.

    \b
    Examples:
      rightsize analyze trace.pt.trace.json.gz
      rightsize analyze traces/ --format json -o analysis.json
      rightsize analyze report1.sqlite ncu.csv --target-step-ms 50
    """
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.pipeline import analyze_paths

    if target_throughput is not None and samples_per_step is None:
        raise click.UsageError("--target-throughput needs --samples-per-step")
    catalog = load_catalog_for_cli(catalog_path)
    constraints = Constraints(target_step_ms=target_step_ms, target_throughput=target_throughput,
                              max_usd_per_hour=max_usd_per_hour, headroom_fraction=headroom,
                              provider=provider)
    if output is not None:  # before a long analysis, not after
        outputs.check_target(output, paths, force)
    tune_allocator()
    progress = Progress(enabled=not quiet)
    doc = analyze_paths(list(paths), progress, step_range=step_range, timezone=timezone,
                        catalog=catalog, constraints=constraints,
                        samples_per_step=samples_per_step)
    progress.done()
    note_interrupted(doc, quiet)
    if fmt == "json":
        import json
        text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    else:
        from rightsize.reports.text import render_text
        text = render_text(doc, color=output is None and sys.stdout.isatty())
    write_output(text, output, force, paths)
    if output is not None and not quiet:
        click.echo(f"wrote {safe_line(output)}", err=True)
    if not no_report:
        _write_report(doc, list(paths), output, force, quiet)


def _write_report(doc: dict, paths: list[Path], output: Path | None, force: bool,
                  quiet: bool) -> None:
    """The optional HTML report: a failure to write it is a warning, not a failed analysis."""
    from rightsize.reports.render import default_html_path, render

    target = outputs.derived_report_path(output, default_html_path(paths))
    if target is None:
        if not quiet:
            click.echo(f"no HTML report: {safe_line(output)} is not a regular file", err=True)
        return
    try:
        checked = outputs.check_target(target, paths, force, derived=True)
        page = outputs.write_text(checked, render(doc, "html"))
    except OutputExistsError:
        if not quiet:
            why = ("it is not a report rightsize wrote" if force
                   else "pass --force to replace it")
            click.echo(f"kept the existing report {safe_line(target)} ({why})", err=True)
        return
    except RightsizeError as exc:
        click.echo(f"rightsize: warning: no HTML report: {safe_line(exc)}", err=True)
        return
    if not quiet:
        click.echo(f"report: {safe_line(page)}", err=True)
        click.echo(f"next: open {safe_line(page)} in a browser, or rightsize report "
                   f"{safe_line(' '.join(map(str, paths)))} --format text", err=True)
