"""``rightsize run``: profile an unmodified script, module or launcher command.

Thin: parses options, resolves what to run, and hands over to
:func:`rightsize.profiler.session.run_job`. Exits with the job's own exit code (128+N when a
signal N ended it), whatever happened to the profiling.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rightsize.cli.common import no_color_option
from rightsize.cli.run_ondemand import on_demand_options
from rightsize.reports.fmt import safe_line
from rightsize.rundir import SCHEDULE_DEFAULTS

EPILOG = """\b
Examples:
  rightsize run train.py --lr 3e-4
  rightsize run -m my_pkg.train --epochs 1
  rightsize run -- torchrun --nproc-per-node 2 train.py
  rightsize run --out runs/baseline --active 5 train.py
  rightsize run --on-demand --out runs/live train.py   then: rightsize trigger runs/live
  rightsize run --on-demand --auto --upload http://host:8000 --team vision train.py

\b
Steps: a global optimizer step hook advances the profiler schedule (wait, warmup, active,
repeat), so ProfilerStep#N is one optimizer step. A job with no optimizer (inference) gets a
time window instead: it opens --window-delay-s after the first module call and lasts --window-s,
each top-level module call being one step. rightsize.step() / rightsize.profile() in the script
take over. The manifest records which was used.
"""


class _RunCommand(click.Command):
    """Notes whether the job came after ``--`` (a command) rather than as a script."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        raw = list(args)
        rest = super().parse_args(ctx, args)
        tail = [ctx.params.get("script"), *ctx.params.get("args", ())]
        before = len(raw) - len(tail) - 1
        ctx.meta["rightsize.run.command"] = (
            ctx.params.get("script") is not None and before >= 0 and raw[before] == "--"
        )
        return rest


@click.command(
    cls=_RunCommand,
    epilog=EPILOG,
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": ["-h", "--help"],
    },
)
@click.option("-m", "as_module", is_flag=True, help="SCRIPT is a module name, as in python -m.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory (default: rightsize-runs/<name>-<timestamp>/; never overwritten).",
)
@click.option("--wait", default=SCHEDULE_DEFAULTS["wait"], show_default=True, type=click.IntRange(0), help="Steps skipped.")
@click.option(
    "--warmup", default=SCHEDULE_DEFAULTS["warmup"], show_default=True, type=click.IntRange(0), help="Warm-up steps."
)
@click.option(
    "--active", default=SCHEDULE_DEFAULTS["active"], show_default=True, type=click.IntRange(1), help="Steps traced."
)
@click.option(
    "--repeat",
    default=SCHEDULE_DEFAULTS["repeat"],
    show_default=True,
    type=click.IntRange(0),
    help="Cycles (0 = until exit).",
)
@click.option(
    "--window-delay-s",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0),
    help="No optimizer: open the time window this long after the first module call.",
)
@click.option(
    "--window-s",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="No optimizer: record this long.",
)
@click.option(
    "--sample-interval-s",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0.01),
    help="NVML and host sampling period.",
)
@click.option("--record-shapes/--no-record-shapes", default=True, show_default=True)
@click.option("--profile-memory/--no-profile-memory", default=True, show_default=True)
@click.option("--with-stack/--no-with-stack", default=False, show_default=True)
@click.option("--with-flops/--no-with-flops", default=True, show_default=True)
@click.option("--no-profiler", is_flag=True, help="Sample only; no PyTorch Profiler.")
@click.option("--no-gpu-samples", is_flag=True, help="Do not sample GPUs through NVML.")
@click.option("--no-report", is_flag=True, help="Do not analyze at the end.")
@click.option("--include-consumer", is_flag=True,
              help="Sizing: consumer GPUs (e.g. RTX 4090) may be recommended.")
