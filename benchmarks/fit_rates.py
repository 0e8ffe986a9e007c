"""Fit the achievable rates in ``rightsize/catalog/data/rates.json`` from measured timings.

    python benchmarks/fit_rates.py /work/shared/timings --traces /work/shared/traces/kineto \\
        [--write rightsize/catalog/data/rates.json]

Data (nothing else): NeuSight ``linear.csv``/``bmm.csv`` (one GEMM kernel per row, fp32, 8
GPUs), NeuSight per-op model tables (``label/``), Vidur fp16 per-op tables, and the kernels of
the TraceLens H100/MI300X trace pairs (bf16) with FLOPs/bytes from their recorded shapes.

Procedure, per catalog GPU with data:

1. ``floor_us``: the 1st percentile of the kernel-level times on the GPU (CUPTI trace kernels,
   Vidur ops); a GPU with only NeuSight's per-op events (framework overhead included) gets the
   median of the others; ``dataset_floor_us`` keeps each data set's own floor for the harness.
2. ``stream_fraction``: the median of achieved / datasheet bandwidth over memory-bound ops
   (elementwise, norms, GEMVs under a quarter of the ridge) larger than L2 and 16 MiB; fewer
   than 5 such ops: the others' median. ``l2_fraction``: the same median over memory-bound ops
   of L2/8 to L2 bytes, kept only where it beats ``stream_fraction`` (L4: 2.05, its 48 MB L2
   in front of 300 GB/s); below it such ops are latency-limited, which the floor models.
3. ``gemm_max``, ``gemm_half_flops`` and ``gemm_shape`` per rate (bf16 and fp16 share the
   16-bit tensor rate): the GEMM rows' times are modelled as
   max(floor, F / (peak x gemm_max x F^s / (F^s + half^s)), bytes / (bw x stream_fraction));
   ``s`` (the Hill exponent: how many decades of FLOPs the efficiency takes to rise) is searched
   on SHAPE_GRID and ``half`` on a log grid (1e6..1e12 FLOPs, 49 points), and for each pair
   ``gemm_max`` is the geometric mean of the fraction each compute-bound row implies (capped at
   1); the triple with the least squared log error wins. Fused attention kernels of the traces
   are left out (softmax fused with two GEMMs: a third of the GEMM rate at the same FLOPs).
4. ``carry`` (one per kind of kernel, for the whole table): the same op measured on two fitted
   GPUs of different chips (``rates.same_chip``: between those the whole deviation carries)
   deviates from the model by x = log(measured / model) on one and y on the other; the
   slope of y on x (through 0, over every ordered pair of GPUs) is the share of a deviation that
   recurs on another GPU, the least-squares exponent of ``rates.project_kernel_s``. Averaged over
   the data sources (GEMM tables, NeuSight model tables, Vidur; the traces' kernels have
   different names per vendor and pair with nothing), clipped to [0, 1]. GEMMs: about 0.4 (a
   GEMM that is slow for its FLOPs on one GPU is only partly slow on another: tile and wave
   quantization depend on the SM count), elementwise ops about 0.8.

``error_pct`` (the range a projection between two fitted GPUs carries) is the 90th percentile
of the leave-one-model-out |error| of ``projection_accuracy.py --cv`` on the same data, and
``error_pct_unfitted`` (a projection involving a GPU without fitted rates) that of the
leave-one-GPU-out |error|; pass them with ``--error-pct``/``--error-pct-unfitted``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timings import HOST, Op, Workload, model_of, read_all, trace_kernels

from rightsize.analyzers.metrics.precision import name_precision
from rightsize.analyzers.sizing.rates import (
    GEMM,
    STREAM,
    Rates,
    kernel_s,
    parse_rates,
    peak_flops,
    rate_key,
    same_chip,
)
from rightsize.catalog import Catalog, Gpu, load_catalog
from rightsize.errors import RightsizeError

HALF_GRID = tuple(10 ** (6 + i / 8) for i in range(49))
# Hill exponents of the GEMM curve tried with each half point: how many decades of FLOPs the
# efficiency takes to rise (0.5: about four, 1: two, 1.5: one and a half).
SHAPE_GRID = (0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5)
STREAM_MIN_BYTES = 16 * 2**20
TRACE_PAIRS = ("tracelens-h100-*", "tracelens-mi300-*")
KERNEL_DATASETS = ("trace", "vidur")
# Fused attention kernels (traces) fuse softmax and rescaling with their two GEMMs: at the FLOPs of a GEMM they
# reach a third of its rate (H100 bf16: 0.18 vs 0.60 of peak on the Qwen trace), so they would
# drag the GEMM curve down; they are left out of its fit (and projected by its ratio).
ATTENTION_NAMES = re.compile(r"attn|attention|flash|fmha", re.IGNORECASE)
MIN_ROWS = 5  # fewer GEMMs at a precision (large streams) say too little about the rate


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured kernel/op on one GPU, with where it came from (for leave-one-out)."""

    gpu: str
    model: str  # "" for the model-independent GEMM tables
    op: Op


