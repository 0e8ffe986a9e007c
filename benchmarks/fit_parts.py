"""The parts of the rate fit beyond one GPU's GEMM curve (``fit_rates.py``): the kernel floor,
the streaming classes' bandwidth fractions, fused attention's ratio to the GEMM curve, the
curve's shape and time scale for GPUs with few GEMMs, and the carry between GPUs of one vendor
and of two. Not part of the package.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timings import Op

from rightsize.analyzers.sizing.kernel_class import (
    ATTENTION_CLASS,
    GEMM,
    MATRIX,
    STREAMING,
)
from rightsize.analyzers.sizing.rates import (
    STREAM,
    Rates,
    kernel_s,
    parse_rates,
    peak_flops,
    same_chip,
)
from rightsize.catalog import Catalog, Gpu

MIN_ROWS = 5  # fewer ops of a kind (GEMMs at a precision, large streams) say too little
FLOOR_BYTES = 2**20  # a streaming op under 1 MiB: well under a microsecond of HBM time


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured kernel/op on one GPU, with where it came from (for leave-one-out)."""

    gpu: str
    model: str  # "" for the model-independent GEMM tables
    op: Op


def dataset_of(s: Sample) -> str:
    return s.model.split("/")[0] if s.model else "neusight"


def source_of(s: Sample) -> str:
    """The data source of a sample: NeuSight's GEMM tables, its model tables, Vidur, traces."""
    return s.model.split("/")[0] if s.model else "tables"


def _model_s(gpu: Gpu, r: Rates, op: Op) -> float:
    return kernel_s(gpu, r, op.flops, op.bytes, op.precision, 1, op.kind)


def floor_us_of(samples: list[Sample]) -> float:
    """What a kernel takes that moves next to nothing: the median time of the streaming ops
    under FLOOR_BYTES (launch, ramp and drain; MIN_ROWS of them), else the 1st percentile of
    all the times."""
    tiny = sorted(s.op.measured_ms for s in samples
                  if s.op.kind not in MATRIX and 0 < s.op.bytes < FLOOR_BYTES)
    if len(tiny) >= MIN_ROWS:
        return statistics.median(tiny) * 1e3
    times = sorted(s.op.measured_ms for s in samples)
    return times[int(0.01 * (len(times) - 1))] * 1e3


def class_fractions(gpu: Gpu, samples: list[Sample], big: float) -> dict[str, float]:
    """Per streaming class (softmax, norm, elementwise...), the median achieved / datasheet
    bandwidth of its ops of ``big`` bytes or more, where it has MIN_ROWS of them."""
    out = {}
    for klass in sorted(STREAMING):
        got = [s.op.bytes / (s.op.measured_ms * 1e-3) / (gpu.memory_bandwidth_gbs * 1e9)
               for s in samples if s.op.kind == klass and s.op.bytes >= big]
        if len(got) >= MIN_ROWS:
            out[klass] = round(min(1.0, statistics.median(got)), 4)
    return out


def attention_ratio(gpu: Gpu, samples: list[Sample], tops: dict[str, float],
                     halves: dict[str, float], shapes: dict[str, float]) -> float | None:
    """Fused attention's rate over the GEMM curve's at the same FLOPs: the geometric mean over
    the GPU's fused attention calls (traces), None without any."""
    r = Rates(gpu.name, gpu.vendor, 0.0, 1.0, tops, halves, gemm_shape=shapes)
    logs = [math.log(s.op.flops / (peak_flops(gpu, s.op.precision) * r.gemm_fraction(
                _used(gpu, s.op.precision), s.op.flops)) / (s.op.measured_ms * 1e-3))
            for s in samples if s.op.kind == ATTENTION_CLASS and s.op.flops > 0 and tops]
    return min(1.0, math.exp(statistics.fmean(logs))) if logs else None


def _used(gpu: Gpu, precision: str) -> str:
    return str(gpu.tflops(precision)[1])


def derive_classes(gpus: dict[str, Any]) -> None:
    """A streaming class a GPU has too few large ops of takes its stream fraction times the
    class's median ratio to the stream fraction on the GPUs that have it (listed in
    ``class_fraction_derived``)."""
    ratios = {k: statistics.median(g["class_fraction"][k] / g["stream_fraction"]
                                   for g in gpus.values() if k in g["class_fraction"])
              for k in {k for g in gpus.values() for k in g["class_fraction"]}}
    for g in gpus.values():
        derived = sorted(k for k in ratios if k not in g["class_fraction"])
        for k in derived:
            g["class_fraction"][k] = round(min(1.0, g["stream_fraction"] * ratios[k]), 4)
        g["class_fraction"] = dict(sorted(g["class_fraction"].items()))
        g["class_fraction_derived"] = derived


def curve_constants(gpus: dict[str, Any], catalog: Catalog) -> dict[str, tuple[float, float]]:
    """Per rate, the median shape and time scale (tau = half / (peak x gemm_max), seconds) of
    the well-determined GEMM curves: H100, A100 and A40 at 16 bits take 11-13 us at their
    large-GEMM rate to reach half of it."""
    out = {}
    for prec in sorted({p for g in gpus.values() for p in g["gemm_max"]}):
        well = [(name, g) for name, g in gpus.items()
                if g["gemm_well_determined"].get(prec)]
        if not well:
            continue
        taus = [g["gemm_half_flops"][prec] / (peak_flops(catalog.gpu(n), prec)
                                              * g["gemm_max"][prec]) for n, g in well]
        out[prec] = (statistics.median(g["gemm_shape"][prec] for _, g in well),
                     statistics.median(taus))
    return out


def fit_carry(samples: list[Sample], gpus: dict[str, Any], catalog: Catalog,
              cross_vendor: bool = False) -> dict[str, float]:
    """Per class of kernel, how much of an op's deviation from the model on one GPU recurs on
    another: the slope (through 0) of log(measured / model) on the target against the same on
    the source, over every op measured on two fitted GPUs of different chips (ordered pairs;
    between GPUs of one chip the projection carries the whole deviation) of the same vendor,
    or of different vendors with ``cross_vendor``, averaged over the data sources; clipped to
    [0, 1]. ``gemm``/``stream`` also stand for every matrix/streaming class without pairs of
    its own. Traces' kernels differ by name between vendors: not paired."""
    table = parse_rates({"gpus": gpus, "error_pct": 0.0, "procedure": ""})
    gpu_of = {s.gpu: catalog.gpu(s.gpu) for s in samples if s.gpu in table.rates}
    paired = {(a, b) for a, ga in gpu_of.items() for b, gb in gpu_of.items()
              if a != b and not same_chip(ga, gb) and (ga.vendor != gb.vendor) == cross_vendor}
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
                                    / _model_s(gpu_of[s.gpu], r, s.op))
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for key, by_gpu in logs.items():
        for a, x in by_gpu.items():
            for b, y in by_gpu.items():
                if (a, b) in paired:
                    acc = sums[key[0], key[1]]
                    acc[0] += x * y
                    acc[1] += x * x
    slopes = {k: xy / xx for k, (xy, xx) in sums.items() if xx > 0}
    out = {}
    for kind in sorted({k for k, _ in slopes}):
        out[kind] = _clip(statistics.fmean(v for (k, _), v in slopes.items() if k == kind))
    for general, members in ((GEMM, MATRIX), (STREAM, STREAMING)):
        if general not in out and any(k in members for k, _ in slopes):
            out[general] = _clip(statistics.fmean(v for (k, _), v in slopes.items()
                                                  if k in members))
    return out


def _clip(v: float) -> float:
    return round(min(1.0, max(0.0, v)), 3)


