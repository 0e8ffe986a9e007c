"""``rightsize estimate``: memory a model needs before anything runs, and the GPUs it fits on.

Reads a Hugging Face ``config.json`` (``--hf-config``) or takes ``--params`` and/or layer shapes,
builds a :class:`~rightsize.analyzers.sizing.estimator.Setup` from the options, and prints the estimate
(text, or ``--format json``, strict JSON) with every catalog GPU it fits on, alone or as N
GPUs, and what to change when it fits nowhere. ``--exact`` also counts the parameters of the
transformers model built on the meta device (:mod:`rightsize.profiler.exact_params`). Bad
numbers (NaN, infinity, negatives, fractions) are one-line errors. Only click is imported at
module level.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from rightsize.cli.common import no_color_option, read_input_json
from rightsize.cli.gpus import catalog_option, load_catalog_for_cli

MODES = ["train", "finetune", "lora", "inference"]
PRECISIONS = ["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
OPTIMIZERS = ["adamw", "adam", "sgd", "adam8bit"]


def read_hf_config(path: Path) -> dict[str, Any]:
    """The parsed ``config.json`` at ``path``; one-line errors for missing or malformed files."""
    from rightsize.errors import InputError

    data = read_input_json(path, "model config")
    if not isinstance(data, dict):
        raise InputError(path, "a Hugging Face config.json must be a JSON object")
    return data


def _gib(n: int) -> str:
    return f"{n / 2**30:,.2f} GiB"


class Count(click.ParamType):
    """A positive whole number, also written as ``7e9``; NaN, infinity, fractions and
    negatives are refused in one line."""

    name = "count"
    minimum = 1

    def fail(self, message: str, param: click.Parameter | None = None,
             ctx: click.Context | None = None) -> Any:
        """One line and exit 1 through the CLI's error boundary, like every other bad input."""
        from rightsize.errors import RightsizeError

        flag = f"--{param.name.replace('_', '-')}: " if param is not None and param.name else ""
        raise RightsizeError(f"{flag}{message}")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number: float = value
        else:
            try:
                number = int(str(value)) if str(value).isdigit() else float(value)
            except ValueError:
                self.fail(f"{value!r} is not a number", param, ctx)
        if isinstance(number, float) and not (math.isfinite(number) and number.is_integer()):
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if not self.minimum <= number <= 2**40:
            self.fail(f"{value!r} must be between {self.minimum} and 2^40", param, ctx)
        return int(number)


class Tokens(Count):
    """A whole number of tokens, 0 allowed (--prefill-chunk 0: no chunking)."""

    name = "tokens"
    minimum = 0


def _fraction(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not (math.isfinite(value) and 0 <= value < 1):
        from rightsize.errors import RightsizeError

        raise RightsizeError(f"--headroom: {value!r} is not a fraction in [0, 1)")
    return value


@click.command()
@click.option("--hf-config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A Hugging Face config.json (see samples/configs/).")
@click.option("--params", type=Count(), default=None, help="Parameter count (overrides the count "
              "from the config/shapes; alone it sizes weights and optimizer only).")
@click.option("--layers", type=Count(), default=None, help="Transformer layers.")
@click.option("--hidden", type=Count(), default=None, help="Hidden size.")
@click.option("--heads", type=Count(), default=None, help="Attention heads.")
@click.option("--kv-heads", type=Count(), default=None, help="Key/value heads (grouped-query).")
@click.option("--intermediate", type=Count(), default=None, help="MLP width (default 4 x hidden).")
@click.option("--vocab", type=Count(), default=None, help="Vocabulary size.")
@click.option("--mode", type=click.Choice(MODES), default="train", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True,
              help="Weights/compute precision (bf16/fp16 training = mixed precision).")
@click.option("--batch", type=Count(), default=1, show_default=True, help="Micro-batch per GPU.")
@click.option("--seq", type=Count(), default=2048, show_default=True,
              help="Sequence length (inference: prompt + generated tokens).")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True)
@click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default="none",
              show_default=True, help="Activation recomputation (checkpointing).")
@click.option("--flash-attention/--no-flash-attention", default=True, show_default=True)
@click.option("--zero", "zero_stage", type=click.IntRange(0, 3), default=0, show_default=True,
              help="ZeRO stage over --gpus (3 = FSDP full shard).")
