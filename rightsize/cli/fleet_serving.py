"""``fleet metrics``' serving rows: the ``--slo`` and ``--hf-config`` options, reading vLLM/SGLang
metrics from the same Prometheus and window, and adding the rows to the result. Only click is
imported at module level."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rightsize.analyzers.fleet_metrics.model import FleetMetrics
    from rightsize.analyzers.serving.plan import Slo
    from rightsize.catalog import Catalog
    from rightsize.traces.fleet_series import SeriesSet
    from rightsize.traces.prometheus import Query

SLO_KEYS = ("ttft_p95_ms", "tpot_p95_ms")


def serving_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--hf-config", "hf_configs", multiple=True, metavar="[MODEL=]PATH",
                     help="A served model's config.json, for the serving rows' plan (MODEL: "
                          "the metrics' model_name it is for; repeatable).")(f)
    return click.option("--slo", default=None, metavar="ttft_p95_ms=MS,tpot_p95_ms=MS",
                        help="Serving SLO for vLLM/SGLang workloads (their serving rows).")(f)


def parse_slo(text: str | None) -> Slo | None:
    from rightsize.analyzers.serving.plan import Slo
    from rightsize.errors import RightsizeError

    if text is None:
        return None
    got: dict[str, float] = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        try:
            value = float(v)
        except ValueError:
            value = float("nan")
        if k.strip() not in SLO_KEYS or not (value > 0 and value != float("inf")):
            raise RightsizeError(f"--slo: expected ttft_p95_ms=MS,tpot_p95_ms=MS with positive "
                                 f"numbers, got {text!r}")
        got[k.strip()] = value
    if set(got) != set(SLO_KEYS):
        raise RightsizeError("--slo: give both ttft_p95_ms and tpot_p95_ms")
    return Slo(got["ttft_p95_ms"], got["tpot_p95_ms"])


def read_configs(specs: tuple[str, ...]) -> dict[str, Any]:
    from rightsize.cli.serving_load import read_model

    out: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.rpartition("=")
        out[name if sep else ""] = read_model(Path(path if sep else spec))
    return out


def add_serving(result: FleetMetrics, q: Query, data: SeriesSet, slo: Slo | None,
                configs: dict[str, Any], catalog: Catalog) -> FleetMetrics:
    """The result with a serving row per vLLM/SGLang workload of the window."""
    from rightsize.analyzers.fleet_metrics.serving import Deployed
    from rightsize.analyzers.fleet_metrics.serving_plan import rows
    from rightsize.cli.serving_plan import default_gpus
    from rightsize.traces import serving_metrics

    if data.start_ns is not None and data.end_ns is not None:
        q = dataclasses.replace(q, start_s=data.start_ns / 1e9, end_s=data.end_ns / 1e9)
    pods = serving_metrics.fetch(q)
    if not pods:
        return result
    deployed = {r.workload: Deployed(r.gpu, r.gpus_per_replica, r.replicas_now,
                                     r.usd_per_gpu_hour)
                for r in result.rows if r.gpu is not None and r.replicas_now}
    serving = rows(pods, deployed, slo, configs, default_gpus(catalog), 64, catalog)
    return dataclasses.replace(result, serving=serving)
