"""From a diagnosis to advice: the catalog's ridge point, the tuning rules, the sizing workload.

Inputs: a rank's :class:`Measures` and the GPU catalog. Outputs: a ridge function for the
classifier and :class:`~rightsize.analyzers.document.diagnosis.Recommendation` nodes from the
rule catalog kept as data (``data/recommendations.json``, whose measure names are checked
against :class:`Measures` when it loads). Pure (the rule file is package data).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis.classify import Ridge
from rightsize.analyzers.diagnosis.steady import Steady, steady
from rightsize.analyzers.document.diagnosis import Recommendation, WhatIf
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.kernels import tensor_core_flag
from rightsize.analyzers.metrics.precision import with_precision
from rightsize.analyzers.thresholds import ADVICE
from rightsize.catalog import Gpu
from rightsize.vocab import Bound, Precision

PRECISIONS = {p.value for p in Precision}
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
              "hipStreamSynchronize", "hipDeviceSynchronize", "aten::item",
              "aten::_local_scalar_dense")
# nn.DataParallel's own frames and autograd functions (DistributedDataParallel is excluded).
DATA_PARALLEL = (r"nn/parallel/data_parallel\.py|nn\.parallel\.data_parallel|"
                 r"nn/parallel/_functions\.py|^Broadcast$|^ReduceAddCoalesced$|"
                 r"nn\.Module: DataParallel")
_OPS = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}


def ridge_for(gpu: Gpu) -> Ridge:
    """Precision -> FLOPs per byte at the ridge point of ``gpu`` (dense peak / bandwidth)."""
    def ridge(precision: str | None) -> float | None:
        p = precision if precision in PRECISIONS else "fp32"  # fp64 etc.: the fp32 rate
        tflops, _ = gpu.tflops(p)
        if not tflops or not gpu.memory_bandwidth_gbs:
            return None
        return tflops * 1e12 / (gpu.memory_bandwidth_gbs * 1e9)
    return ridge


@dataclass(frozen=True, slots=True)
class Measures:
    """The measured values the tuning rules compare with their thresholds, in the unit the
    name says; ``None``: not measured on this capture (a rule on it never fires, and a rule
    that ``requires`` it does not apply). Every ``measure``, ``requires``, ``unless`` and
    ``impact`` of ``data/recommendations.json`` names one of these fields: :func:`rules` checks
    it when it loads the file."""

    dataloader_pct: float | None = None  # exposed data-loader wait, % of the step
    gpu_util_pct: float | None = None  # TensorBoard plugin GPU utilization (None: no GPU)
    gpu_idle_pct: float | None = None  # 100 - gpu_util_pct
    communication_pct: float | None = None  # exposed communication, % of the step
    memory_of_device_pct: float | None = None  # peak allocated, % of the device's memory
    fp32_matmul_pct: float | None = None  # fp32 compute kernels off tensor cores, % of kernels
    # HTA host wait of the busiest compute stream, % of the GPU span (never over 100: streams of
    # copies and collectives idle by design and are not summed in)
    host_wait_pct: float | None = None
    kernel_wait_pct: float | None = None  # HTA kernel wait of the same stream, % of the span
    pageable_h2d_copies: float | None = None  # host-to-device copies >= 1 MiB from pageable memory
    sync_idle_pct: float | None = None  # synchronizing calls while the GPU idles, % of the step
    fp32_step_pct: float | None = None  # fp32 matrix kernels off tensor cores, % of the step
    eager_attention_pct: float | None = None  # unfused attention kernels, % of kernel time
    eager_attention_step_pct: float | None = None  # the same, % of the step
    sm_activity_pct: float | None = None  # GPM SM activity, mean over the steps
    data_parallel_ops: float | None = None  # nn.DataParallel frames and functions
    memory_pct: float | None = None  # memory-bound kernels, % of the step
    # the host and idle shares split (diagnosis/host_work.py): the job's own CPU work (decoding,
    # preprocessing, ops on CPU tensors), and the rest (framework, launches, unrecorded time)
    host_cpu_work_pct: float | None = None
    framework_pct: float | None = None
    # all but one of the entries of a library call repeated with one stack in a step, summed
    # over the calls (diagnosis/host_calls.py); None without Python frames
    repeated_work_pct: float | None = None
    # Python-function recording (with_stack) slows every Python call: up to this much of the
    # measured step (half the framework share) is the recorder's, lowering every what-if's low
    tracer_pct: float | None = None
    # the pinned-copy model (:func:`_pinned_what_if`): the pageable host-to-device copies' cost
    # on the step (their runtime calls and DMA, which block the host), the same bytes at the
    # pinned rate of the link; all % of the step
    pageable_cost_pct: float | None = None
    pinned_copy_pct: float | None = None
    # host and idle time less the pageable copies' staging: the host work left around a
    # blocking loader or copy, which runs faster once that is gone (``what_if_host_rest``)
    host_rest_pct: float | None = None
    pcie_pct: float | None = None  # exposed PCIe copies, % of the step
    # the GPU idle while the host runs or nothing is recorded (host + idle shares), % of the
    # step: what more work per step or less host work fills (not the copies' or collectives'
    # wait, which their own rules address)
    host_idle_pct: float | None = None
    # the eager attention chains' FLOPs at a fused kernel's rate (diagnosis/attention.py): as
    # measured on the GPU, at best and at worst; all % of the step
    fused_attention_pct: float | None = None
    fused_attention_best_pct: float | None = None
    fused_attention_worst_pct: float | None = None
    # Not measures: per step (ms), what a what-if removes, cut at the step boundaries, with the
    # steps' numbers and durations; a what-if takes the steady-state steps (diagnosis/steady.py)
    per_step_ms: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    step_numbers: tuple[int, ...] = ()
    step_dur_ms: tuple[float, ...] = ()


STEADY_FIELDS = frozenset({"per_step_ms", "step_numbers", "step_dur_ms"})
MEASURES = frozenset(f.name for f in fields(Measures)) - STEADY_FIELDS
# read by code, not named by a rule: every what-if (tracer_pct), the pinned-copy model and the
# rules with ``what_if_host_rest`` (host_rest_pct)
CODE_MEASURES = frozenset({"tracer_pct", "pinned_copy_pct", "host_rest_pct",
                           "fused_attention_pct", "fused_attention_best_pct",
                           "fused_attention_worst_pct"})
RULE_MEASURE_KEYS = ("measure", "requires", "unless", "impact", "what_if")


def check_rules(rules: list[dict[str, Any]]) -> None:
    """Refuse a rule catalog that names a measure :class:`Measures` does not have."""
    for rule in rules:
        for k in RULE_MEASURE_KEYS:
            if k in rule and rule[k] not in MEASURES:
                raise ValueError(f"recommendation rule {rule.get('id')!r}: {k} "
                                 f"{rule[k]!r} is not a measure (advise.Measures)")
        if rule.get("op") not in _OPS:
            raise ValueError(f"recommendation rule {rule.get('id')!r}: op {rule.get('op')!r}")
        bad = [b for b in rule.get("bounds", ()) if b not in {str(x) for x in Bound}]
        if bad:
            raise ValueError(f"recommendation rule {rule.get('id')!r}: bounds {bad}")


@cache
def rules() -> tuple[dict[str, Any], ...]:
    text = resources.files("rightsize.analyzers.diagnosis").joinpath(
        "data/recommendations.json").read_text()
    catalog = json.loads(text)["rules"]
    check_rules(catalog)
    return tuple(catalog)


# The rules that act on each verdict's own share: listed first when they fire.
FOR_BOUND = {Bound.DATALOADER: ("repeated-host-work", "dataloader-stall",
                                 "dataloader-stall-cpu"),
             Bound.HOST: ("repeated-host-work", "host-cpu-work", "host-bound", "host-wait"),
             Bound.PCIE: ("pageable-copies", "pcie-bound"),
             Bound.COMMUNICATION: ("exposed-communication",),
             Bound.MEMORY: ("memory-bound-kernels",),
             Bound.COMPUTE: ("fp32-without-tensor-cores",)}


# The exposed-communication rule's last sentence when the caller does not know the job's fabric
# (analysis.py passes job.fabric.interconnect_advice: no "use NVLink" to a job already on it).
NO_FABRIC = "A faster interconnect may help; this job's fabric is not known."


def recommend(measures: Measures, bound: Bound | None = None, step_ms: float | None = None,
              gpu: Gpu | None = None,
              words: Mapping[str, str] | None = None) -> list[Recommendation]:
    """The rules that fire on ``measures`` (missing measures never fire), none on an
    inconclusive verdict, each only on the verdicts its ``bounds`` allow and only when its
    ``impact`` is at least ``thresholds.ADVICE.min_impact_pct`` of the step.

    The rules for the verdict ``bound`` come first; then by impact (the share of the step the
    action addresses, from the rule's ``impact`` measure), then in :data:`FOR_BOUND`'s order
    (the concrete fix before the general one), then by how far past its threshold each rule
    is. With ``step_ms`` each carries a what-if; ``gpu`` (the catalog's, None for a CPU
    run or a GPU the catalog lacks) decides which precisions and features the advice names
    (:func:`hardware_words`); ``words`` fill the other named fields of a rule's detail
    (``host_parts``, ``interconnect``).
    """
    if bound == Bound.INCONCLUSIVE:
        return []
    own = FOR_BOUND.get(bound, ()) if bound is not None else ()

    def got(name: str) -> float | None:
        value: float | None = getattr(measures, name) if name else None
        return value

    out: list[tuple[float, float, Recommendation]] = []
    for rule in rules():
        value = got(rule["measure"])
        if value is None or not _OPS[rule["op"]](value, rule["threshold"]):
            continue
        if "requires" in rule and got(rule["requires"]) is None:
            continue  # e.g. GPU advice on a CPU-only run
        if "unless" in rule and got(rule["unless"]) is not None:
            continue
        if "bounds" in rule and bound is not None and str(bound) not in rule["bounds"]:
            continue
        impact = got(rule.get("impact", ""))
        if impact is not None and impact < ADVICE.min_impact_pct:
            continue
        evidence = (f"{value:.1f} {rule['unit']} "  # the unit names the measure, for people
                    f"({rule['op']} {rule['threshold']}; {rule['source']})")
        strength = abs(value - rule["threshold"]) / max(abs(rule["threshold"]), 1.0)
        filled = {"host_parts": "", "interconnect": NO_FABRIC, "attention": "",
                  "repeated_calls": "", "repeat_fix": "", **(words or {})}
        detail = rule["detail"].format(value=value, **{**hardware_words(gpu), **filled})
        out.append((impact or 0.0, strength,
                    Recommendation(rule["id"], rule["title"], detail, evidence,
                                   _what_if(rule, got, step_ms, measures, filled))))
    def order(x: tuple[float, float, Recommendation]) -> tuple[bool, float, int, float]:
        rid = x[2].id
        return (rid not in own, -x[0], own.index(rid) if rid in own else 0, -x[1])
    return [r for _, _, r in sorted(_unsuperseded(out), key=order)]


def _unsuperseded(out: list[tuple[float, float, Recommendation]]
                  ) -> list[tuple[float, float, Recommendation]]:
    """Without the rules whose ``superseded_by`` rule fired with at least half their impact
    (the same time, advised more precisely)."""
    impact = {r.id: i for i, _, r in out}
    by_id = {rule["id"]: rule for rule in rules()}
    return [x for x in out if not any(
        s in impact and impact[s] >= 0.5 * x[0]
        for s in by_id.get(x[2].id, {}).get("superseded_by", ()))]


TRACER_WORDS = ("; Python-function recording (with_stack) slowed the host side: the low end "
                "allows half the framework overhead to be the recorder's")


def _pinned_what_if(rule: dict[str, Any], got: Any, step_ms: float,
                    m: Measures) -> WhatIf | None:
    """Pageable copies pinned: their cost goes, the same bytes move at the pinned rate (half of
    it hidden under host work by non_blocking, as the point; 1.5x it, exposed, at worst), and
    the host work around them runs faster without the staging copy through the CPU's caches (a
    quarter as the point, half at best). Over the steady-state steps when the copies' cost is
    known per step (a one-off copy left out and named). Checked on measured pairs:
    benchmarks/whatif_check.py (H100 and H200, 17 MB to 268 MB a step)."""
    keys = ("pageable_cost_pct", "pinned_copy_pct", "host_rest_pct")
    if any(got(k) is None for k in keys):
        return None
    cost, p, r = (step_ms * got(k) / 100 for k in keys)
    held = _steady(m, "pageable_cost_pct")
    words = ""
    if held is not None and held.outliers and all(k in m.per_step_ms for k in keys):
        cost, p, r = (float(np.asarray(m.per_step_ms[k])[held.kept].mean()) for k in keys)
        words = held.words("the pageable copies' cost")
    after = step_ms - cost
    return WhatIf(after + p / 2 - r / 4, max(after - r / 2, 0.0), after + 1.5 * p,
                  rule.get("what_if_assumes", "") + words, held.outliers if held else ())


def _steady(m: Measures | None, measure: str) -> Steady | None:
    """The steady-state steps of ``measure`` when it is known per step, else None."""
    if m is None or measure not in m.per_step_ms or \
            len(m.per_step_ms[measure]) != len(m.step_numbers):
        return None
    return steady(m.per_step_ms[measure], m.step_numbers, m.step_dur_ms)


def _kept_ratio(m: Measures, measure: str, held: Steady) -> float:
    """The steady-state steps' mean of ``measure`` over every step's (1: no step left out):
    the measure keeps its own definition, less the one-offs."""
    v = np.asarray(m.per_step_ms.get(measure, ()), dtype=float)
    if not held.outliers or len(v) != len(held.kept) or v.mean() <= 0:
        return 1.0
    return float(v[held.kept].mean() / v.mean())


def _fused_what_if(rule: dict[str, Any], got: Any, step_ms: float,
                   words: Mapping[str, str]) -> WhatIf | None:
    """Eager attention fused: its kernels go and the chains' FLOPs run at a fused kernel's
    rate (``diagnosis/attention.py``); without FLOPs, the rule's fractions of the share."""
    eager, fused = got("eager_attention_step_pct"), got("fused_attention_pct")
    if eager is None or fused is None or "fused_attention_rate" not in words:
        return None
    after = step_ms * (1 - eager / 100)
    return WhatIf(after + step_ms * fused / 100,
                  after + step_ms * got("fused_attention_best_pct") / 100,
                  after + step_ms * got("fused_attention_worst_pct") / 100,
                  f"{rule.get('what_if_model_assumes', '')}{words['fused_attention_rate']}")


