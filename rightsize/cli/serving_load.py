"""What ``serving simulate`` and ``serving plan`` share: reading the model, the load (a rate
with prompt and output lengths, or a requests CSV) and a measured online run, with one-line
errors; and ``--precision`` and ``--engine``, which ``serving predict`` takes too. Only click is imported at
module level."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rightsize.analyzers.serving.simulate import Requests
    from rightsize.analyzers.serving.step import ModelConfig
    from rightsize.traces.serving_runs import MeasuredRun

DEFAULT_REQUESTS = 1000

precision_option: Callable[[Any], Any] = click.option(
    "--precision", type=click.Choice(["bf16", "fp8", "int8", "int4"]), default="bf16",
    show_default=True, help="Weight precision.")

engine_option: Callable[[Any], Any] = click.option(
    "--engine", type=click.Choice(["vllm", "vllm-v0"]), default="vllm", show_default=True,
    help="vLLM's V1 engine (0.8 on), or V0 (0.6 and before: its CPU work per scheduled "
         "sequence added to every step).")


def read_model(path: Path) -> ModelConfig:
    from rightsize.analyzers.sizing.hf_config import from_hf_config
    from rightsize.cli.estimate import read_hf_config

    return from_hf_config(read_hf_config(path), path.stem)


def read_requests(path: Path) -> Requests:
    from rightsize.analyzers.serving.load import from_csv
    from rightsize.cli.common import read_input_text

    return from_csv(read_input_text(path, "requests CSV", "utf-8-sig"), str(path))


def load_choice(requests: Path | None, rate: float | None, isl: int | None,
                osl: int | None) -> None:
    """One of ``--requests`` or ``--rate`` with ``--isl`` and ``--osl``."""
    from rightsize.errors import RightsizeError

    if requests is not None and any(v is not None for v in (rate, isl, osl)):
        raise RightsizeError("give either --requests CSV or --rate/--isl/--osl, not both")
    if requests is None:
        absent = [f"--{n}" for n, v in (("rate", rate), ("isl", isl), ("osl", osl))
                  if v is None]
        if absent:
            raise RightsizeError(f"missing {', '.join(absent)} (or give --requests CSV)")


def read_measured_run(path: Path) -> MeasuredRun:
    from rightsize.cli.common import read_input_json
    from rightsize.traces.serving_runs import read

    return read(read_input_json(path, "measured run"), str(path))


def positive_rate(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    from rightsize.errors import RightsizeError

    if value is not None and not (value > 0 and value != float("inf")):
        raise RightsizeError(f"--{param.name}: the request rate must be a positive number")
    return value
