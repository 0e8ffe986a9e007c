"""``rightsize gpus``: list the GPU catalog (specs, dense throughput, the price used and its date).

The catalog option and loading every pricing command shares live in :mod:`rightsize.cli.common`
(re-exported here for older imports). Only click is imported at module level.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
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
            "date_seen": price.date_seen, "dated": price.dated,
            "date_seen_detail": price.date_seen_detail, "source": price.source,
            "origin": price.origin},
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
    from rightsize.reports.text import terminal_width

    for line in table(catalog, chosen, provider, terminal_width()):
        click.echo(line)


# GPU, GiB, GB/s, fp32, fp16, bf16, fp8, TDP W, $/GPU-h, provider: 70 columns, then the date the
# price was seen (10), so a row fits 80; a wider terminal also gets the instance type.
ROW = "{:<15} {:>4} {:>4} {:>4} {:>5} {:>5} {:>5} {:>4} {:>7} {:<7} {}"
NO_DATE = "?"  # a price no source dates; one footnote under the table says what that means


def table(catalog: Catalog, chosen: Sequence[Gpu], provider: str | None,
          width: int) -> list[str]:
    """The text listing: one line per GPU with its price's provider and the date it was seen
    (the instance type too when the terminal has room); an undated price is a ``?``, said once
    under the table."""
    head = ROW.format("GPU", "GiB", "GB/s", "fp32", "fp16", "bf16", "fp8", "TDP", "$/GPU-h",
                      "from", "seen")
    lines = [head, "-" * min(width, len(head) + 8)]
    undated = 0
    for g in chosen:
        p = catalog.price(g.name, provider)
        seen = "" if p is None else (p.date_seen if p.dated else NO_DATE)
        undated += p is not None and not p.dated
        row = ROW.format(g.name, f"{g.memory_gib:g}", f"{g.memory_bandwidth_gbs:g}",
                         _fmt(g.fp32_tflops, ".3g"), _fmt(g.fp16_bf16_tflops_dense, ".4g"),
                         _fmt(_native(g, Precision.BF16), ".4g"), _fmt(g.fp8_tflops_dense, ".4g"),
                         _fmt(g.tdp_w), _fmt(p.usd_per_gpu_hour if p else None, ".3f"),
                         p.provider if p else "", seen).rstrip()
        wide = f"{row:<{len(head) + 8}}  {p.instance_type}" if p else row
        lines.append(wide if len(wide) <= width else row)
    whose = f"{provider}'s" if provider else "the catalog's"
    notes = [(f"{len(chosen)} GPUs; TFLOPS are dense (no sparsity); $/GPU-h is the cheapest of "
              f"{whose} prices for the GPU, 'seen' the date a source shows it.")]
    if undated:
        notes.append(f"{NO_DATE}: no source gives the date of {undated} of these prices (provider "
                     "catalog snapshots): they may be stale.")
    notes.append("Sources, instances and notes of every price: rightsize gpus --format json")
    return [*lines, "", *(w for n in notes for w in textwrap.wrap(n, max(width, 40)))]
