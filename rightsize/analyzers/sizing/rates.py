"""Achievable rates per GPU and the time one kernel takes at them.

Inputs: the fitted rates (``rightsize/catalog/data/rates.json``, written by
``benchmarks/fit_rates.py`` from ``shared/timings`` and the shared trace pairs; see
docs/sizing.md) and a catalog :class:`~rightsize.catalog.Gpu`. Outputs: :class:`Rates` for any
GPU (fitted, else the vendor's median of the fitted GPUs) and :func:`kernel_s` /
:func:`project_kernel_s`, the per-kernel model:

    time = max(floor, FLOPs / (peak x gemm_fraction(FLOPs)), bytes / (bandwidth x stream_fraction))

with ``gemm_fraction(F) = gemm_max x F^s / (F^s + gemm_half_flops^s)`` (small GEMMs fill fewer
SMs; ``s`` = ``gemm_shape``, 1 where not fitted),
and ``l2_fraction`` instead of ``stream_fraction`` for kernels whose bytes fit the L2 cache
(where fitted: L4).
A kernel measured on one GPU is projected as the model's time on the target times the source's
measured / model time raised to ``carry`` (per kind of kernel): the share of a kernel's deviation
from the model that recurs on another GPU, fitted as the regression slope of the log deviations
of the same ops measured on two GPUs (``carry`` 1: the plain ratio of the model's times). Pure.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from rightsize.catalog import Gpu

# Kinds of kernel the model distinguishes (kernels without FLOPs/bytes scale by their kind).
GEMM, STREAM, OTHER = "gemm", "stream", "other"
# A kernel of unknown size is taken to be this large (FLOPs) when it is compute-bound: a
# mid-size GEMM, so the ratio uses the middle of the efficiency curve.
TYPICAL_GEMM_FLOPS = 1e10


def rate_key(precision: str) -> str:
    """The rate a precision is fitted under: bf16 and fp16 share the 16-bit tensor rate (one
    datasheet peak, the same MMA units), so they are fitted and looked up together."""
    return "fp16" if precision in ("bf16", "fp16") else str(precision)


@dataclass(frozen=True, slots=True)
class Rates:
    """What one GPU reaches in practice, as fractions of its datasheet peaks."""

    gpu: str
    vendor: str
    floor_us: float  # shortest kernel: launch + ramp, whatever the size
    stream_fraction: float  # of datasheet DRAM bandwidth, large elementwise kernels
    gemm_max: Mapping[str, float]  # Precision value -> fraction of dense peak, large GEMMs
    gemm_half_flops: Mapping[str, float]  # Precision value -> FLOPs reaching half gemm_max
    fitted: bool = True  # False: vendor median of the fitted GPUs
    sources: tuple[str, ...] = field(default=())
    # Floors as other timing methods see them (NeuSight's per-op CUDA events add framework
    # overhead); used by benchmarks/projection_accuracy.py on those data only.
    dataset_floor_us: Mapping[str, float] = field(default_factory=dict)
    # Of datasheet DRAM bandwidth, memory-bound ops whose bytes fit the L2 cache (their inputs
    # are often still there); None: not measured, the DRAM fraction applies.
    l2_fraction: float | None = None
    # Kind of kernel -> the share (exponent) of its measured / model time on this GPU that
    # recurs on another (the table's fitted value; absent: 1, the whole deviation carries).
    carry: Mapping[str, float] = field(default_factory=dict)
    # Precision value -> Hill exponent of the GEMM curve (absent: 1): below 1 the efficiency
    # rises over more decades of FLOPs (A100: from 1e9 to 1e11), above 1 it saturates sooner.
    gemm_shape: Mapping[str, float] = field(default_factory=dict)

    def bandwidth_fraction(self, gpu: Gpu, bytes_per_kernel: float) -> float:
        """The fraction of DRAM bandwidth a kernel moving ``bytes_per_kernel`` reaches."""
        if self.l2_fraction is not None and gpu.l2_mb and bytes_per_kernel <= gpu.l2_mb * 2**20:
            return self.l2_fraction
        return self.stream_fraction

    def gemm_fraction(self, precision: str, flops: float) -> float:
        top = self.gemm_max.get(rate_key(precision))
        half = self.gemm_half_flops.get(rate_key(precision))
        shape = self.gemm_shape.get(rate_key(precision), 1.0)
        if top is None or half is None:  # not measured at this precision: the others' median
            top = statistics.median(self.gemm_max.values())
            half = statistics.median(self.gemm_half_flops.values())
            shape = statistics.median(self.gemm_shape.values()) if self.gemm_shape else 1.0
        return top * flops**shape / (flops**shape + half**shape)


@dataclass(frozen=True, slots=True)
class RatesTable:
    rates: Mapping[str, Rates]  # catalog GPU name -> fitted rates
    error_pct: float  # range of a projection between fitted GPUs (p90 |error|, leave-one-model-out)
    procedure: str
    error_pct_unfitted: float | None = None  # ... involving an unfitted GPU (leave-one-GPU-out)

    def error_for(self, *gpus: Gpu) -> float:
        """The |error| (%) a projection between ``gpus`` carries as its range."""
        if all(g.name in self.rates for g in gpus) or self.error_pct_unfitted is None:
            return self.error_pct
        return self.error_pct_unfitted

    def for_gpu(self, gpu: Gpu) -> Rates:
        """Fitted rates of ``gpu``, else the median of its vendor's fitted GPUs."""
        if gpu.name in self.rates:
            return self.rates[gpu.name]
        same = [r for r in self.rates.values() if r.vendor == gpu.vendor]
        pool = same or list(self.rates.values())
        precisions = {p for r in pool for p in r.gemm_max}
        return Rates(
            gpu.name, gpu.vendor,
            floor_us=statistics.median(r.floor_us for r in pool),
            stream_fraction=statistics.median(r.stream_fraction for r in pool),
            gemm_max={p: statistics.median(r.gemm_max[p] for r in pool if p in r.gemm_max)
                      for p in precisions},
            gemm_half_flops={p: statistics.median(r.gemm_half_flops[p] for r in pool
                                                  if p in r.gemm_half_flops)
                             for p in precisions},
            fitted=False,
            sources=(f"median of the fitted {gpu.vendor + ' ' if same else ''}GPUs",),
            dataset_floor_us={d: statistics.median(r.dataset_floor_us[d] for r in pool
                                                   if d in r.dataset_floor_us)
                              for d in {d for r in pool for d in r.dataset_floor_us}},
            carry=pool[0].carry,
            gemm_shape={p: statistics.median(r.gemm_shape.get(p, 1.0) for r in pool
                                             if p in r.gemm_max) for p in precisions},
        )


