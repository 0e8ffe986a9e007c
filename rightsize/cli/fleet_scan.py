"""``rightsize fleet scan``: every job under some paths analyzed into the fleet table."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize.cli.common import no_color_option

if TYPE_CHECKING:
    from rightsize.fleet.scan import Progress, ScanSummary

DEFAULT_TABLE = Path("rightsize-fleet")

table_option = click.option(
    "--table", "table_dir", type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_TABLE, show_default=True,
    help="The fleet table's folder (a Parquet dataset; fleet report reads the same default).")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


class ScanProgress:
    """The scan's progress on a terminal (one line rewritten at most 4 times a second): jobs
    done of all, rate, ETA, bad inputs. Nothing when stderr is not a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._last = 0.0

    def __call__(self, p: Progress) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.25 and p.done < p.total:
            return
        self._last = now
        if p.phase == "finding":
            line = "fleet scan: finding jobs and reading what changed..."
        else:
            rate = p.rate_per_s
            line = f"fleet scan: {p.done}/{p.total} jobs"
            if rate:
                line += f" · {rate * 3600:,.0f} jobs/h"
            line += f" · ETA {duration(p.eta_s)}" + (f" · {p.bad} bad" if p.bad else "")
        sys.stderr.write("\r\033[K" + line[:120])
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


@click.command()
@click.argument("paths", nargs=-1, required=True)
@table_option
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="CSV of pattern,team,project: a job takes the labels of the "
                                 "first pattern matching its path (fnmatch; * crosses /).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local",
              show_default=True, help="local: processes on this machine; ray: a Ray cluster.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="local engine: processes (default: the CPUs this process may use).")
@click.option("--ray-address", default=None, metavar="HOST:PORT",
              help="ray engine: the cluster to join (default: RAY_ADDRESS, else a local one).")
@click.option("--retry-failed", is_flag=True,
              help="Analyze again the jobs whose row says failed (a crash, a killed worker).")
@click.option("--max-download-mb", type=click.IntRange(min=1), default=4096, show_default=True,
              help="Object-store URLs: the most one job's files may weigh; each worker "
                   "downloads one job at a time into a temporary folder it then removes.")
@click.option("--batch-rows", type=click.IntRange(min=1), default=64, hidden=True,
              help="Rows written together at most (tests write each row alone).")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary on stderr.")
@no_color_option
def scan(paths: tuple[str, ...], table_dir: Path, labels_path: Path | None, engine: str,
         workers: int | None, ray_address: str | None, retry_failed: bool,
         max_download_mb: int, batch_rows: int, quiet: bool) -> None:
    """Analyze every job under PATHS into the fleet table: one row per job.

    PATHS are folders (walked), files and glob patterns (quote them; ** crosses folders). Jobs
    are run directories, the ranks of one distributed job (Kineto traces in one folder whose
    distributedInfo agree) and single files: Kineto traces, Nsight Systems SQLite, Nsight
    Compute CSV, nvidia-smi/DCGM logs. Object-store URLs (s3://, gs://, memory://, file://...)
    are read through fsspec (pip install 'rightsize[fsspec]', plus s3fs or gcsfs for those
    stores), each job's files downloaded by the worker that analyzes it. Each job is keyed by
    the content of its files (an object's ETag, else its size and time in the store): a
    second scan analyzes only what is new or changed. A scan that is killed resumes where it
    stopped. An input that cannot be analyzed is a row too, with its reason.

    \b
    Examples:
      rightsize fleet scan /data/traces --labels teams.csv
      rightsize fleet scan '/data/**/rank*.pt.trace.json.gz' --table /srv/fleet
      rightsize fleet scan /data/traces --engine ray --ray-address 10.0.0.1:6379
      rightsize fleet scan s3://ml-traces/2026/ 'gs://bucket/**/*.pt.trace.json.gz'
    """
    from rightsize.engine import EngineOptions
    from rightsize.fleet.labels import read_rules
    from rightsize.fleet.scan import ScanOptions
    from rightsize.fleet.scan import scan as run_scan
    from rightsize.fleet.table import FleetTable

    rules = read_rules(labels_path) if labels_path is not None else ()
    if engine != "ray" and ray_address is not None:
        raise click.UsageError("--ray-address needs --engine ray")
    if engine == "ray" and workers is not None:
        raise click.UsageError("--workers is for the local engine (Ray schedules by its CPUs)")
    table = FleetTable.open(table_dir, create=True)
    options = ScanOptions(engine=EngineOptions(engine=engine, workers=workers,
                                               address=ray_address),
                          rules=rules, retry_failed=retry_failed, batch_rows=batch_rows,
                          max_download_bytes=max_download_mb * 1024 * 1024)
    progress = ScanProgress(not quiet)
    try:
        summary = run_scan(table, list(paths), options, progress)
    finally:
        progress.done()
    if not quiet:
        _say(summary, table_dir)


def _say(s: ScanSummary, table_dir: Path) -> None:
    from rightsize.reports.fmt import safe_line

    rate = f", {s.analyzed / s.seconds * 3600:,.0f} jobs/h" if s.analyzed and s.seconds else ""
    click.echo(f"fleet scan: {s.jobs} jobs found, {s.known} already in the table, "
               f"{s.analyzed} analyzed in {duration(s.seconds)}{rate}: {s.ok} ok, "
               f"{s.bad_input} bad inputs, {s.failed} failed", err=True)
    if s.not_inputs:
        from rightsize.fleet.discover import LEFT_OUT

        why = "; ".join(f"{LEFT_OUT.get(k, k)}: {n}" for k, n in sorted(s.left_out.items()))
        click.echo(f"  {s.not_inputs} files under the folders are not inputs and were left "
                   f"out: {why}", err=True)
    for e in s.first_errors:
        click.echo(f"  {safe_line(e)}", err=True)
    if s.bad_input + s.failed > len(s.first_errors):
        click.echo(f"  ... {s.bad_input + s.failed - len(s.first_errors)} more: their rows "
                   "say why (status, reason)", err=True)
    click.echo(f"table: {safe_line(table_dir)}", err=True)
    click.echo(f"next: rightsize fleet report --table {safe_line(table_dir)}", err=True)
