"""``rightsize serving simulate``: one deployment under an online load, through the
continuous-batching simulation (:mod:`rightsize.analyzers.serving.simulate`).

The load is ``--rate`` with ``--isl``/``--osl`` (Poisson arrivals, ``--num-requests``) or a
``--requests`` CSV (``arrival_s,prompt_tokens,output_tokens``); the scheduler limits default to
what ``vllm serve`` picks on the GPU. ``--measured-rate FILE`` calibrates every step on a
measured online run first (:mod:`rightsize.analyzers.serving.online_fit`). Text or
``--format json`` (docs/serving.md). Only click is imported at module level.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli
from rightsize.cli.estimate import Count
from rightsize.cli.serving_load import (
    DEFAULT_REQUESTS,
    engine_option,
    load_choice,
    positive_rate,
    precision_option,
    read_measured_run,
    read_model,
    read_requests,
)
from rightsize.cli.serving_measured import load_calibration, measured_options

if TYPE_CHECKING:
    from rightsize.analyzers.serving.online_fit import OnlineFit
    from rightsize.analyzers.serving.simulate import Limits, Requests
    from rightsize.analyzers.serving.tabulated import Tabulated
    from rightsize.traces.serving_runs import MeasuredRun


@click.command()
@click.option("--hf-config", "hf_config", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The served model's Hugging Face config.json.")
@click.option("--gpu", required=True, help="Catalog GPU name (rightsize gpus lists them).")
@click.option("--tp", type=Count(), default=1, show_default=True, help="Tensor-parallel GPUs.")
@click.option("--pp", type=Count(), default=1, show_default=True, help="Pipeline stages.")
@click.option("--replicas", type=Count(), default=1, show_default=True,
              help="Replicas sharing the load (requests dealt at random).")
@click.option("--requests", "requests_csv", type=click.Path(dir_okay=False, path_type=Path),
              help="CSV of arrival_s,prompt_tokens,output_tokens.")
@click.option("--rate", type=float, callback=positive_rate,
              help="Poisson arrivals, requests per second.")
@click.option("--isl", type=Count(), help="Prompt tokens per request (with --rate).")
@click.option("--osl", type=Count(), help="Output tokens per request (with --rate).")
@click.option("--num-requests", type=Count(), default=DEFAULT_REQUESTS, show_default=True,
              help="Requests simulated with --rate.")
@click.option("--max-num-seqs", type=Count(), help="vLLM's limit on running requests "
              "(default: what vllm serve picks on this GPU).")
@click.option("--max-num-batched-tokens", type=Count(),
              help="vLLM's token budget per step (default: vllm serve's on this GPU).")
@click.option("--no-chunked-prefill", is_flag=True,
              help="Prefill whole prompts in steps of their own (vLLM V0).")
@precision_option
@engine_option
@click.option("--measured-rate", type=click.Path(dir_okay=False, path_type=Path),
              help="Calibrate on a measured online run: a benchmark_serving.py result JSON, "
                   "or {gpu, tp, rate, tpot_ms_p50, ttft_ms_p50}.")
@click.option("--seed", type=int, default=0, show_default=True, help="Arrivals' seed.")
@measured_options
@catalog_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True)
def simulate(hf_config: Path, gpu: str, tp: int, pp: int, replicas: int,
             requests_csv: Path | None, rate: float | None, isl: int | None, osl: int | None,
             num_requests: int, max_num_seqs: int | None, max_num_batched_tokens: int | None,
             no_chunked_prefill: bool, precision: str, engine: str, measured_rate: Path | None,
             seed: int,
             measured: tuple[str, ...], measured_hf_config: Path | None,
             measured_gpu: str | None, measured_tp: int | None, measured_window: str,
             comm_model: Path | None,
             catalog_path: Path | None, fmt: str) -> None:
    """TTFT, TPOT, ITL and E2E of one deployment under an online load, with ranges."""
    from rightsize.analyzers.serving.load import poisson
    from rightsize.analyzers.serving.online import ranges_of, run, tables, vllm_defaults
    from rightsize.analyzers.serving.simulate import Limits
    from rightsize.analyzers.serving.simulated import simulated
    from rightsize.analyzers.serving.step import Deployment, fits, step_model
    from rightsize.errors import RightsizeError
    from rightsize.reports.renderer import Style, render_as
    from rightsize.reports.serving_html import SimulatedRenderer

    load_choice(requests_csv, rate, isl, osl)
    if measured and measured_rate is not None:
        raise RightsizeError("give --measured or --measured-rate, not both")
    config = read_model(hf_config)
    catalog = load_catalog_for_cli(catalog_path)
    dep = Deployment(catalog.gpu(gpu).name, tp, pp, precision, engine=engine)
    if requests_csv is not None:
        reqs = read_requests(requests_csv)
        described = f"{requests_csv.name}: {len(reqs)} requests"
    else:
        assert rate is not None and isl and osl
        reqs = poisson(rate, isl, osl, num_requests, seed)
        described = f"Poisson arrivals at {rate:g} req/s, {isl} prompt and {osl} output tokens"
    longest = int((reqs.prompt_tokens + reqs.output_tokens).max())
    why = fits(config, dep, catalog=catalog, batch=1, seq=longest)
    if why is not None:
        raise RightsizeError(f"{dep.gpu} TP {tp} PP {pp}: {why}")
    from rightsize.analyzers.serving.tables import default_tables

    calibration = load_calibration(measured, measured_hf_config, config, precision, catalog,
                                   default_tables(), measured_gpu, measured_tp, measured_window,
                                   comm_model, engine)
    model = step_model(config, dep, calibration=calibration, catalog=catalog)
    seqs, batched = vllm_defaults(catalog.gpu(dep.gpu))
    limits = Limits(max_num_seqs or seqs, max_num_batched_tokens or batched,
                    model.kv_cache_tokens, not no_chunked_prefill)
    if limits.max_num_batched_tokens < limits.max_num_seqs:
        raise RightsizeError("--max-num-batched-tokens must be at least --max-num-seqs "
                             "(vLLM refuses it)")
    table = tables(model, limits, reqs)
    ranges, fit, by = ranges_of(model, int(reqs.prompt_tokens.mean())), None, model.calibrated_by
    if measured_rate is not None:
        run_ = read_measured_run(measured_rate)
        fit = _fit(table, limits, reqs, run_, dep.gpu, tp, seed)
        by = fit.described
    scale = fit.factor if fit else 1.0
    if fit is not None and fit.spread is not None:
        ranges = type(ranges)((1 - fit.spread, 1 - fit.spread), (1 + fit.spread, 1 + fit.spread))
    try:
        on = run(table, ranges, limits, reqs, replicas, seed=seed, scale=scale)
    except ValueError as exc:
        raise RightsizeError(str(exc)) from None
    notes = _notes(limits, seqs, batched, max_num_seqs, max_num_batched_tokens)
    result = simulated(on, model=hf_config.stem, gpu=dep.gpu, tp=tp, pp=pp,
                       precision=precision, kv_cache_tokens=model.kv_cache_tokens,
                       load=described, requests=len(reqs), calibrated_by=by, fit=fit,
                       assumes=tuple(model.assumes), notes=notes)
    click.echo(render_as(SimulatedRenderer(), result, fmt, Style()), nl=False)


def _notes(limits: Limits, seqs: int, batched: int, given_seqs: int | None,
           given_batched: int | None) -> tuple[str, ...]:
    out = []
    if given_seqs is None or given_batched is None:
        out.append(f"scheduler limits: vllm serve's defaults on this GPU where not given "
                   f"(max_num_seqs {seqs}, max_num_batched_tokens {batched})")
    return tuple(out)


def _fit(table: Tabulated, limits: Limits, reqs: Requests, measured: MeasuredRun,
         gpu: str, tp: int, seed: int) -> OnlineFit:
    """Calibrate on the measured run: its own lengths when it has them, else this load's, at
    the measured rate."""
    from rightsize.analyzers.serving.load import poisson
    from rightsize.analyzers.serving.online_fit import fit
    from rightsize.analyzers.serving.simulate import Requests
    from rightsize.errors import RightsizeError

    if measured.gpu is not None and measured.gpu.lower() != gpu.lower():
        raise RightsizeError(f"{measured.source}: measured on {measured.gpu}, simulating {gpu};"
                             " --measured-rate calibrates the deployment it was measured on")
    if measured.tp is not None and measured.tp != tp:
        raise RightsizeError(f"{measured.source}: measured at TP {measured.tp}, simulating TP "
                             f"{tp}")
    n = measured.num_prompts or len(reqs)
    if measured.input_lens and len(measured.input_lens) == len(measured.output_lens):
        prompts = list(measured.input_lens)
        outs = [max(o, 1) for o in measured.output_lens]
    elif measured.isl_mean and measured.osl_mean:
        prompts = [max(round(measured.isl_mean), 1)] * n
        outs = [max(round(measured.osl_mean), 1)] * n
    else:
        idx = [i % len(reqs) for i in range(n)]
        prompts = [int(reqs.prompt_tokens[i]) for i in idx]
        outs = [int(reqs.output_tokens[i]) for i in idx]
    import numpy as np

    if math.isinf(measured.rate_per_s):
        arrivals = np.zeros(len(prompts))
    else:
        arrivals = poisson(measured.rate_per_s, 1, 1, len(prompts), seed).arrival_s
    run_reqs = Requests(arrivals, np.array(prompts, np.int64), np.array(outs, np.int64))
    if int((run_reqs.prompt_tokens + run_reqs.output_tokens).max()) > int(
            (reqs.prompt_tokens + reqs.output_tokens).max()):
        from rightsize.analyzers.serving.tabulated import Tabulated

        table = Tabulated(table.step, limits.max_num_seqs, max(limits.max_num_batched_tokens,
                          max(prompts)), max(p + o for p, o in zip(prompts, outs, strict=True)))
    return fit(table, limits, run_reqs, measured.rate_per_s, measured.tpot_ms_p50,
               measured.ttft_ms_p50, measured.source)