def gemm_tables(root: Path, catalog: Catalog) -> list[Sample]:
    out = []
    for name in ("linear.csv", "bmm.csv"):
        path = root / "neusight" / name
        if not path.exists():
            continue
        import csv
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                gpu = catalog.match(r["Device"]).gpu
                if gpu is None:
                    continue
                b, m, n, k = (int(r[c]) for c in ("B", "M", "N", "K"))
                prec = name_precision(r["Kernel Name"]) or "fp32"
                # named by its shape: the same GEMM runs different kernels on each GPU
                op = Op(f"{r['OPName']} {b}x{m}x{n}x{k}", GEMM, 2.0 * b * m * n * k,
                        4.0 * b * (m * k + k * n + m * n), prec, float(r["Latency"]), 1.0)
                out.append(Sample(gpu.name, "", op))
    return out


def trace_samples(trace_dir: Path, catalog: Catalog) -> list[Sample]:
    """Kernels of the shared trace pairs that are the only kernel of an op with a cost."""
    out = []
    for pattern in TRACE_PAIRS:
        for path in sorted(trace_dir.glob(pattern + ".json.gz")):
            try:
                gpu, items, _ = trace_kernels(path, catalog)
            except (ArithmeticError, RightsizeError) as exc:  # MI300X conv args: issue 11
                print(f"skipped {path.name}: {exc!r}", file=sys.stderr)
                continue
            model = "trace/" + path.name.split("-", 2)[2].split("__")[0]
            for it in items:
                if it.flops is not None and it.kernels == 1 and it.dur_ns > 0:
                    out.append(Sample(gpu.name, model, Op(it.name, it.kind, it.flops or 0.0,
                                                          it.bytes or 0.0, it.precision,
                                                          it.dur_ns / 1e6 / it.count, 1.0)))
    return out


def workload_samples(workloads: Iterable[Workload]) -> list[Sample]:
    return [Sample(w.gpu, model_of(w.key), op) for w in workloads for op in w.ops
            if op.kind != HOST and op.measured_ms > 0]


def _memory_bound(gpu: Gpu, op: Op) -> bool:
    """Elementwise ops, and GEMMs (GEMVs) whose FLOPs/byte is under a quarter of the ridge."""
    if op.kind == STREAM:
        return True
    peak, _ = gpu.tflops(op.precision)
    ridge = (peak or gpu.fp32_tflops or 1.0) * 1e12 / (gpu.memory_bandwidth_gbs * 1e9)
    return op.bytes > 0 and op.flops / op.bytes < ridge / 4


def _model_s(gpu: Gpu, r: Rates, op: Op) -> float:
    return kernel_s(gpu, r, op.flops, op.bytes, op.precision, 1, op.kind)


def _fused_attention(s: Sample) -> bool:
    """A fused attention kernel of a trace (NeuSight/Vidur attention ops are plain GEMMs)."""
    return dataset_of(s) == "trace" and ATTENTION_NAMES.search(s.op.name) is not None


def dataset_of(s: Sample) -> str:
    return s.model.split("/")[0] if s.model else "neusight"


def _floor_us(samples: list[Sample]) -> float:
    times = sorted(s.op.measured_ms for s in samples)
    return times[int(0.01 * (len(times) - 1))] * 1e3