def parse_rates(doc: Mapping[str, Any]) -> RatesTable:
    """A rates document (the layout fit_rates.py writes) as a :class:`RatesTable`."""
    rates = {}
    carry = {str(k): float(v) for k, v in doc.get("carry", {}).items()}
    for name, r in doc["gpus"].items():
        rates[name] = Rates(name, str(r["vendor"]), float(r["floor_us"]), float(r["stream_fraction"]),
                            {k: float(v) for k, v in r["gemm_max"].items()},
                            {k: float(v) for k, v in r["gemm_half_flops"].items()}, True, tuple(r.get("sources", ())),
                            {k: float(v) for k, v in r.get("dataset_floor_us", {}).items()},
                            None if r.get("l2_fraction") is None else float(r["l2_fraction"]),
                            carry, {k: float(v) for k, v in r.get("gemm_shape", {}).items()})
    unfitted = doc.get("error_pct_unfitted")
    return RatesTable(rates, float(doc["error_pct"]), str(doc["procedure"]),
                      None if unfitted is None else float(unfitted))


@cache
def load_rates() -> RatesTable:
    """The shipped rates (package data)."""
    text = resources.files("rightsize.catalog").joinpath("data/rates.json").read_text("utf-8")
    return parse_rates(json.loads(text))


def peak_flops(gpu: Gpu, precision: str) -> float:
    """Dense peak FLOP/s at ``precision`` (or the precision the GPU falls back to)."""
    peak, _ = gpu.tflops(precision)
    return (peak or gpu.fp32_tflops or 1.0) * 1e12