def _what_if(rule: dict[str, Any], got: Any, step_ms: float | None,
             m: Measures | None = None,
             rule_words: Mapping[str, str] | None = None) -> WhatIf | None:
    """The step if the action removes its share: ``what_if_best`` of it at best (low; all of it
    unless the rule says), ``what_if_fraction`` of it as the point, half that at worst (high).
    The share is the steady-state steps' (one-off steps left out and named:
    ``diagnosis/steady.py``) where it is known per step. With Python functions recorded, the
    low end also drops the recorder's share (``tracer_pct``), which a run without it does not
    pay."""
    if not step_ms:
        return None
    if rule.get("what_if_model") == "pinned":
        return _pinned_what_if(rule, got, step_ms, m) if m is not None else None
    if rule.get("what_if_model") == "fused_attention":
        fused = _fused_what_if(rule, got, step_ms, rule_words or {})
        if fused is not None:
            return fused
    share = got(rule["what_if"]) if "what_if" in rule else None
    if share is None:
        return None
    part = step_ms * min(max(share, 0.0), 100.0) / 100
    rest = step_ms * (got("host_rest_pct") or 0.0) / 100
    held = _steady(m, rule["what_if"])
    words = ""
    if held is not None and held.outliers and m is not None:
        part *= _kept_ratio(m, rule["what_if"], held)
        rest *= _kept_ratio(m, "host_rest_pct", held)
        words = held.words(rule.get("what_if_names", "the time it removes"))
    f = float(rule.get("what_if_fraction", 1.0))
    best = float(rule.get("what_if_best", 1.0))
    tracer = step_ms * (got("tracer_pct") or 0.0) / 100
    if rule["what_if"] == "framework_pct":  # the recorder's share is part of that share
        tracer = min(tracer, part * (1 - best))
    # the host work left after a blocking loader goes runs faster (at best this fraction less)
    rest *= float(rule.get("what_if_host_rest", 0))
    assumes = rule.get("what_if_assumes", "") + (TRACER_WORDS if tracer > 0 else "") + words
    return WhatIf(step_ms - part * f, max(step_ms - part * best - tracer - rest, 0.0),
                  step_ms - part * f / 2, assumes, held.outliers if held else ())