@click.option("--fsdp", is_flag=True, help="Same as --zero 3.")
@click.option("--gpus", "n_gpus", type=click.IntRange(1), default=None,
              help="All GPUs: data parallel x --tp (training), tensor x pipeline parallel"
              " (inference). Default 1 (--tp's GPUs with --tp); placements try 1-64.")
@click.option("--tp", "tensor_parallel", type=Count(), default=None,
              help="Tensor-parallel degree (Megatron): weights, optimizer state and"
              " activations split this many ways within a node. Default: 1 for training;"
              " for inference the largest that splits the heads within a node.")
@click.option("--sequence-parallel", is_flag=True,
              help="Megatron sequence parallelism with --tp: the norms and dropouts split"
              " along the sequence too (Korthikanti et al. 2022).")
@click.option("--prefill-chunk", type=Tokens(), default=None,
              help="Inference: prompt tokens per forward pass (chunked prefill). Default"
              " vLLM's: 8192 on a GPU with 70 GiB or more other than an A100, 2048 on the"
              " others; 0: the whole prompt at once (Hugging Face generate).")
@click.option("--lora-rank", type=click.IntRange(1), default=16, show_default=True)
@click.option("--accumulate-gradients", is_flag=True,
              help="Gradients stay live through forward (accumulation, DDP buckets).")
@click.option("--headroom", type=float, default=0.10, show_default=True, callback=_fraction,
              help="Free memory fraction kept above the estimate when fitting GPUs.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--exact", is_flag=True, help="Also build the model with transformers on the"
              " meta device and count its parameters (pip install rightsize[exact]).")
@click.option("--all", "show_all", is_flag=True,
              help="List every placement that fits, with its parallelism (default: the "
                   "cheapest few).")
@catalog_option
@no_color_option
def estimate(hf_config: Path | None, params: int | None, layers: int | None,
             hidden: int | None, heads: int | None, kv_heads: int | None,
             intermediate: int | None, vocab: int | None, mode: str, precision: str,
             batch: int, seq: int, optimizer: str, recompute: str, flash_attention: bool,
             zero_stage: int, fsdp: bool, n_gpus: int | None, tensor_parallel: int | None,
             sequence_parallel: bool, prefill_chunk: int | None, lora_rank: int,
             accumulate_gradients: bool, headroom: float, fmt: str, exact: bool,
             show_all: bool, catalog_path: Path | None) -> None:
    """Estimate the memory a model needs to train, fine-tune or serve, and where it fits.

    \b
    Examples:
      rightsize estimate --hf-config samples/configs/Meta-Llama-3-8B.json --mode inference \\
          --precision bf16 --batch 8 --seq 8192
      rightsize estimate --hf-config samples/configs/Llama-2-7b-hf.json --mode lora \\
          --precision int4 --batch 4 --seq 2048
      rightsize estimate --params 7e9 --mode train --fsdp --gpus 8
      rightsize estimate --hf-config samples/configs/Meta-Llama-3-8B.json --tp 8 \\
          --sequence-parallel --seq 8192
    """
    from rightsize.analyzers.sizing.estimator import Mode, Optimizer, Recompute, Setup
    from rightsize.analyzers.sizing.estimator import estimate as run_estimate
    from rightsize.analyzers.sizing.placement import place, suggestions
    from rightsize.errors import RightsizeError

    config = read_hf_config(hf_config) if hf_config is not None else None
    shape = _shape(config, hf_config, params, layers, hidden, heads, kv_heads, intermediate,
                   vocab)
    exact_info = None
    if exact:
        if config is None:
            raise RightsizeError("--exact needs --hf-config FILE")
        exact_info = _exact(config, shape.params().total if shape is not None else 0)
        params = params or exact_info["params"]
    setup = Setup(mode=Mode(mode), precision=precision, batch=batch, seq=seq,  # type: ignore
                  optimizer=Optimizer(optimizer), recompute=Recompute(recompute),
                  flash_attention=flash_attention, zero_stage=3 if fsdp else zero_stage,
                  gpus=n_gpus or 1, lora_rank=lora_rank,
                  accumulate_gradients=accumulate_gradients, tensor_parallel=tensor_parallel,
                  sequence_parallel=sequence_parallel, prefill_chunk=prefill_chunk)
    # --tp alone runs on its own GPUs; the placements still try every multiple of it
    result = run_estimate(shape, replace(setup, gpus=n_gpus or tensor_parallel or 1), params)
    catalog = load_catalog_for_cli(catalog_path)
    placements = place(shape, setup, catalog, headroom, params)
    advice = suggestions(setup) if any(not p.fits and p.nodes for p in placements) else ()
    if fmt == "json":
        out = result.to_json()
        out["headroom_fraction"] = headroom
        out["fits"] = [p.to_json() for p in placements]
        out["suggestions"] = list(advice)
        if exact_info is not None:
            out["exact"] = exact_info
        click.echo(json.dumps(out, indent=2, allow_nan=False))
        return
    _print_text(result, placements, headroom, advice, exact_info, show_all)


