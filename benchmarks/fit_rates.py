"""Fit the achievable rates in ``rightsize/catalog/data/rates.json`` from measured timings.

    python benchmarks/fit_rates.py ../shared/timings --traces ../shared/traces/kineto \\
        [--write rightsize/catalog/data/rates.json]

Data (nothing else): NeuSight ``linear.csv``/``bmm.csv`` (one GEMM kernel per row, fp32, 8
NVIDIA GPUs), NeuSight per-op model tables (``label/``: 9 NVIDIA GPUs and AMD's MI100, MI210,
MI250, whose specs the catalog lacks and ``data/fit_gpus.csv`` gives), Vidur fp16 per-op tables
(A100, H100, A40), and the kernels of the TraceLens H100/MI300X trace pairs (bf16) with FLOPs
and bytes from their recorded shapes: the only CDNA 3 and fused-attention timings there are.
``projection_accuracy.py --pairs`` checks the pairs leaving each pair's two traces out.

Procedure, per GPU with data (every op has a kernel class, ``sizing/kernel_class.py``):

1. ``floor_us``: what a kernel moving next to nothing takes, the median time of the kernel-level
   (CUPTI traces, Vidur) streaming ops under 1 MiB (else the 1st percentile of all); a GPU with
   only NeuSight's per-op events (framework overhead included) gets the median of the others;
   ``dataset_floor_us`` keeps each data set's own floor for the harness.
2. ``stream_fraction``: the median of achieved / datasheet bandwidth over memory-bound ops
   (elementwise, norms, GEMVs under a quarter of the ridge; not the strided class) larger than
   L2 and 16 MiB; fewer than 5: its vendor's median. ``class_fraction``: the same per streaming
   class (softmax, norm, elementwise, strided, reduction, copy) with 5 or more such ops, else
   ``stream_fraction`` times the class's median ratio to it on the GPUs that have it
   (``class_fraction_derived``). ``l2_fraction``: the same median over memory-bound ops of L2/8
   to L2 bytes, kept only where it beats ``stream_fraction`` (L4: its 48 MB L2 in front of 300
   GB/s).
3. ``gemm_max``, ``gemm_half_flops`` and ``gemm_shape`` per rate (bf16 and fp16 share the
   16-bit tensor rate): GEMMs, batched GEMMs and convolutions are modelled as
   max(floor, F / (peak x gemm_max x F^s / (F^s + half^s)), bytes / (bw x stream_fraction));
   ``s`` (the Hill exponent) is searched on SHAPE_GRID and ``half`` on a log grid (1e6..1e12
   FLOPs, 49 points), ``gemm_max`` is the geometric mean of the fraction each compute-bound
   row implies (capped at 1); the least squared log error wins. A curve with fewer than 20
   usable rows or under 2 decades of FLOPs (the MI300X's) takes the median shape and time scale
   tau = half / (peak x gemm_max) of the well-determined curves at its rate (H100, A100, A40
   at 16 bits: 11-13 us) and fits gemm_max alone.
4. ``attention_ratio``: fused attention's rate over the GEMM curve's at the same FLOPs, the
   geometric mean over the GPU's fused attention calls (FlashAttention on the H100, the Triton
   ``attn_fwd`` on the MI300X).
5. ``carry`` per class (and ``gemm``/``stream`` for classes without pairs): the same op measured
   on two fitted GPUs of different chips of one vendor deviates from the model by x =
   log(measured / model) on one and y on the other; the slope of y on x through 0 over the
   ordered pairs, averaged over the data sources, clipped to [0, 1]; ``carry_cross_vendor`` the
   same over pairs of two vendors (NeuSight's MI-series against its NVIDIA GPUs: a GEMM's
   deviation does not recur across vendors, 0.03; an elementwise op's does, 0.92). Timings
   only: the traces pair across vendors only by PyTorch's own kernels.

``error_pct`` (the range a projection between two fitted GPUs carries) is the 90th percentile
of the leave-one-model-out |error| of ``projection_accuracy.py --cv`` on the same data,
``error_pct_unfitted`` (a projection involving a GPU without fitted rates) that of the
leave-one-GPU-out |error|, ``error_pct_cross_vendor`` (between vendors) the largest
leave-one-pair-out GPU-part |error| of the trace pairs (``--pairs``); pass them with
``--error-pct``/``--error-pct-unfitted``/``--error-pct-cross-vendor``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_parts import (
    MIN_ROWS,
    Sample,
    attention_ratio,
    class_fractions,
    curve_constants,
    dataset_of,
    derive_classes,
    fit_carry,
    floor_us_of,
)
from timings import HOST, Op, Workload, fit_catalog, model_of, read_all, trace_kernels

from rightsize.analyzers.metrics.precision import name_precision
from rightsize.analyzers.sizing.kernel_class import ATTENTION_CLASS, BMM, GEMM, MATRIX, STRIDED
from rightsize.analyzers.sizing.rates import peak_flops, rate_key
from rightsize.catalog import Catalog, Gpu
from rightsize.errors import RightsizeError

HALF_GRID = tuple(10 ** (6 + i / 8) for i in range(49))
# Hill exponents of the GEMM curve tried with each half point: how many decades of FLOPs the
# efficiency takes to rise (0.5: about four, 1: two, 1.5: one and a half).
SHAPE_GRID = (0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5)
STREAM_MIN_BYTES = 16 * 2**20
TRACE_PAIRS = ("tracelens-h100-*", "tracelens-mi300-*")
KERNEL_DATASETS = ("trace", "vidur")
# A GEMM curve is well determined by WELL_ROWS compute-bound rows over WELL_DECADES decades of
# FLOPs; a GPU with less (an MI300X's few trace GEMMs) keeps the well-determined GPUs' shape
# and time scale (half = tau x peak x gemm_max) and fits gemm_max alone.
WELL_ROWS, WELL_DECADES = 20, 2.0


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
                kind = BMM if name == "bmm.csv" else GEMM
                op = Op(f"{r['OPName']} {b}x{m}x{n}x{k}", kind, 2.0 * b * m * n * k,
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
                if it.flops is not None and it.kernels == 1 and it.dur_ns > 0 \
                        and not it.borrowed:
                    out.append(Sample(gpu.name, model, Op(it.name, it.kind, it.flops or 0.0,
                                                          it.bytes or 0.0, it.precision,
                                                          it.dur_ns / 1e6 / it.count, 1.0)))
    return out


def workload_samples(workloads: Iterable[Workload]) -> list[Sample]:
    return [Sample(w.gpu, model_of(w.key), op) for w in workloads for op in w.ops
            if op.kind != HOST and op.measured_ms > 0]


def memory_bound(gpu: Gpu, op: Op) -> bool:
    """Elementwise ops, and GEMMs (GEMVs) whose FLOPs/byte is under a quarter of the ridge."""
    if op.kind not in MATRIX:
        return True
    peak, _ = gpu.tflops(op.precision)
    ridge = (peak or gpu.fp32_tflops or 1.0) * 1e12 / (gpu.memory_bandwidth_gbs * 1e9)
    return op.bytes > 0 and op.flops / op.bytes < ridge / 4


def fit_gpu(gpu: Gpu, samples: list[Sample],
            fixed: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    floors = {d: round(floor_us_of([s for s in samples if dataset_of(s) == d]), 3)
              for d in sorted({dataset_of(s) for s in samples})}
    # Kernel floor: from kernel-level timings (CUPTI traces, Vidur); NeuSight's per-op events
    # include framework overhead, so a GPU with only those gets the others' median (fit()).
    kernel = [v for d, v in floors.items() if d in KERNEL_DATASETS]
    floor_us = min(kernel) if kernel else floors.get("neusight", 5.0)
    big = max(STREAM_MIN_BYTES, (gpu.l2_mb or 0) * 2**20)  # no smaller than L2
    streams = [s.op.bytes / (s.op.measured_ms * 1e-3) / (gpu.memory_bandwidth_gbs * 1e9)
               for s in samples if s.op.bytes >= big and memory_bound(gpu, s.op)
               and s.op.kind != STRIDED]  # the vector-load rate; strided has its own class
    stream = min(1.0, statistics.median(streams)) if len(streams) >= MIN_ROWS else None
    l2 = (gpu.l2_mb or 0) * 2**20
    in_l2 = [s.op.bytes / (s.op.measured_ms * 1e-3) / (gpu.memory_bandwidth_gbs * 1e9)
             for s in samples if l2 / 8 <= s.op.bytes <= l2 and memory_bound(gpu, s.op)]
    l2_fraction = statistics.median(in_l2) if len(in_l2) >= MIN_ROWS else None
    if l2_fraction is not None and stream is not None and l2_fraction <= stream:
        l2_fraction = None  # below the DRAM rate: latency-limited (the floor's part), no L2 gain
    # the GEMM curve: GEMMs, batched GEMMs, convolutions; fused attention has its own ratio
    gemms = [s for s in samples if s.op.kind in MATRIX and s.op.kind != ATTENTION_CLASS
             and s.op.flops > 0]
    tops: dict[str, float] = {}
    halves: dict[str, float] = {}
    shapes: dict[str, float] = {}
    wells: dict[str, bool] = {}
    for prec in sorted({rate_key(gpu.tflops(s.op.precision)[1]) for s in gemms}):
        rows = [s.op for s in gemms if rate_key(gpu.tflops(s.op.precision)[1]) == prec]
        curve = _gemm_curve(gpu, rows, floor_us, stream or 0.8)
        if curve is not None and not curve[3] and fixed and prec in fixed:
            curve = _gemm_curve(gpu, rows, floor_us, stream or 0.8, fixed[prec])
        if curve is not None:
            tops[prec], halves[prec], shapes[prec], wells[prec] = curve
    classes = class_fractions(gpu, samples, big)
    ratio = attention_ratio(gpu, samples, tops, halves, shapes)
    return {"vendor": gpu.vendor, "floor_us": round(floor_us, 3),
            "floor_from_kernels": bool(kernel), "dataset_floor_us": floors,
            "stream_fraction": None if stream is None else round(stream, 4),
            "l2_fraction": None if l2_fraction is None else round(l2_fraction, 4),
            "l2_samples": len(in_l2),
            "gemm_max": {p: round(v, 4) for p, v in sorted(tops.items())},
            "gemm_half_flops": {p: float(f"{v:.4g}") for p, v in sorted(halves.items())},
            "gemm_shape": {p: v for p, v in sorted(shapes.items())},
            "gemm_well_determined": {p: v for p, v in sorted(wells.items())},
            "class_fraction": classes,
            "attention_ratio": None if ratio is None else round(ratio, 4),
            "samples": {"gemm": len(gemms), "stream": len(streams), "all": len(samples)},
            "sources": sorted({s.model or "neusight/linear+bmm" for s in samples})}


def _gemm_curve(gpu: Gpu, rows: list[Op], floor_us: float, stream: float,
                fixed: tuple[float, float] | None = None
                ) -> tuple[float, float, float, bool] | None:
    """(gemm_max, half, shape, well_determined) with the least squared log error of the kernel
    model (``rates.kernel_s``, vectorized) over ``rows``; for each (shape, half) on the grids,
    gemm_max is the geometric mean of the large-GEMM fraction each compute-bound row implies
    (<= 1). ``fixed`` (shape, tau): the shape given and half = tau x peak x gemm_max (the
    curve's time scale, in seconds at the large-GEMM rate), only gemm_max fitted. None: fewer
    than MIN_ROWS compute-bound rows. Well determined: WELL_ROWS usable rows over
    WELL_DECADES decades of FLOPs."""
    f = np.array([op.flops for op in rows])
    t = np.array([op.measured_ms * 1e-3 for op in rows])
    peak = np.array([peak_flops(gpu, op.precision) for op in rows])
    t_bytes = np.array([op.bytes for op in rows]) / (gpu.memory_bandwidth_gbs * 1e9 * stream)
    # floor- or bandwidth-bound rows say little about the GEMM rate
    usable = (np.array([bool(gpu.tflops(op.precision)[0]) for op in rows])
              & (t > 2 * floor_us * 1e-6) & (t_bytes < 0.5 * t))
    if usable.sum() < MIN_ROWS:
        return None
    well = bool(usable.sum() >= WELL_ROWS
                and np.log10(f[usable].max() / f[usable].min()) >= WELL_DECADES)

    def fitted(shape: float, half: float) -> tuple[float, float]:
        fs = f**shape
        curve = fs / (fs + half**shape)
        top = min(1.0, math.exp(float(np.mean(np.log(f / (peak * t * curve))[usable]))))
        model = np.maximum(np.maximum(floor_us * 1e-6, f / (peak * top * curve)), t_bytes)
        return float(np.sum(np.log(model / t) ** 2)), top
    if fixed is not None:
        shape, tau = fixed
        top = 0.5
        for _ in range(20):  # half depends on gemm_max: a fixed point, reached in a few steps
            _, top = fitted(shape, tau * float(peak[0]) * top)
        return top, tau * float(peak[0]) * top, shape, False
    best: tuple[float, float, float, float] | None = None
    for shape in SHAPE_GRID:
        for half in HALF_GRID:
            loss, top = fitted(shape, half)
            if best is None or loss < best[0]:
                best = (loss, top, half, shape)
    return None if best is None else (*best[1:], well)


def fit(samples: list[Sample], catalog: Catalog, exclude_models: tuple[str, ...] = (),
        exclude_gpus: tuple[str, ...] = ()) -> dict[str, object]:
    by_gpu: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.model not in exclude_models and s.gpu not in exclude_gpus:
            by_gpu[s.gpu].append(s)
    gpus = {name: fit_gpu(catalog.gpu(name), ss) for name, ss in sorted(by_gpu.items())}
    fixed = curve_constants(gpus, catalog)
    gpus = {name: fit_gpu(catalog.gpu(name), ss, fixed) for name, ss in sorted(by_gpu.items())}
    measured = [g["floor_us"] for g in gpus.values() if g["floor_from_kernels"]]
    for g in gpus.values():
        if not g.pop("floor_from_kernels") and measured:
            g["floor_us"] = round(statistics.median(measured), 3)
        if g["stream_fraction"] is None:  # too few large streaming ops: its vendor's median
            same = [o["stream_fraction"] for o in gpus.values()
                    if o["stream_fraction"] is not None and o["vendor"] == g["vendor"]]
            pool = same or [o["stream_fraction"] for o in gpus.values()
                            if o["stream_fraction"] is not None]
            g["stream_fraction"] = round(statistics.median(pool), 4)
    derive_classes(gpus)
    # traces pair across vendors only by PyTorch's own kernels: their carry is left to timings
    kept = [s for s in samples if s.model not in exclude_models and s.gpu not in exclude_gpus
            and dataset_of(s) != "trace"]
    return {"carry": fit_carry(kept, gpus, catalog),
            "carry_cross_vendor": fit_carry(kept, gpus, catalog, cross_vendor=True),
            "gpus": gpus}


def gather(roots: list[Path], trace_dir: Path | None, catalog: Catalog) -> list[Sample]:
    samples: list[Sample] = []
    for root in roots:
        samples += gemm_tables(root, catalog)
    samples += workload_samples(read_all(roots, catalog))
    if trace_dir is not None:
        samples += trace_samples(trace_dir, catalog)
    return samples


PROCEDURE = ("benchmarks/fit_rates.py, per GPU and kernel class (sizing/kernel_class.py), only on"
             " shared/timings (NeuSight incl. MI100/MI210/MI250, Vidur) and the TraceLens"
             " H100/MI300X trace pairs: floor = median time of kernel-level streaming ops under 1"
             " MiB (traces, Vidur; else the others' median); stream_fraction and class_fraction"
             " = median achieved / datasheet bandwidth of memory-bound ops larger than L2 (a"
             " class without 5: stream_fraction x its median ratio elsewhere); GEMM efficiency"
             " max x F^s/(F^s+half^s) per rate (bf16 = fp16) by least squared log error, a curve"
             " with few GEMMs at the well-determined curves' shape and time scale;"
             " attention_ratio = fused attention / GEMM curve rate at its FLOPs (geometric mean);"
             " carry per class = slope through 0 of log(measured/model) on one GPU against"
             " another (one vendor; carry_cross_vendor: two), mean over data sources, timings"
             " only. error_pct: p90 |error| leave-one-model-out; error_pct_unfitted:"
             " leave-one-GPU-out; error_pct_cross_vendor: largest leave-one-pair-out GPU-part"
             " |error| of the trace pairs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", type=Path, help="folders laid out like shared/timings")
    ap.add_argument("--traces", type=Path, help="folder with the tracelens-{h100,mi300} pairs")
    ap.add_argument("--error-pct", type=float, default=None,
                    help="range between fitted GPUs: p90 |error|, leave-one-model-out")
    ap.add_argument("--error-pct-unfitted", type=float, default=None,
                    help="range involving an unfitted GPU: p90 |error|, leave-one-GPU-out")
    ap.add_argument("--error-pct-cross-vendor", type=float, default=None,
                    help="range between vendors: largest leave-one-pair-out GPU-part |error|")
    ap.add_argument("--write", type=Path, help="write the rates JSON here (else stdout)")
    args = ap.parse_args(argv)
    catalog = fit_catalog()
    doc = fit(gather(args.roots, args.traces, catalog), catalog)
    old = json.loads(args.write.read_text()) if args.write and args.write.exists() else {}
    doc = {"procedure": PROCEDURE,
           "error_pct": args.error_pct if args.error_pct is not None
           else old.get("error_pct", 25.0),
           "error_pct_unfitted": args.error_pct_unfitted if args.error_pct_unfitted is not None
           else old.get("error_pct_unfitted", 30.0),
           "error_pct_cross_vendor": args.error_pct_cross_vendor
           if args.error_pct_cross_vendor is not None
           else old.get("error_pct_cross_vendor", 30.0),
           "sources": [("sitar-lab/NeuSight@6945927d (MIT): linear.csv, bmm.csv, label/ (the"
                        " MI-series with benchmarks/data/fit_gpus.csv's specs)"),
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