def precision_advice(gpu: Gpu | None) -> str:
    """What to run matrix math at on this GPU, in words: only precisions its hardware runs at
    their own rate (the catalog's throughput columns: no bf16 or TF32 on Volta and Turing, no
    TF32 on an MI250X, fp8 only on Ada, Hopper, Blackwell and the MI300X)."""
    if gpu is None:
        return ("Train under torch.autocast (AMP): dtype=torch.bfloat16 on GPUs from Ampere "
                "on, dtype=torch.float16 with torch.amp.GradScaler on older ones.")
    name = gpu.architecture.split(" (")[0]
    if not gpu.supports("bf16"):
        if not gpu.supports("fp16"):
            return f"The {name} GPU has no tensor cores: fp32 math is its rate."
        lacks = "bf16 or TF32" if not gpu.supports("tf32") else "bf16"
        return (f"The {name} GPU has no {lacks}: train under "
                "torch.autocast(dtype=torch.float16) with torch.amp.GradScaler (AMP).")
    tf32 = (", or allow TF32 with torch.set_float32_matmul_precision('high')"
            if gpu.supports("tf32") else "")
    fp8 = " On this GPU fp8 (Transformer Engine) is a further step for large GEMMs." \
        if gpu.supports("fp8") else ""
    return f"Train under torch.autocast(dtype=torch.bfloat16) (AMP){tf32}.{fp8}"


