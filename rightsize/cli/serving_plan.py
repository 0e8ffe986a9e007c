"""``rightsize serving plan``: the cheapest GPU type x TP x PP x replicas x batch limits that
meets TTFT and TPOT p95 SLOs at a request rate (:mod:`rightsize.analyzers.serving.planner`).

Prints the plan (text, ``--format json`` or a self-contained ``--format html`` page), the
``vllm serve`` arguments, and with ``--manifests DIR`` writes a Deployment and a KEDA
ScaledObject (never over existing files without ``--force``), checked as ``rightsize plan``'s
are. SLOs no listed GPU meets are one line and exit 1. Only click is imported at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli
from rightsize.cli.estimate import Count
from rightsize.cli.serving_load import (
    engine_option,
    load_choice,
    positive_rate,
    precision_option,
    read_model,
    read_requests,
)
from rightsize.cli.serving_measured import load_calibration, measured_options

if TYPE_CHECKING:
    from rightsize.analyzers.serving.plan import ServingPlan
    from rightsize.catalog import Catalog

DEFAULT_PLAN_REQUESTS = 800  # per simulation (a Poisson load; a CSV is simulated whole)


def _slo(ctx: click.Context, param: click.Parameter, value: float) -> float:
    from rightsize.errors import RightsizeError

    if not (value > 0 and value != float("inf")):
        raise RightsizeError(f"--{(param.name or '').replace('_', '-')}: must be a positive "
                             "number of milliseconds")
    return value


def default_gpus(catalog: Catalog) -> tuple[str, ...]:
    """Every catalog GPU with a price that is not a consumer card."""
    return tuple(g.name for g in catalog.gpus if not g.consumer and catalog.price(g.name))


@click.command()
@click.option("--hf-config", "hf_config", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The served model's Hugging Face config.json.")
@click.option("--rate", type=float, callback=positive_rate, help="Requests per second.")
@click.option("--isl", type=Count(), help="Prompt tokens per request (with --rate).")
@click.option("--osl", type=Count(), help="Output tokens per request (with --rate).")
@click.option("--requests", "requests_csv", type=click.Path(dir_okay=False, path_type=Path),
              help="Or a CSV of arrival_s,prompt_tokens,output_tokens (its rate is the load).")
@click.option("--ttft-p95-ms", required=True, type=float, callback=_slo,
              help="SLO: 95th percentile time to first token.")
@click.option("--tpot-p95-ms", required=True, type=float, callback=_slo,
              help="SLO: 95th percentile time per output token.")
@click.option("--gpus", help="Comma-separated catalog GPUs (default: every priced, "
                             "non-consumer GPU).")
@click.option("--max-gpus", type=Count(), default=64, show_default=True,
              help="GPUs in all (replicas x TP x PP).")
@precision_option
@engine_option
@click.option("--num-requests", type=Count(), default=DEFAULT_PLAN_REQUESTS,
              show_default=True, help="Requests per simulation with --rate.")
@click.option("--seed", type=int, default=0, show_default=True, help="Arrivals' seed.")
@measured_options
@catalog_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the plan here instead of stdout.")
@click.option("--manifests", "manifests_dir", type=click.Path(path_type=Path), default=None,
              help="Write a Deployment and a KEDA ScaledObject here.")
@click.option("--force", is_flag=True, help="Overwrite --output and existing manifests.")
@click.option("--name", default="vllm", show_default=True, help="Deployment name.")
@click.option("--image", default="vllm/vllm-openai:latest", show_default=True,
              help="Container image in the Deployment.")
@click.option("--model-id", default=None, help="What vllm serve loads (default: the config "
                                               "file's name).")
@click.option("--prometheus", default="http://prometheus-server.monitoring.svc:9090",
              show_default=True, help="Prometheus address for KEDA.")
def plan(hf_config: Path, rate: float | None, isl: int | None, osl: int | None,
         requests_csv: Path | None, ttft_p95_ms: float, tpot_p95_ms: float, gpus: str | None,
         max_gpus: int, precision: str, engine: str, num_requests: int, seed: int,
         measured: tuple[str, ...], measured_hf_config: Path | None, measured_gpu: str | None,
         measured_tp: int | None, measured_window: str,
         comm_model: Path | None, catalog_path: Path | None, fmt: str,
         output: Path | None, manifests_dir: Path | None, force: bool, name: str, image: str,
         model_id: str | None, prometheus: str) -> None:
    """The cheapest deployment meeting TTFT and TPOT p95 SLOs at a request rate."""
    from rightsize.analyzers.serving.load import rate_of
    from rightsize.analyzers.serving.plan import Load, Slo
    from rightsize.analyzers.serving.planner import plan as make_plan
    from rightsize.analyzers.serving.search import Space
    from rightsize.cli.output import write_output
    from rightsize.errors import RightsizeError

    load_choice(requests_csv, rate, isl, osl)
    config = read_model(hf_config)
    catalog = load_catalog_for_cli(catalog_path)
    listed = tuple(catalog.gpu(g.strip()).name for g in gpus.split(",") if g.strip()) \
        if gpus else default_gpus(catalog)
    if not listed:
        raise RightsizeError("--gpus: no GPU named")
    if requests_csv is not None:
        reqs = read_requests(requests_csv)
        load = Load.of_csv(reqs, rate_of(reqs), f"{requests_csv.name}: {len(reqs)} requests",
                           seed)
    else:
        assert rate is not None and isl and osl
        load = Load.poisson(rate, isl, osl, num_requests, seed)
    from rightsize.analyzers.serving.tables import default_tables

    calibration = load_calibration(measured, measured_hf_config, config, precision, catalog,
                                   default_tables(), measured_gpu, measured_tp, measured_window,
                                   comm_model, engine)
    result = make_plan(config, hf_config.stem, load, Slo(ttft_p95_ms, tpot_p95_ms),
                       Space(listed, max_gpus, precision, engine), catalog, calibration,
                       curves=fmt == "html")
    written, checked = ([], "") if manifests_dir is None else _write(
        result, manifests_dir, force, name, image, model_id or hf_config.stem, prometheus,
        max_gpus, (hf_config, *([requests_csv] if requests_csv else [])))
    text = _render(result, fmt, written, checked)
    write_output(text, output, force, (hf_config,))
    if output is not None:
        click.echo(f"wrote {output}", err=True)


def _render(result: ServingPlan, fmt: str, written: list[Path], checked: str) -> str:
    from rightsize.reports.renderer import Style, render_as
    from rightsize.reports.serving_html import ServingPlanRenderer

    return render_as(ServingPlanRenderer(tuple(map(str, written)), checked or None), result,
                     fmt, Style())


def _write(result: ServingPlan, directory: Path, force: bool, name: str, image: str,
           model_id: str, server: str, max_gpus: int,
           inputs: tuple[Path, ...]) -> tuple[list[Path], str]:
    from rightsize.cli.plan import check_and_write
    from rightsize.errors import RightsizeError
    from rightsize.reports.plan_manifests import check_name
    from rightsize.reports.serving_manifests import manifests

    if (bad := check_name(name)) is not None:
        raise RightsizeError(f"--name: {bad}")
    if result.recommended is not None and result.recommended.pp > 1:
        raise RightsizeError("--manifests: the plan pipelines over nodes (PP > 1), which one "
                             "Deployment cannot span (use a LeaderWorkerSet)")
    items = manifests(result, name, image, model_id, server, max_gpus)
    return check_and_write(items, directory, force, inputs)
