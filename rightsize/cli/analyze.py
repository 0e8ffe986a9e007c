"""``rightsize analyze``: analyze traces users already have."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize import outputs
from rightsize.cli.common import (
    catalog_option,
    definitions_option,
    emit,
    load_catalog_for_cli,
    no_color_option,
    write_html_report,
)
from rightsize.cli.output import Progress, note_interrupted, warn

if TYPE_CHECKING:
    from rightsize.engine import EngineOptions


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="json is the documented machine contract; html is the "
              "report page (to -o, else where the page goes by default, below).")
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
@click.option("--include-consumer", is_flag=True,
              help="Sizing: consumer GPUs (e.g. RTX 4090) may be recommended.")
@click.option("--objective", type=click.Choice(["time", "cost"]), default="time",
              show_default=True,
              help="Sizing: 'time' recommends the cheapest GPU no slower than now beyond "
                   "--slower-ok (its whole projected range); 'cost' the cheapest per step, "
                   "however slow.")
@click.option("--slower-ok", "slower_ok_pct", type=click.FloatRange(min=0), default=10.0,
              show_default=True, metavar="PCT",
              help="Sizing, --objective time: how much slower than now (percent) a cheaper GPU "
                   "may be.")
@click.option("--gpus", "layout_gpus", type=click.IntRange(min=2), default=None, metavar="N",
              help="Sizing a distributed job: project it at N ranks (GPUs) in all, not the "
                   "measured count; each rank keeps its work, the cost counts all N.")
@click.option("--gpus-per-node", "layout_gpus_per_node", type=click.IntRange(min=1),
              default=None, metavar="M",
              help="Sizing a distributed job: M ranks to a node (default: as many as the GPU's "
                   "node holds); collectives beyond a node cross its network.")
@definitions_option
@click.option("--steps", "steps_text", metavar="A-B", default=None,
              help="Analyze only steps A to B (ProfilerStep#N / NVTX step numbers) of each "
                   "trace, reading only their span of time.")
@click.option("--memory-budget", "memory_budget", metavar="SIZE", default=None,
              help="Memory one trace's read and analysis may use (e.g. 2G, 1500M). A trace "
                   "that needs more is analyzed over a window of its steps that fits, said in "
                   "the notes. Default: 60% of the memory available at start, shared by the "
                   "local workers; on Ray, the smallest node's memory.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local",
              show_default=True,
              help="Where the traces (ranks) are analyzed: local processes, or a Ray cluster "
                   "(pip install 'rightsize[ray]'); the document is the same.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="local engine: processes, one trace each at a time (default: the CPUs, "
                   "at most one per trace, fewer when --memory-budget allows fewer; traces "
                   "under 100 MB in all are analyzed in this process).")
@click.option("--ray-address", metavar="auto|HOST:PORT", default=None,
              help="ray engine: the cluster to join (default: RAY_ADDRESS, else a new local "
                   "one). Every node must reach the traces at the same paths.")
@click.option("--comm-model", "comm_model", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="A communication model fitted on your own nccl-tests logs "
              "(rightsize comm fit): the job's collectives and their projections use it.")
@click.option("--no-report", is_flag=True, help="Do not write the HTML report.")
@click.option("-q", "--quiet", is_flag=True, help="No progress messages on stderr.")
@no_color_option
def analyze(paths: tuple[Path, ...], fmt: str, output: Path | None, force: bool,
            step_range: str | None, timezone: str | None, catalog_path: Path | None,
            target_step_ms: float | None, target_throughput: float | None,
            samples_per_step: int | None, max_usd_per_hour: float | None, headroom: float,
            provider: str | None, include_consumer: bool, objective: str, slower_ok_pct: float,
            layout_gpus: int | None, layout_gpus_per_node: int | None,
            definitions: str, steps_text: str | None, memory_budget: str | None, engine: str,
            workers: int | None, ray_address: str | None, comm_model: Path | None,
            no_report: bool, quiet: bool) -> None:
    """Analyze PyTorch Profiler traces: what holds the job back.

    PATHS are PyTorch Profiler traces (.json, .json.gz), directories of per-rank traces, run
    directories written by `rightsize run`, Nsight Systems SQLite exports, Nsight Compute CSV
    (ncu --csv) and GPU metric logs (nvidia-smi --query-gpu CSV, dcgm-exporter, dcgmi dmon),
    in any mix. The format is detected from the content.

    An HTML report is written too: beside -o (a.json -> a.report.html), into a run directory,
    or to ./<input>.rightsize.html; a page rightsize wrote there before is replaced, any other
    file is kept. --force replaces only the files named on the command line; an output is
    never one of the inputs.

    \b
    Examples:
      rightsize analyze trace.pt.trace.json.gz
      rightsize analyze traces/ --format json -o analysis.json
      rightsize analyze report1.sqlite ncu.csv --target-step-ms 50
      rightsize analyze ranks/ --engine ray --ray-address 10.0.0.1:6379
      rightsize analyze big.pt.trace.json.gz --memory-budget 2G
    """
    from rightsize.analyzers.sizing.projection import Constraints, Objective
    from rightsize.cli.comm import load_comm_model
    from rightsize.pipeline import Options
    from rightsize.pipeline import run as run_pipeline

    if target_throughput is not None and samples_per_step is None:
        raise click.UsageError("--target-throughput needs --samples-per-step")
    _check_layout(layout_gpus, layout_gpus_per_node)
    run = _engine_options(engine, workers, ray_address)
    budget = _size(memory_budget)
    constraints = Constraints(target_step_ms=target_step_ms, target_throughput=target_throughput,
                              max_usd_per_hour=max_usd_per_hour, headroom_fraction=headroom,
                              provider=provider, include_consumer=include_consumer,
                              objective=Objective(objective), slower_ok_pct=slower_ok_pct,
                              layout_gpus=layout_gpus, layout_gpus_per_node=layout_gpus_per_node,
                              comm_model=load_comm_model(comm_model) if comm_model else None)
    options = Options(step_range=step_range, timezone=timezone,
                      catalog=load_catalog_for_cli(catalog_path), constraints=constraints,
                      samples_per_step=samples_per_step, definitions=definitions,
                      steps=_steps(steps_text), memory_budget_bytes=budget)
    if output is not None:  # before a long analysis, not after
        outputs.check_target(output, paths, force)
    progress = Progress(enabled=not quiet)
    doc = run_pipeline(list(paths), options, progress, run, warn=warn).document
    progress.done()
    note_interrupted(doc, quiet)
    if fmt == "html" and output is None:  # the page where it goes by default, said as such
        write_html_report(doc, list(paths), None, force, quiet)
        return
    emit(doc, fmt, output, force, quiet, paths)
    if not no_report and fmt != "html":  # --format html -o: that page is the report
        write_html_report(doc, list(paths), output, force, quiet)


def _engine_options(engine: str, workers: int | None, address: str | None) -> EngineOptions:
    from rightsize.engine import EngineOptions

    if engine != "ray" and address is not None:
        raise click.UsageError("--ray-address needs --engine ray")
    if engine == "ray" and workers is not None:
        raise click.UsageError("--workers is for the local engine (Ray schedules by its CPUs)")
    return EngineOptions(engine=engine, workers=workers, address=address)


def _size(text: str | None) -> int | None:
    from rightsize.traces.budget import MIN_BUDGET_BYTES, parse_size

    if text is None:
        return None
    try:
        n = parse_size(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--memory-budget") from None
    if n < MIN_BUDGET_BYTES:
        raise click.BadParameter(f"{text} is less than 100 MB: too little to analyze a trace in",
                                 param_hint="--memory-budget")
    return n


def _steps(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    first, sep, last = text.strip().partition("-")
    try:
        a, b = int(first), int(last) if sep else int(first)
    except ValueError:
        raise click.BadParameter(f"{text!r}: say A-B, two step numbers (or one)",
                                 param_hint="--steps") from None
    if a < 0 or b < a:
        raise click.BadParameter(f"{text!r}: A-B with 0 <= A <= B", param_hint="--steps")
    return a, b


def _check_layout(gpus: int | None, per_node: int | None) -> None:
    """A layout no machine has, in one line (the sizing checks it against each GPU's node)."""
    if gpus is not None and per_node is not None:
        if per_node > gpus:
            raise click.UsageError(f"--gpus-per-node {per_node} is more than --gpus {gpus}")
        if gpus % per_node:
            raise click.UsageError(f"--gpus {gpus} does not fill nodes of --gpus-per-node "
                                   f"{per_node}: give a multiple of it")