@on_demand_options
@click.argument("script", metavar="SCRIPT|MODULE|-- COMMAND")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
@no_color_option
def run(ctx: click.Context, script: str, args: tuple[str, ...], **opts: object) -> None:
    """Run a script under PyTorch Profiler with NVML and host sampling, then analyze it.

    The script's arguments pass through untouched; rightsize exits with its exit code.
    Default schedule: wait 1, warmup 1, active 3 steps, once.
    """
    from rightsize.cli import run_ondemand
    from rightsize.profiler.launch import resolve_target
    from rightsize.profiler.session import RunOptions, describe, run_job

    target = resolve_target(
        script, args, module=bool(opts["as_module"]), command=ctx.meta["rightsize.run.command"]
    )
    captures = run_ondemand.settings(opts)
    labels = run_ondemand.labels(opts, target.name)
    options = RunOptions(
        out=opts["out"],  # type: ignore[arg-type]
        profiler=not opts["no_profiler"],
        wait=opts["wait"],  # type: ignore[arg-type]
        warmup=opts["warmup"],  # type: ignore[arg-type]
        active=opts["active"],  # type: ignore[arg-type]
        repeat=opts["repeat"],  # type: ignore[arg-type]
        record_shapes=bool(opts["record_shapes"]),
        profile_memory=bool(opts["profile_memory"]),
        with_stack=bool(opts["with_stack"]),
        with_flops=bool(opts["with_flops"]),
        window_delay_s=opts["window_delay_s"],  # type: ignore[arg-type]
        window_s=opts["window_s"],  # type: ignore[arg-type]
        sample_interval_s=opts["sample_interval_s"],  # type: ignore[arg-type]
        gpu_samples=not opts["no_gpu_samples"],
        report=not opts["no_report"],
        on_demand=bool(opts["on_demand"]),
        captures=captures,
        labels=labels,
    )

    def warn(message: str) -> None:
        click.echo(f"rightsize: warning: {safe_line(message)}", err=True)

    def say(message: str) -> None:
        click.echo(f"rightsize: {safe_line(message)}", err=True)

    consumer = bool(opts["include_consumer"])
    handler = run_ondemand.CaptureHandler(opts, labels, warn, say) if options.on_demand else None
    result = run_job(target, options, warn,
                     analyze=lambda run_dir: _analyze(run_dir, warn, consumer),
                     on_capture=handler)
    if handler is not None:
        from rightsize.profiler.ondemand import describe_captures

        uploaded = handler.close()
        for line in describe_captures(result.run_dir, result.manifest) + (
                [uploaded] if uploaded else []):
            say(line)
        sys.stdout.flush()
        ctx.exit(result.exit.exit_code)
    lines = describe(result)
    first_next = next((i for i, line in enumerate(lines) if line.startswith("next:")), len(lines))
    for line in lines[:first_next]:
        click.echo(f"rightsize: {safe_line(line)}", err=True)
    _report(result, warn)  # the verdict-first summary, before what to run next
    for line in lines[first_next:]:
        click.echo(f"rightsize: {safe_line(line)}", err=True)
    sys.stdout.flush()
    ctx.exit(result.exit.exit_code)


def _report(result: Any, warn: Callable[[str], None]) -> None:
    """report.html and the verdict-first summary; never changes the job's exit code."""
    from rightsize.analyzers.document import Document
    from rightsize.cli.common import use_color
    from rightsize.errors import RightsizeError
    from rightsize.reports.render import summary, write_report
    from rightsize.rundir import ANALYSIS, REPORT_HTML

    if result.manifest["collectors"]["analysis"]["status"] != "written":
        return
    try:
        doc = Document.from_json(result.run_dir / ANALYSIS)
        page = write_report(doc, result.run_dir / REPORT_HTML, force=False,
                            manifest=result.manifest)
        click.echo(summary(doc, page, result.manifest, color=use_color(sys.stderr)), err=True,
                   nl=False)
    except (RightsizeError, OSError, ValueError) as exc:
        warn(f"report not written: {exc}")


def _analyze(run_dir: Path, warn: Callable[[str], None],
             include_consumer: bool = False) -> dict[str, Any]:
    """Write ``analysis.json`` for a finished run; a failure is a warning, never fatal."""
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.errors import RightsizeError
    from rightsize.pipeline import analyze_paths
    from rightsize.rundir import ANALYSIS, write_json_atomic

    try:
        doc = analyze_paths([run_dir],
                            constraints=Constraints(include_consumer=include_consumer))
    except RightsizeError as exc:
        reason = f"analysis failed: {exc}"
    except KeyboardInterrupt:
        reason = f"analysis interrupted; run rightsize analyze {run_dir} later"
    except Exception as exc:  # noqa: BLE001 - a bug in analysis must not change the job's exit
        reason = f"analysis crashed: {exc.__class__.__name__}: {exc}"
    else:
        write_json_atomic(run_dir / ANALYSIS, doc)
        return {"status": "written", "reason": None, "file": ANALYSIS}
    warn(reason)
    return {"status": "failed", "reason": reason}
