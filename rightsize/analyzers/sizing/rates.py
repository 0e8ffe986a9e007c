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
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from rightsize.analyzers.sizing.kernel_class import ATTENTION_CLASS, MATRIX
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
    # Streaming class (kernel_class: softmax, norm, elementwise, reduction, copy) -> its own
    # achieved fraction of DRAM bandwidth on large ops (absent: ``stream_fraction``)
    class_fraction: Mapping[str, float] = field(default_factory=dict)
    # Fused attention's rate over the GEMM curve's at the same FLOPs (FlashAttention on an
    # H100, the Triton attn_fwd on an MI300X: softmax and rescaling between two GEMMs)
    attention_ratio: float | None = None
    # as ``carry``, between GPUs of different vendors (other kernels, other libraries)
    carry_cross_vendor: Mapping[str, float] = field(default_factory=dict)

    def bandwidth_fraction(self, gpu: Gpu, bytes_per_kernel: float, kind: str = "") -> float:
        """The fraction of DRAM bandwidth a kernel of ``kind`` moving ``bytes_per_kernel``
        reaches."""
        if self.l2_fraction is not None and gpu.l2_mb and bytes_per_kernel <= gpu.l2_mb * 2**20:
            return self.l2_fraction
        return self.class_fraction.get(kind, self.stream_fraction)

    def carry_for(self, kind: str, other: Gpu, this: Gpu) -> float:
        """The share of a ``kind`` kernel's deviation from the model that recurs on ``other``."""
        if same_chip(this, other):
            return 1.0
        table = self.carry_cross_vendor if this.vendor != other.vendor \
            and self.carry_cross_vendor else self.carry
        general = GEMM if kind in MATRIX else STREAM
        return table.get(kind, table.get(general, self.carry.get(general, 1.0)))

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
    # ... between GPUs of two vendors (the trace pairs' GPU part, leave-one-pair-out)
    error_pct_cross_vendor: float | None = None

    def error_for(self, *gpus: Gpu) -> float:
        """The |error| (%) a projection between ``gpus`` carries as its range."""
        if self.error_pct_cross_vendor is not None and len({g.vendor for g in gpus}) > 1:
            return self.error_pct_cross_vendor
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
            class_fraction={k: statistics.median(r.class_fraction[k] for r in pool
                                                 if k in r.class_fraction)
                            for k in {k for r in pool for k in r.class_fraction}},
            attention_ratio=_median([r.attention_ratio for r in pool]),
            carry_cross_vendor=pool[0].carry_cross_vendor,
        )


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def parse_rates(doc: Mapping[str, Any]) -> RatesTable:
    """A rates document (the layout fit_rates.py writes) as a :class:`RatesTable`."""
    rates = {}
    carry = {str(k): float(v) for k, v in doc.get("carry", {}).items()}
    cross = {str(k): float(v) for k, v in doc.get("carry_cross_vendor", {}).items()}

    def floats(d: Mapping[str, Any] | None) -> dict[str, float]:
        return {str(k): float(v) for k, v in (d or {}).items()}
    for name, r in doc["gpus"].items():
        ratio = r.get("attention_ratio")
        rates[name] = Rates(name, str(r["vendor"]), float(r["floor_us"]),
                            float(r["stream_fraction"]), floats(r["gemm_max"]),
                            floats(r["gemm_half_flops"]), True, tuple(r.get("sources", ())),
                            floats(r.get("dataset_floor_us")),
                            None if r.get("l2_fraction") is None else float(r["l2_fraction"]),
                            carry, floats(r.get("gemm_shape")), floats(r.get("class_fraction")),
                            None if ratio is None else float(ratio), cross)
    unfitted, cross_err = doc.get("error_pct_unfitted"), doc.get("error_pct_cross_vendor")
    return RatesTable(rates, float(doc["error_pct"]), str(doc["procedure"]),
                      None if unfitted is None else float(unfitted),
                      None if cross_err is None else float(cross_err))


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
    if flops > 0 and kind in MATRIX:
        rate = peak_flops(gpu, precision) * rates.gemm_fraction(_used(gpu, precision), flops)
        if kind == ATTENTION_CLASS and rates.attention_ratio:
            rate *= rates.attention_ratio
        t_flops = flops / rate
    t_bytes = bytes_ / (gpu.memory_bandwidth_gbs * 1e9
                        * rates.bandwidth_fraction(gpu, bytes_ / max(kernels, 1), kind))
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
        carry = sr.carry_for(kind, dg, sg)
        return (kernel_s(dg, dr, f, b, precision, kernels, kind)
                * (measured_s / model_s) ** carry)
    if kind in MATRIX:
        f = TYPICAL_GEMM_FLOPS
        ratio = (kernel_s(dg, dr, f, 0.0, precision, 1, kind)
                 / kernel_s(sg, sr, f, 0.0, precision, 1, kind))
    else:
        ratio = (sg.memory_bandwidth_gbs * sr.bandwidth_fraction(sg, math.inf, kind)
                 / (dg.memory_bandwidth_gbs * dr.bandwidth_fraction(dg, math.inf, kind)))
    floor_s, floor_d = sr.floor_us * 1e-6, dr.floor_us * 1e-6
    if measured_s <= floor_s:  # a floor-bound kernel stays floor-bound
        return measured_s * floor_d / floor_s
    return max(floor_d, floor_d + (measured_s - floor_s) * ratio)