def fewer_bytes(gpu: Gpu | None, sixteen_bit_pct: float) -> dict[str, str]:
    """The memory-bound rule's way to move fewer bytes, for work already mostly in 16-bit
    (``sixteen_bit_pct`` of its kernel time in bf16/fp16 or less): fp8 where the GPU has it,
    else 16-bit end to end; {} (the hardware default, "use bf16") below half."""
    if sixteen_bit_pct < 50.0:
        return {}
    if gpu is not None and gpu.supports("fp8"):
        return {"fewer_bytes": "move to fp8 (Transformer Engine) to halve the bytes again (the "
                               f"work already runs {sixteen_bit_pct:.0f}% in 16-bit)"}
    return {"fewer_bytes": f"keep tensors 16-bit end to end (the work already runs "
                           f"{sixteen_bit_pct:.0f}% in 16-bit: the fp32 rest is what to halve)"}


def hardware_words(gpu: Gpu | None) -> dict[str, str]:
    """The named fields of a rule's detail that depend on the hardware, so that no rule
    advises what the GPU lacks: ``precision_advice``; ``half_precision``, the 16-bit type it
    runs (bf16, else fp16; a CPU run: bf16); ``fused_attention``, FlashAttention-2 only from
    Ampere on (it needs sm80+; SDPA picks a kernel the GPU has); ``smaller_gpu``, a MIG
    slice only on a GPU that partitions; ``gpu_preprocessing``, nvJPEG and DALI only on
    NVIDIA GPUs."""
    if gpu is None or gpu.supports("bf16"):
        half = "bf16"
    elif gpu.supports("fp16"):
        half = "fp16 (with a GradScaler: this GPU has no bf16)"
    else:
        half = "16-bit types where the GPU has them"
    flash = gpu is None or gpu.supports("bf16")
    nvidia = gpu is None or gpu.vendor.upper() == "NVIDIA"
    return {"precision_advice": precision_advice(gpu), "half_precision": half,
            "fewer_bytes": f"use {half} to halve the bytes",
            "gpu_preprocessing": "torchvision.io.decode_jpeg(device='cuda'), "
            "torchvision.transforms.v2 on CUDA tensors, NVIDIA DALI" if nvidia else
            "torchvision.transforms.v2 on the GPU's tensors",
            "fused_attention": ", or 'flash_attention_2'" if flash else "",
            "smaller_gpu": "a MIG slice of this GPU or a smaller, cheaper GPU"
            if gpu is not None and gpu.has_mig else "a smaller, cheaper GPU"}


