"""``rightsize gpus``: list the GPU catalog (specs, dense throughput, the price used and its date).

The catalog option and loading every pricing command shares live in :mod:`rightsize.cli.common`
(re-exported here for older imports). Only click is imported at module level.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli, no_color_option
from rightsize.vocab import Precision

if TYPE_CHECKING:
    from rightsize.catalog import Catalog, Gpu

def _gpu_json(catalog: Catalog, name: str, provider: str | None) -> dict[str, Any]:
    gpu = catalog.gpu(name)
    price = catalog.price(name, provider)
    return {
        "name": gpu.name, "vendor": gpu.vendor, "architecture": gpu.architecture,
        "memory_gb": gpu.memory_gib, "memory_bandwidth_gbs": gpu.memory_bandwidth_gbs,
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


def _native(gpu: Gpu, precision: Precision) -> float | None:
    """Dense TFLOPS at ``precision`` where the GPU runs it natively (a T4 or V100 has no
    bf16: ``None``, shown as -)."""
    tflops, used = gpu.tflops(precision)
    return tflops if used == precision else None


def _fmt(x: float | None, spec: str = "g") -> str:
    return "-" if x is None else format(x, spec)


@click.command()
@click.option("--min-memory-gb", type=float, default=None, help="Only GPUs with this much memory.")
@click.option("--provider", default=None, help="Only GPUs priced by this provider (AWS, GCP, "
              "Azure, Lambda, RunPod, ...); prices shown are that provider's.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@catalog_option
@no_color_option
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
    from rightsize.reports.fmt import short
    from rightsize.reports.text import terminal_width

    width = terminal_width()  # 80 columns when piped
    head = (f"{'GPU':<16} {'GiB':>4} {'GB/s':>5} {'fp32':>5} {'fp16':>6} {'bf16':>6} {'fp8':>6}"
            f" {'TDP W':>5} {'$/GPU-h':>7}  price seen")
    click.echo(head)
    click.echo("-" * min(width, len(head) + 20))
    for g in chosen:
        p = catalog.price(g.name, provider)
        seen = f"{p.provider} {p.instance_type}, {p.date_seen}" if p else "no price"
        row = (f"{g.name:<16} {g.memory_gib:>4g} {g.memory_bandwidth_gbs:>5g}"
               f" {_fmt(g.fp32_tflops):>5} {_fmt(g.fp16_bf16_tflops_dense):>6}"
               f" {_fmt(_native(g, Precision.BF16)):>6}"
               f" {_fmt(g.fp8_tflops_dense):>6} {_fmt(g.tdp_w):>5}"
               f" {_fmt(p.usd_per_gpu_hour if p else None, '.3f'):>7}  ")
        if len(row + seen) <= width:
            click.echo(row + seen)
        else:  # the price's source on its own line rather than past the terminal's edge
            click.echo(row.rstrip())
            click.echo(short(f"{'':>17}seen: {seen}", width))
    click.echo(f"\n{len(chosen)} GPUs; TFLOPS are dense (no sparsity). Sources: "
               "rightsize gpus --format json")