def fit_gpu(gpu: Gpu, samples: list[Sample]) -> dict[str, Any]:
    floors = {d: round(_floor_us([s for s in samples if dataset_of(s) == d]), 3)
              for d in sorted({dataset_of(s) for s in samples})}
    # Kernel floor: from kernel-level timings (CUPTI traces, Vidur); NeuSight's per-op events
    # include framework overhead, so a GPU with only those gets the others' median (fit()).
    kernel = [v for d, v in floors.items() if d in KERNEL_DATASETS]
    floor_us = min(kernel) if kernel else floors.get("neusight", 5.0)
    big = max(STREAM_MIN_BYTES, (gpu.l2_mb or 0) * 2**20)  # no smaller than L2
    streams = [s.op.bytes / (s.op.measured_ms * 1e-3) / (gpu.memory_bandwidth_gbs * 1e9)
               for s in samples if s.op.bytes >= big and _memory_bound(gpu, s.op)]
    stream = min(1.0, statistics.median(streams)) if len(streams) >= MIN_ROWS else None
    l2 = (gpu.l2_mb or 0) * 2**20
    in_l2 = [s.op.bytes / (s.op.measured_ms * 1e-3) / (gpu.memory_bandwidth_gbs * 1e9)
             for s in samples if l2 / 8 <= s.op.bytes <= l2 and _memory_bound(gpu, s.op)]
    l2_fraction = statistics.median(in_l2) if len(in_l2) >= MIN_ROWS else None
    if l2_fraction is not None and stream is not None and l2_fraction <= stream:
        l2_fraction = None  # below the DRAM rate: latency-limited (the floor's part), no L2 gain
    gemms = [s for s in samples if s.op.kind == GEMM and s.op.flops > 0
             and not _fused_attention(s)]
    tops: dict[str, float] = {}
    halves: dict[str, float] = {}
    shapes: dict[str, float] = {}
    for prec in sorted({rate_key(gpu.tflops(s.op.precision)[1]) for s in gemms}):
        rows = [s.op for s in gemms if rate_key(gpu.tflops(s.op.precision)[1]) == prec]
        curve = _gemm_curve(gpu, rows, floor_us, stream or 0.8)
        if curve is not None:
            tops[prec], halves[prec], shapes[prec] = curve
    return {"vendor": gpu.vendor, "floor_us": round(floor_us, 3),
            "floor_from_kernels": bool(kernel), "dataset_floor_us": floors,
            "stream_fraction": None if stream is None else round(stream, 4),
            "l2_fraction": None if l2_fraction is None else round(l2_fraction, 4),
            "l2_samples": len(in_l2),
            "gemm_max": {p: round(v, 4) for p, v in sorted(tops.items())},
            "gemm_half_flops": {p: float(f"{v:.4g}") for p, v in sorted(halves.items())},
            "gemm_shape": {p: v for p, v in sorted(shapes.items())},
            "samples": {"gemm": len(gemms), "stream": len(streams), "all": len(samples)},
            "sources": sorted({s.model or "neusight/linear+bmm" for s in samples})}


def source_of(s: Sample) -> str:
    """The data source of a sample: NeuSight's GEMM tables, its model tables, Vidur, traces."""
    return s.model.split("/")[0] if s.model else "tables"


def _gemm_curve(gpu: Gpu, rows: list[Op], floor_us: float,
                stream: float) -> tuple[float, float, float] | None:
    """(gemm_max, half, shape) with the least squared log error of the kernel model
    (``rates.kernel_s``, vectorized) over ``rows``; for each (shape, half) on the grids,
    gemm_max is the geometric mean of the large-GEMM fraction each compute-bound row implies
    (<= 1). None: fewer than MIN_ROWS compute-bound rows."""
    f = np.array([op.flops for op in rows])
    t = np.array([op.measured_ms * 1e-3 for op in rows])
    peak = np.array([peak_flops(gpu, op.precision) for op in rows])
    t_bytes = np.array([op.bytes for op in rows]) / (gpu.memory_bandwidth_gbs * 1e9 * stream)
    # floor- or bandwidth-bound rows say little about the GEMM rate
    usable = (np.array([bool(gpu.tflops(op.precision)[0]) for op in rows])
              & (t > 2 * floor_us * 1e-6) & (t_bytes < 0.5 * t))
    if usable.sum() < MIN_ROWS:
        return None
    best: tuple[float, float, float, float] | None = None
    for shape in SHAPE_GRID:
        fs = f**shape
        for half in HALF_GRID:
            curve = fs / (fs + half**shape)
            top = min(1.0, math.exp(float(np.mean(np.log(f / (peak * t * curve))[usable]))))
            model = np.maximum(np.maximum(floor_us * 1e-6, f / (peak * top * curve)), t_bytes)
            loss = float(np.sum(np.log(model / t) ** 2))
            if best is None or loss < best[0]:
                best = (loss, top, half, shape)
    return None if best is None else best[1:]


def fit(samples: list[Sample], catalog: Catalog, exclude_models: tuple[str, ...] = (),
        exclude_gpus: tuple[str, ...] = ()) -> dict[str, object]:
    by_gpu: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.model not in exclude_models and s.gpu not in exclude_gpus:
            by_gpu[s.gpu].append(s)
    gpus = {name: fit_gpu(catalog.gpu(name), ss) for name, ss in sorted(by_gpu.items())}
    measured = [g["floor_us"] for g in gpus.values() if g["floor_from_kernels"]]
    streams = [g["stream_fraction"] for g in gpus.values() if g["stream_fraction"] is not None]
    for g in gpus.values():
        if not g.pop("floor_from_kernels") and measured:
            g["floor_us"] = round(statistics.median(measured), 3)
        if g["stream_fraction"] is None:  # too few large elementwise ops: the others' median
            g["stream_fraction"] = round(statistics.median(streams), 4)
    kept = [s for s in samples if s.model not in exclude_models and s.gpu not in exclude_gpus]
    return {"carry": fit_carry(kept, gpus, catalog), "gpus": gpus}


