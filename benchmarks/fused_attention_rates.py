"""The rate fused attention kernels reach on each GPU, measured in real traces: the data of the
eager-attention what-if (``rightsize/analyzers/diagnosis/data/fused_attention.json``).

    python benchmarks/fused_attention_rates.py ../shared/traces/kineto \\
        [--write rightsize/analyzers/diagnosis/data/fused_attention.json]

For every trace whose GPU is in the catalog, the kernels launched by a fused attention op
(``aten::_flash_attention_forward``, ``_efficient_attention_forward``, the SDPA flash /
efficient / cuDNN ops) are summed per op shape; an op's FLOPs are the roofline's
(``2BHLSD + 2BHLSDv``, ``diagnosis/roofline.py``) halved when ``is_causal`` is set (the kernel
skips the masked half of the tiles). Per GPU the call shape with the most FLOPs per call is kept
(the rate rises with the work per call: on the H100, 0.04 GFLOP calls reach 4 TFLOP/s, 0.48
GFLOP 47, 10.2 GFLOP 90), with its rate, the fraction of the GPU's dense peak at the kernel's
precision and where it was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from rightsize.analyzers.diagnosis.roofline import ATTENTION, op_cost
from rightsize.catalog import load_catalog
from rightsize.traces.loader import ReadOptions, load

# Position of is_causal (or the mask type, 1 = causal) in each op's ATen schema.
CAUSAL_ARG = {"aten::_flash_attention_forward": 8, "aten::_scaled_dot_product_flash_attention": 4,
              "aten::_scaled_dot_product_efficient_attention": 6,
              "aten::_scaled_dot_product_cudnn_attention": 6,
              "aten::_efficient_attention_forward": 9, "aten::scaled_dot_product_attention": 5}


def _causal(name: str, concrete: list[Any]) -> bool:
    i = CAUSAL_ARG.get(name)
    value = concrete[i] if i is not None and i < len(concrete) else ""
    return str(value) in ("True", "1")


def measure(path: Path, catalog: Any) -> tuple[str, dict[str, Any]] | None:
    """(catalog GPU, its largest fused-attention call shape's rate) of one trace, or None."""
    import polars as pl

    trace = load([path], None, ReadOptions()).traces[0]
    ops = trace.cpu_ops.filter(pl.col("name").is_in(sorted(ATTENTION))
                               & pl.col("external_id").is_not_null())
    if ops.height == 0 or trace.devices.height == 0:
        return None
    dev = trace.devices.row(0, named=True)
    gpu = catalog.match(dev["name"], dev["memory_bytes"], dev["sm_count"]).gpu
    if gpu is None:
        return None
    k = trace.kernels.join(ops.select("external_id", op="name", dims="input_dims",
                                      types="input_types", concrete="concrete_inputs"),
                           on="external_id")
    calls: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for op, dims, types, concrete, dur, ext in k.select(
            "op", "dims", "types", "concrete", "dur_ns", "external_id").iter_rows():
        acc = calls[op, dims or "", concrete or ""]
        acc[0] += dur
        acc[2] += 1
    best = None
    for (op, dims, concrete), (dur_ns, _, kernels) in calls.items():
        types = k.filter((pl.col("op") == op) & (pl.col("dims") == dims))["types"][0]
        cost = op_cost(op, json.loads(dims), json.loads(types or "[]"),
                       json.loads(concrete or "[]"))
        n = k.filter((pl.col("op") == op) & (pl.col("dims") == dims)
                     & (pl.col("concrete") == concrete))["external_id"].n_unique()
        if cost is None or not dur_ns or not n:
            continue
        causal = _causal(op, json.loads(concrete or "[]"))
        flops = cost.flops / (2 if causal else 1)
        if best is None or flops > best["call_gflops"] * 1e9:
            peak, used = gpu.tflops(cost.precision or "bf16")
            rate = flops * n / (dur_ns * 1e-9)
            best = {"tflops": round(rate / 1e12, 2),
                    "fraction_of_peak": round(rate / ((peak or 1.0) * 1e12), 4),
                    "precision": str(used), "call_gflops": round(flops / 1e9, 3),
                    "calls": n, "causal": causal, "query_shape": json.loads(dims)[0],
                    "op": op, "vendor": gpu.vendor, "source": path.name}
    return (gpu.name, best) if best is not None else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="Kineto traces (shared/traces/kineto)")
    ap.add_argument("--write", type=Path, help="write the JSON here (else stdout)")
    args = ap.parse_args(argv)
    catalog = load_catalog()
    gpus: dict[str, dict[str, Any]] = {}
    for path in sorted(args.folder.glob("*.json.gz")):
        got = measure(path, catalog)
        if got is not None and (got[0] not in gpus
                                or got[1]["call_gflops"] > gpus[got[0]]["call_gflops"]):
            gpus[got[0]] = got[1]
    doc = {"procedure": "benchmarks/fused_attention_rates.py: per GPU, the fused attention op "
                        "call shape with the most FLOPs per call in the shared Kineto traces "
                        "(roofline FLOPs, halved when causal) / its kernels' time",
           "gpus": gpus}
    text = json.dumps(doc, indent=1) + "\n"
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