def kernel_s(gpu: Gpu, rates: Rates, flops: float, bytes_: float, precision: str,
             kernels: int = 1, kind: str = GEMM) -> float:
    """Model time (s) of ``kernels`` kernels doing ``flops`` and moving ``bytes_`` on ``gpu``.

    Only GEMM-kind kernels are timed by their FLOPs: an elementwise kernel's few FLOPs per
    byte never bound it, and the GEMM efficiency curve does not describe it.
    """
    t_flops = 0.0
    if flops > 0 and kind == GEMM:
        t_flops = flops / (peak_flops(gpu, precision) * rates.gemm_fraction(
            _used(gpu, precision), flops))
    t_bytes = bytes_ / (gpu.memory_bandwidth_gbs * 1e9
                        * rates.bandwidth_fraction(gpu, bytes_ / max(kernels, 1)))
    return max(rates.floor_us * 1e-6 * kernels, t_flops, t_bytes)


def _used(gpu: Gpu, precision: str) -> str:
    return str(gpu.tflops(precision)[1])


def same_chip(a: Gpu, b: Gpu) -> bool:
    """Two catalog GPUs built on one chip (architecture with its die, and SM count): a kernel's
    deviation from the model recurs whole between them (NeuSight's GEMM tables, A100 40GB vs
    80GB PCIe: slope 0.98 over 6,642 pairs), so ``carry`` does not apply."""
    return (a.architecture == b.architecture and a.sm_count is not None
            and a.sm_count == b.sm_count)


def project_kernel_s(measured_s: float, src: tuple[Gpu, Rates], dst: tuple[Gpu, Rates],
                     precision: str, flops: float | None = None, bytes_: float | None = None,
                     kind: str = OTHER, kernels: int = 1) -> float:
    """A kernel that took ``measured_s`` on ``src``, projected onto ``dst``.

    Onto the GPU it ran on: ``measured_s``. With FLOPs or bytes: model(dst) x (``measured_s`` /
    model(src)) ** carry(kind), the source's ``carry`` (1 between GPUs of one chip). Without: scaled by its kind (GEMM:
    large-GEMM rate, stream: bandwidth), never below the target's floor; ``OTHER`` kernels
    (unclassified) scale by bandwidth, as most such kernels are memory-bound.
    """
    (sg, sr), (dg, dr) = src, dst
    if sg.name == dg.name:
        return measured_s
    if flops or bytes_:
        f, b = flops or 0.0, bytes_ or 0.0
        model_s = kernel_s(sg, sr, f, b, precision, kernels, kind)
        carry = 1.0 if same_chip(sg, dg) else sr.carry.get(kind, 1.0)
        return (kernel_s(dg, dr, f, b, precision, kernels, kind)
                * (measured_s / model_s) ** carry)
    if kind == GEMM:
        f = TYPICAL_GEMM_FLOPS
        ratio = (f / (peak_flops(dg, precision) * dr.gemm_fraction(_used(dg, precision), f))
                 / (f / (peak_flops(sg, precision) * sr.gemm_fraction(_used(sg, precision), f))))
    else:
        ratio = (sg.memory_bandwidth_gbs * sr.stream_fraction
                 / (dg.memory_bandwidth_gbs * dr.stream_fraction))
    floor_s, floor_d = sr.floor_us * 1e-6, dr.floor_us * 1e-6
    if measured_s <= floor_s:  # a floor-bound kernel stays floor-bound
        return measured_s * floor_d / floor_s
    return max(floor_d, floor_d + (measured_s - floor_s) * ratio)

