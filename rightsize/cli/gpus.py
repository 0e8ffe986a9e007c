"""``rightsize gpus``: list the GPU catalog (specs, dense throughput, the price used and its date).

Also home of :func:`load_catalog_for_cli` and :data:`catalog_option`, which every command that
prices GPUs shares: the shipped catalog plus user files from ``$RIGHTSIZE_CATALOG``
(``os.pathsep``-separated) and ``--catalog FILE`` (applied last, so it wins).
Only click is imported at module level; the catalog is imported when the command runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rightsize.catalog import Catalog

CATALOG_ENV = "RIGHTSIZE_CATALOG"

catalog_option: Callable[[Any], Any] = click.option(
    "--catalog", "catalog_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help=f"Extra GPUs/prices (CSV or JSON) that add to or override the shipped catalog; "
         f"also read from ${CATALOG_ENV}.")


def load_catalog_for_cli(path: Path | None) -> Catalog:
    """The catalog with ``$RIGHTSIZE_CATALOG`` files, then ``path``, applied."""
    from rightsize.catalog import load_catalog, parse_catalog_text
    from rightsize.errors import InputError
    from rightsize.outputs import is_special

    paths = [Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p]
    paths += [path] if path else []
    files = []
    for p in paths:
        if is_special(p):  # a FIFO would block the read
            raise InputError(p, "not a regular file (a pipe, device or socket)")
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(p, f"cannot read the catalog file ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise InputError(p, "the catalog file is not UTF-8 text") from None
        files.append(parse_catalog_text(text, str(p)))
    return load_catalog(files)


def _gpu_json(catalog: Catalog, name: str, provider: str | None) -> dict[str, Any]:
    gpu = catalog.gpu(name)
    price = catalog.price(name, provider)
    return {
        "name": gpu.name, "vendor": gpu.vendor, "architecture": gpu.architecture,
        "memory_gb": gpu.memory_gb, "memory_bandwidth_gbs": gpu.memory_bandwidth_gbs,
        "fp32_tflops": gpu.fp32_tflops, "tf32_tflops_dense": gpu.tf32_tflops_dense,
        "fp16_bf16_tflops_dense": gpu.fp16_bf16_tflops_dense,
        "fp8_tflops_dense": gpu.fp8_tflops_dense, "int8_tops_dense": gpu.int8_tops_dense,
        "sm_count": gpu.sm_count, "host_link_gbs_per_direction": gpu.host_link_gbs_per_direction,
        "nvlink_gbs_total": gpu.nvlink_gbs_total, "tdp_w": gpu.tdp_w,
        "form_factor": gpu.form_factor, "source": gpu.source, "origin": gpu.origin,
        "price": None if price is None else {
            "usd_per_gpu_hour": price.usd_per_gpu_hour, "provider": price.provider,
            "instance_type": price.instance_type, "region": price.region,
            "date_seen": price.date_seen, "source": price.source, "origin": price.origin},
    }


def _fmt(x: float | None, spec: str = "g") -> str:
    return "-" if x is None else format(x, spec)


@click.command()
@click.option("--min-memory-gb", type=float, default=None, help="Only GPUs with this much memory.")
@click.option("--provider", default=None, help="Only GPUs priced by this provider (AWS, GCP, "
              "Azure, Lambda, RunPod, ...); prices shown are that provider's.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@catalog_option
def gpus(min_memory_gb: float | None, provider: str | None, fmt: str,
         catalog_path: Path | None) -> None:
    """List the GPU catalog: memory, bandwidth, dense tensor TFLOPS, TDP and the price used.

    Prices go stale quickly: each one is shown with the date it was seen.
    """
    catalog = load_catalog_for_cli(catalog_path)
    chosen = catalog.select(min_memory_gb, provider)
    if fmt == "json":
        click.echo(json.dumps({"gpus": [_gpu_json(catalog, g.name, provider) for g in chosen],
                               "catalog_files": list(catalog.origins)}, indent=2, allow_nan=False))
        return
    head = (f"{'GPU':<16} {'mem GB':>6} {'GB/s':>6} {'fp32':>6} {'bf16':>7} {'fp8':>7}"
            f" {'TDP W':>6}  {'$/GPU-h':>7}  price seen")
    click.echo(head)
    click.echo("-" * len(head))
    for g in chosen:
        p = catalog.price(g.name, provider)
        seen = f"{p.provider} {p.instance_type}, {p.date_seen}" if p else "no price"
        click.echo(f"{g.name:<16} {g.memory_gb:>6g} {g.memory_bandwidth_gbs:>6g}"
                   f" {_fmt(g.fp32_tflops):>6} {_fmt(g.fp16_bf16_tflops_dense):>7}"
                   f" {_fmt(g.fp8_tflops_dense):>7} {_fmt(g.tdp_w):>6}"
                   f"  {_fmt(p.usd_per_gpu_hour if p else None, '.3f'):>7}  {seen}")
    click.echo(f"\n{len(chosen)} GPUs; TFLOPS are dense (no sparsity). Sources: "
               "rightsize gpus --format json")
