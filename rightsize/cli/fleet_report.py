"""``rightsize fleet report``: the fleet table as text, JSON or an HTML page."""

from __future__ import annotations

import os
import re
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize.cli.common import no_color_option
from rightsize.cli.fleet_scan import table_option

if TYPE_CHECKING:
    from rightsize.fleet.report import Filters, FleetReport, Usage
    from rightsize.fleet.table import FleetTable

_KEY = re.compile(r"[0-9a-f]{64}")
_DOC = re.compile(r"documents/[0-9a-f]{2}/[0-9a-f]{64}\.json\.gz")
HTML_NAME = "fleet-report.html"  # inside the table folder unless -o says elsewhere
DAY = click.DateTime(formats=["%Y-%m-%d"])


def _day(v: datetime | None) -> date | None:
    return v.date() if v is not None else None


@click.command()
@table_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="html: one self-contained page linking each job's page.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=f"Write here (html default: TABLE/{HTML_NAME}; text and json: stdout).")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@click.option("--team", "teams", multiple=True, help="Only these teams (repeatable).")
@click.option("--project", "projects", multiple=True, help="Only these projects (repeatable).")
@click.option("--source", "sources", multiple=True, type=click.Choice(["trace", "metrics"]),
              help="Only jobs of traces (fleet scan, serve) or workloads of cluster metrics "
                   "(fleet metrics --table); repeatable; default both.")
@click.option("--since", type=DAY, default=None, help="Jobs recorded on or after this day (UTC).")
@click.option("--until", type=DAY, default=None,
              help="Jobs recorded on or before this day (UTC); 'this week' ends here "
                   "(default: the newest recorded day).")
@click.option("--usage", "usage_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="CSV label,gpu_hours: GPU-hours per month of each job label "
                                 "(a job's name, else its project); savings become per month.")
@click.option("-q", "--quiet", is_flag=True, help="No messages on stderr.")
@no_color_option
def report(table_dir: Path, fmt: str, output: Path | None, force: bool, teams: tuple[str, ...],
           projects: tuple[str, ...], sources: tuple[str, ...], since: datetime | None,
           until: datetime | None, usage_path: Path | None, quiet: bool) -> None:
    """Where the fleet's GPU-hours and money go: by sizing verdict, bottleneck, team and
    source, the over-provisioned jobs (traced, or workloads of cluster metrics) ranked by what
    moving them saves, the most common bottlenecks with their fixes, and what changed since the
    previous week.

    \b
    Examples:
      rightsize fleet report
      rightsize fleet report --usage gpu-hours.csv --team vision --since 2026-11-01
      rightsize fleet report --format html -o fleet.html
      rightsize fleet report --source metrics
    """
    from rightsize.fleet.report import Filters, read_usage
    from rightsize.fleet.table import FleetTable
    from rightsize.reports.fmt import safe_line

    if since is not None and until is not None and since > until:
        raise click.UsageError("--since is after --until")
    table = FleetTable.open(table_dir, create=False)
    usage = read_usage(usage_path) if usage_path is not None else None
    filters = Filters(teams, projects, _day(since), _day(until), tuple(dict.fromkeys(sources)))
    model = _build(table, filters, usage)
    if fmt == "html":
        page = _write_html(table, model, output, force)
        if not quiet:
            click.echo(f"report: {safe_line(page)}", err=True)
        return
    from rightsize.cli.output import write_output
    from rightsize.reports.fleet_text import FleetRenderer
    from rightsize.reports.renderer import Style, render_as

    text = render_as(FleetRenderer(), model, fmt, Style())

    write_output(text, output, force)
    if output is not None and not quiet:
        click.echo(f"wrote {safe_line(output)}", err=True)


def _build(table: FleetTable, filters: Filters, usage: Usage | None) -> FleetReport:
    """The model; read again once if a scan merged a day's files away mid-read."""
    import polars as pl

    from rightsize.fleet.report import build

    try:
        return build(table.rows(), str(table.root), filters, usage)
    except (FileNotFoundError, pl.exceptions.PolarsError):
        return build(table.rows(), str(table.root), filters, usage)


def _write_html(table: FleetTable, model: FleetReport, output: Path | None,
                force: bool) -> Path:
    from rightsize import outputs
    from rightsize.reports.fleet_text import FleetRenderer
    from rightsize.reports.renderer import Style, render_as

    derived = output is None
    target = outputs.check_target(output or table.root / HTML_NAME, [], force or derived,
                                  derived=derived)
    pages = job_pages(table, model)
    base = target.path.absolute().parent
    links = {k: Path(os.path.relpath(p.absolute(), base)).as_posix() for k, p in pages.items()}
    return outputs.write_text(target, render_as(FleetRenderer(links), model, "html", Style()))


def job_pages(table: FleetTable, model: FleetReport) -> dict[str, Path]:
    """Each listed job's report page, rendered from its stored document once (a job's key is
    its content, so its page never goes stale) into the table's ``reports/``."""
    from rightsize.analyzers.document import Document
    from rightsize.errors import RightsizeError
    from rightsize.fleet.analyze import read_document
    from rightsize.fleet.table import REPORTS_DIR, write_bytes_atomic
    from rightsize.reports.render import render

    listed = {s.key: s.document for s in model.over_provisioned}
    listed.update({c.key: c.document for c in model.changed})
    listed.update({j.key: j.document for j in model.job_lines})
    pages: dict[str, Path] = {}
    for key, doc in listed.items():
        # only what a scan writes: a hex key, a document under documents/ (a table from
        # elsewhere cannot point a page or a read outside the table)
        if not doc or not _KEY.fullmatch(key) or not _DOC.fullmatch(doc):
            continue
        page = table.root / REPORTS_DIR / f"{key}.html"
        if not page.is_file():
            source = table.root / doc
            if not source.is_file():
                continue  # a document removed by hand: the job is listed without a link
            try:
                html = render(Document.from_json(read_document(source)), "html")
            except (RightsizeError, OSError, ValueError):
                continue  # unreadable (a newer rightsize's, damaged): listed without a link
            write_bytes_atomic(html.encode("utf-8"), page)
        pages[key] = page
    return pages
