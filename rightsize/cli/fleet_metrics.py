"""``rightsize fleet metrics``: every GPU workload in Prometheus (or in saved metric files)
right-sized from its dcgm-exporter / cAdvisor series, krr-style.

Reads ``--prometheus URL`` (raw samples reduced per step; range queries as the fallback) over
``--since`` or ``--start``/``--end`` at ``--step``, narrowed by ``--selector``, a bearer token
from ``$RIGHTSIZE_PROMETHEUS_TOKEN`` or the variable ``--token-env`` names) or ``--from FILE``
(repeatable: saved range-query JSON, the Alibaba-shaped CSVs, nvidia-smi/DCGM logs), analyzes
(:mod:`rightsize.analyzers.fleet_metrics`), prints text/JSON/CSV/HTML and writes Kubernetes
patches to ``--patches DIR``. Only click is imported at module level.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli
from rightsize.cli.fleet_serving import add_serving, parse_slo, read_configs, serving_options

if TYPE_CHECKING:
    from rightsize.analyzers.fleet_metrics import FleetMetrics
    from rightsize.fleet.table import FleetTable
    from rightsize.reports.fleet_metrics_patches import Patch
    from rightsize.traces.fleet_series import SeriesSet
    from rightsize.traces.prometheus import Query

TOKEN_ENV = "RIGHTSIZE_PROMETHEUS_TOKEN"
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(?<![\d.])(\d++(?:\.\d++)?)(ms|s|m|h|d|w)")


def seconds(text: str, option: str) -> float:
    """A Prometheus-style duration (``30s``, ``6h``, ``7d``, ``1h30m``) in seconds."""
    from rightsize.errors import RightsizeError

    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise RightsizeError(f"{option}: {text!r} is not a duration (30s, 6h, 7d, 1h30m)")
    value = sum(float(n) * _UNITS[u] for n, u in parts)
    if value <= 0:
        raise RightsizeError(f"{option}: {text!r} must be longer than zero")
    return value


def when(text: str, option: str) -> float:
    """Epoch seconds from a number or an RFC 3339 / ISO 8601 time (UTC when no zone)."""
    from rightsize.errors import RightsizeError

    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text)  # 3.11 reads a trailing Z
    except ValueError:
        raise RightsizeError(f"{option}: {text!r} is neither epoch seconds nor an ISO time") \
            from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


@click.command()
@click.option("--prometheus", "url", default=None, metavar="URL",
              help="Prometheus (or a compatible API) to read the GPU metrics from.")
@click.option("--from", "files", multiple=True, type=click.Path(path_type=Path),
              help="Or metric files: saved query_range JSON, value/timestamp/pod CSVs (the "
                   "Alibaba GenAI-2026 shape), nvidia-smi/DCGM logs. Repeatable.")
@click.option("--since", default="7d", show_default=True,
              help="Window length back from --end.")
@click.option("--start", default=None, help="Window start (epoch seconds or ISO 8601).")
@click.option("--end", default=None, help="Window end (default: now).")
@click.option("--step", default="30s", show_default=True,
              help="Query resolution: one point per step per series.")
@click.option("--selector", default="", help='Label matchers, e.g. namespace=~"ml-.*".')
@click.option("--token-env", default=TOKEN_ENV, show_default=True,
              help="Environment variable that holds a bearer token for Prometheus.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=120.0,
              show_default=True, help="Seconds per Prometheus request.")
@click.option("--save", "save_path", type=click.Path(path_type=Path), default=None,
              help="Also write what Prometheus returned as a JSON array (read it back with "
                   "--from).")
@click.option("--group-by", default=None,
              help="Comma-separated labels that name a workload (default: namespace + the "
                   "pod's owner).")
@click.option("--gpu", default=None,
              help="The current GPU where the metrics do not name it (no modelName label).")
@click.option("--provider", default=None, help="Price workloads at this provider's prices.")
@click.option("--headroom", type=click.FloatRange(min=0, max=0.9), default=0.2,
              show_default=True, help="Memory and busy-time share kept free.")
@click.option("--min-window", default="6h", show_default=True,
              help="Shorter windows are inconclusive.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv", "html"]),
              default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the result here instead of stdout.")
@click.option("--patches", "patches_dir", type=click.Path(path_type=Path), default=None,
              help="Write Kubernetes patches (and HPA/KEDA objects) for the changes here.")
@click.option("--force", is_flag=True, help="Overwrite --output, --save and existing patches.")
@click.option("--table", "table_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None,
              help="Also write each workload as a row (source metrics) of this fleet table "
                   "(the same workload and window again replaces its row); fleet report "
                   "shows them beside the traced jobs.")
@serving_options
@catalog_option
@click.option("-q", "--quiet", is_flag=True, help="No progress or messages on stderr.")
def metrics(url: str | None, files: tuple[Path, ...], since: str, start: str | None,
            end: str | None, step: str, selector: str, token_env: str, timeout_s: float,
            save_path: Path | None, group_by: str | None, gpu: str | None,
            provider: str | None, headroom: float, min_window: str, fmt: str,
            output: Path | None, patches_dir: Path | None, force: bool,
            table_dir: Path | None, slo: str | None, hf_configs: tuple[str, ...],
            catalog_path: Path | None, quiet: bool) -> None:
    """Right-size every GPU workload from cluster metrics (dcgm-exporter, cAdvisor)."""
    from rightsize.analyzers.fleet_metrics import Thresholds, analyze
    from rightsize.cli.output import Progress, write_output
    from rightsize.errors import RightsizeError

    if (url is None) == (not files):
        raise RightsizeError("give one of --prometheus URL or --from FILE")
    if save_path is not None and url is None:
        raise RightsizeError("--save needs --prometheus")
    th = Thresholds(headroom=headroom, min_window_s=seconds(min_window, "--min-window"))
    serving_slo, configs = parse_slo(slo), read_configs(hf_configs)
    catalog = load_catalog_for_cli(catalog_path)
    if gpu is not None:
        catalog.gpu(gpu)  # a name the catalog does not know: one line now, not a row later
    progress = Progress(enabled=not quiet)
    t0 = time.monotonic()
    started = datetime.now(UTC)
    table = _table(table_dir) if table_dir is not None else None
    if url is not None:
        data = _from_prometheus(url, since, start, end, step, selector, token_env, timeout_s,
                                save_path, force, progress)
    else:
        data = _from_files(files)
    groups = tuple(g.strip() for g in group_by.split(",") if g.strip()) if group_by else None
    result = analyze(data, catalog, th, gpu=gpu, group_by=groups, provider=provider)
    if url is not None:
        result = add_serving(result, _query(url, selector, token_env, timeout_s), data,
                             serving_slo, configs, catalog)
    progress.done()
    written, checked = ([], "") if patches_dir is None else _write_patches(
        result, patches_dir, force, th.target_pct, url or "http://prometheus:9090", files)
    nxt = ("kubectl patch --type strategic --patch-file " + str(written[0]) if written
           else "" if fmt == "html" else
           "the same with --format html -o fleet-metrics.html (the page), --patches DIR (the "
           "Kubernetes changes)")
    from rightsize.reports.fleet_metrics import FleetMetricsRenderer
    from rightsize.reports.renderer import Style, render_as

    text = render_as(FleetMetricsRenderer(nxt), result, fmt, Style())
    write_output(text, output, force, files)
    if table is not None:
        _write_rows(table, result, url, files, started)
    if not quiet:
        took = time.monotonic() - t0
        click.echo(f"rightsize: {len(result.rows)} workloads from {len(data.series)} series, "
                   f"{data.points.height:,} points in {took:.1f} s"
                   + (f"; wrote {output}" if output else "")
                   + (f"; {len(written)} patch files in {patches_dir} ({checked})"
                      if patches_dir else "")
                   + (f"; {len(result.rows)} rows in the fleet table {table_dir} (see them: "
                      f"rightsize fleet report --table {table_dir})" if table_dir else ""),
                   err=True)


def _table(table_dir: Path) -> FleetTable:
    """The table, opened (or made) before anything is read: a folder that is not a fleet
    table is one line now, not after minutes of queries."""
    from rightsize.fleet.table import FleetTable

    return FleetTable.open(table_dir, create=True)


def _write_rows(table: FleetTable, result: FleetMetrics, url: str | None,
                files: tuple[Path, ...], started: datetime) -> None:
    """The workloads as rows (source ``metrics``), under the table's one-writer lock, each
    file whole or absent (:meth:`~rightsize.fleet.table.FleetTable.replace`)."""
    from rightsize.fleet.metrics_rows import public_url, rows

    paths = [public_url(url)] if url is not None else [str(f.absolute()) for f in files]
    with table.writer():
        table.replace(rows(result, paths, started))
        table.compact()


def _from_files(files: tuple[Path, ...]) -> SeriesSet:
    from rightsize.traces import fleet_files
    from rightsize.traces.fleet_series import merge

    sets = [fleet_files.read(p) for p in files]
    return merge(sets, ", ".join(str(p) for p in files))


def _query(url: str, selector: str, token_env: str, timeout_s: float) -> Query:
    from rightsize.traces import prometheus

    return prometheus.Query(prometheus.check_url(url), 0.0, 0.0, 0.0, selector,
                            os.environ.get(token_env) or None, timeout_s)


def _from_prometheus(url: str, since: str, start: str | None, end: str | None, step: str,
                     selector: str, token_env: str, timeout_s: float, save_path: Path | None,
                     force: bool, progress: Callable[[str], None]) -> SeriesSet:
    from rightsize import outputs
    from rightsize.errors import RightsizeError
    from rightsize.traces import prometheus

    step_s = seconds(step, "--step")
    end_s = when(end, "--end") if end else time.time()
    start_s = when(start, "--start") if start else end_s - seconds(since, "--since")
    if start_s >= end_s:
        raise RightsizeError("--start must be before --end")
    q = prometheus.Query(prometheus.check_url(url), start_s, end_s, step_s, selector,
                         os.environ.get(token_env) or None, timeout_s)
    bodies: list[bytes] = []
    target = outputs.check_target(save_path, (), force) if save_path is not None else None
    data = prometheus.fetch(q, progress=progress,
                            save=(lambda _m, b: bodies.append(b)) if target else None)
    if target is not None:
        outputs.write_text(target, "[" + ",\n".join(b.decode() for b in bodies) + "]\n")
    return data


def _write_patches(result: FleetMetrics, directory: Path, force: bool, target_pct: float,
                   server: str, inputs: tuple[Path, ...]) -> tuple[list[Path], str]:
    from rightsize import outputs
    from rightsize.errors import RightsizeError
    from rightsize.reports.fleet_metrics_patches import patches, validation_object

    items = [p for r in result.rows for p in patches(r, target_pct, server)]
    checked = openapi_check(items, validation_object)
    if directory.exists() and not directory.is_dir():
        raise RightsizeError(f"--patches {directory}: exists and is not a directory")
    targets = [outputs.check_target(directory / p.filename, inputs, force) for p in items]
    if items:
        directory.mkdir(parents=True, exist_ok=True)
    for p, t in zip(items, targets, strict=True):
        outputs.write_text(t, p.text)
    return [directory / p.filename for p in items], checked


def openapi_check(items: list[Patch], full: Callable[[Patch], dict[str, Any]]) -> str:
    """Each patch merged onto its kind's smallest valid object, and each HPA, validated against
    the Kubernetes OpenAPI schemas when ``kubernetes-validate`` is installed."""
    from rightsize.cli.plan import K8S_VERSION
    from rightsize.errors import RightsizeError

    try:
        import kubernetes_validate  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return "not validated (pip install kubernetes-validate to check them)"
    core = [p for p in items if not p.obj["apiVersion"].startswith("keda.sh/")]
    for p in core:
        try:
            kubernetes_validate.validate(full(p), K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise RightsizeError(f"{p.filename}: fails the Kubernetes {K8S_VERSION} OpenAPI "
                                 f"schema: {exc.message}") from None
    return (f"{len(core)} validated against the Kubernetes {K8S_VERSION} OpenAPI schemas "
            "(patches merged onto a minimal object); KEDA ScaledObjects (a CRD) not validated")