def _shape(config: dict[str, Any] | None, path: Path | None, params: int | None,
           layers: int | None, hidden: int | None, heads: int | None, kv_heads: int | None,
           intermediate: int | None, vocab: int | None) -> Any:
    """The model shape from a config, from explicit layer shapes, or None (``--params``)."""
    from rightsize.analyzers.sizing.hf_config import ModelShape, from_hf_config
    from rightsize.errors import RightsizeError

    if config is not None and path is not None:
        return from_hf_config(config, name=path.stem)
    if any(v is not None for v in (layers, hidden, heads, vocab)):
        missing = [n for n, v in (("--layers", layers), ("--hidden", hidden),
                                  ("--heads", heads), ("--vocab", vocab)) if v is None]
        if missing:
            raise RightsizeError(f"layer shapes need {', '.join(missing)} as well")
        assert hidden is not None and layers is not None and heads is not None
        if hidden % heads or (kv_heads and heads % kv_heads):
            raise RightsizeError("--hidden must be a multiple of --heads, and --heads of"
                                 " --kv-heads")
        return ModelShape(hidden, layers, heads, intermediate or 4 * hidden, vocab or 0,
                          num_kv_heads=kv_heads, name="custom")
    if params is None:
        raise RightsizeError("give --hf-config FILE, --params N, or the layer shapes"
                             " (--layers --hidden --heads --vocab)")
    return None


def _exact(config: dict[str, Any], reader_params: int) -> dict[str, Any]:
    from rightsize.profiler.exact_params import exact_param_count

    n, cls = exact_param_count(config)
    return {"params": n, "class": cls, "reader_params": reader_params,
            "difference": reader_params - n}


def _echo(text: str) -> None:
    """One line of the text output, wrapped to the terminal (80 columns when piped)."""
    from rightsize.reports.text import wrap

    click.echo(wrap(text.split("\n")))


def _print_text(result: Any, placements: Any, headroom: float, advice: tuple[str, ...],
                exact_info: dict[str, Any] | None, show_all: bool) -> None:
    from rightsize.reports.estimate_text import memory_rows, placement_lines

    s = result.setup
    active = (f", {result.active_params:,} active per token"
              if result.active_params and result.active_params != result.params else "")
    layout = (f", tensor parallel {result.tensor_parallel}"
              + (" with sequence parallelism" if s.sequence_parallel else "")
              if result.tensor_parallel > 1 else "")
    _echo(f"{result.model}: {result.params:,} parameters{active}"
          f" ({result.trainable_params:,} trainable), {s.mode}, {s.precision},"
          f" batch {s.batch} x seq {s.seq}, {s.gpus} GPU(s){layout}")
    if exact_info is not None:
        _echo(f"  exact ({exact_info['class']} on the meta device):"
              f" {exact_info['params']:,}; config reader {exact_info['reader_params']:,}"
              f" (difference {exact_info['difference']:+,})")
    for line in memory_rows(result):
        _echo(line)
    for warning in result.warnings:
        _echo(f"warning: {warning}")
    _echo("assumptions:")
    for note in result.assumptions:
        _echo(f"  - {note}")
    for line in placement_lines(placements, headroom, show_all):
        _echo(line)
    chunks = sorted({p.prefill_chunk_tokens for p in placements if p.prefill_chunk_tokens})
    if len(chunks) > 1 and s.prefill_chunk is None:
        _echo(f"prefill chunks by GPU (vLLM's defaults): {' or '.join(map(str, chunks))}"
              " tokens; --format json gives each placement's")
    for p in placements:
        if not p.nodes:  # a --tp wider than this GPU's node
            _echo(f"{p.gpu}: {p.parallelism}")
    none = [p.gpu for p in placements if not p.fits and p.nodes and not p.unsupported]
    if none:
        _echo(f"does not fit even sharded: {', '.join(none)}")
        _echo("to shrink it:")
        for tip in advice:
            _echo(f"  - {tip}")