def fp32_matmul_pct(work: pl.DataFrame) -> float | None:
    """Share of kernel time in fp32 compute kernels that are not tensor-core kernels (the
    extended definition: on neither list, or an FP32 CUDA-core GEMM by its name)."""
    ns = fp32_off_tensor_cores_ns(work)
    total = int(work["dur_ns"].sum()) if work.height else 0
    return None if ns is None or not total else 100.0 * ns / total


def fp32_off_tensor_cores_ns(work: pl.DataFrame) -> int | None:
    """Time of compute kernels in fp32 off tensor cores (``None``: no precision column)."""
    rows = fp32_off_tensor_cores(work)
    return None if rows is None else int(rows["dur_ns"].sum())


def fp32_off_tensor_cores(work: pl.DataFrame) -> pl.DataFrame | None:
    """The compute kernels in fp32 off tensor cores; a kernel's precision from its name
    first (legacy cuDNN's scudnn_* and <float> engines carry no op dtype), else its op's
    (``None``: no precision column)."""
    if work.height == 0 or "precision" not in work.columns:
        return None
    w = with_precision(work)
    return w.filter((pl.col("work") == "compute") & (pl.col("kernel_precision") == "fp32")
                    & ~tensor_core_flag(w))


def sync_idle_pct(cpu_ops: pl.DataFrame, runtime: pl.DataFrame, device_work: pl.DataFrame,
                  starts: np.ndarray, ends: np.ndarray, step_ns: int) -> float | None:
    """Time inside the steps when the host is in a synchronizing call and the device is idle
    (``device_work``: ``ts_ns``/``dur_ns`` of the primary device's kernels and copies), % of
    the summed step time. A sync while the GPU is busy costs nothing; only the GPU's idle time
    around one is worth removing."""
    if step_ns <= 0:
        return None
    calls = pl.concat([
        runtime.filter(pl.col("name").is_in(SYNC_CALLS)).select("ts_ns", "dur_ns"),
        cpu_ops.filter(pl.col("name").is_in(SYNC_CALLS)).select("ts_ns", "dur_ns"),
    ])
    syncing = iv.from_durations(calls["ts_ns"].to_numpy(), calls["dur_ns"].to_numpy())
    busy = iv.union(iv.from_durations(device_work["ts_ns"].to_numpy(),
                                      device_work["dur_ns"].to_numpy()))
    idle = iv.subtract(iv.union(iv.of(starts, ends)), busy)
    return 100.0 * iv.total(iv.intersect(iv.union(syncing), idle)) / step_ns


def data_parallel_ops(cpu_ops: pl.DataFrame) -> int:
    return int(cpu_ops.select(pl.col("name").str.contains(DATA_PARALLEL).sum()).item())