def fit_carry(samples: list[Sample], gpus: dict[str, Any], catalog: Catalog) -> dict[str, float]:
    """Per kind of kernel, how much of an op's deviation from the model on one GPU recurs on
    another: the slope (through 0) of log(measured / model) on the target against the same on
    the source, over every op measured on two fitted GPUs of different chips (ordered pairs;
    between GPUs of one chip the projection carries the whole deviation), averaged over the
    data sources; clipped to [0, 1]. Traces' kernels differ by name between vendors: not paired."""
    table = parse_rates({"gpus": gpus, "error_pct": 0.0, "procedure": ""})
    logs: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)
    for s in samples:
        r = table.rates.get(s.gpu)
        if r is None or s.op.measured_ms <= 0 or not (s.op.flops or s.op.bytes):
            continue
        floor = r.dataset_floor_us.get(dataset_of(s))
        r = replace(r, floor_us=floor) if floor else r
        key = (s.op.kind, source_of(s), s.model, s.op.name, s.op.flops, s.op.bytes,
               s.op.precision)
        logs[key][s.gpu] = math.log(s.op.measured_ms * 1e-3
                                    / _model_s(catalog.gpu(s.gpu), r, s.op))
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for key, by_gpu in logs.items():
        for a, x in by_gpu.items():
            for b, y in by_gpu.items():
                if a != b and not same_chip(catalog.gpu(a), catalog.gpu(b)):
                    acc = sums[key[0], key[1]]
                    acc[0] += x * y
                    acc[1] += x * x
    out = {}
    for kind in sorted({k for k, _ in sums}):
        slopes = [xy / xx for (k, _), (xy, xx) in sums.items() if k == kind and xx > 0]
        out[kind] = round(min(1.0, max(0.0, statistics.fmean(slopes))), 3)
    return out


def gather(roots: list[Path], trace_dir: Path | None, catalog: Catalog) -> list[Sample]:
    samples: list[Sample] = []
    for root in roots:
        samples += gemm_tables(root, catalog)
    samples += workload_samples(read_all(roots, catalog))
    if trace_dir is not None:
        samples += trace_samples(trace_dir, catalog)
    return samples


PROCEDURE = ("benchmarks/fit_rates.py, per GPU, only on shared/timings (NeuSight, Vidur) and the"
             " TraceLens H100/MI300X trace pairs: floor = 1st percentile of kernel-level times"
             " (traces, Vidur; else the others' median); stream_fraction = median achieved /"
             " datasheet bandwidth of memory-bound ops larger than L2; l2_fraction = the same over"
             " ops of L2/8..L2 bytes where it beats stream_fraction; GEMM efficiency"
             " max x F^s/(F^s+half^s) per rate (bf16 = fp16) by least squared log error (s and"
             " half on grids, max = geometric mean of implied fractions; fused attention kernels"
             " left out); carry per kind = slope through 0 of log(measured/model) on one GPU"
             " against another over ops measured on both, mean over data sources. error_pct:"
             " p90 |error| leave-one-model-out; error_pct_unfitted: leave-one-GPU-out")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", type=Path, help="folders laid out like shared/timings")
    ap.add_argument("--traces", type=Path, help="folder with the tracelens-{h100,mi300} pairs")
    ap.add_argument("--error-pct", type=float, default=None,
                    help="range between fitted GPUs: p90 |error|, leave-one-model-out")
    ap.add_argument("--error-pct-unfitted", type=float, default=None,
                    help="range involving an unfitted GPU: p90 |error|, leave-one-GPU-out")
    ap.add_argument("--write", type=Path, help="write the rates JSON here (else stdout)")
    args = ap.parse_args(argv)
    catalog = load_catalog()
    doc = fit(gather(args.roots, args.traces, catalog), catalog)
    old = json.loads(args.write.read_text()) if args.write and args.write.exists() else {}
    doc = {"procedure": PROCEDURE,
           "error_pct": args.error_pct if args.error_pct is not None
           else old.get("error_pct", 25.0),
           "error_pct_unfitted": args.error_pct_unfitted if args.error_pct_unfitted is not None
           else old.get("error_pct_unfitted", 30.0),
           "sources": ["sitar-lab/NeuSight@6945927d (MIT): linear.csv, bmm.csv, label/",
                       "microsoft/vidur@7d475133 (MIT): data/profiling/compute/*/mlp.csv",
                       "TraceLens H100/MI300X trace pairs (shared/traces/kineto)"],
           **doc}
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
