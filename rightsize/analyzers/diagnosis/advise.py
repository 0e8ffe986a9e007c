"""From a diagnosis to advice: the catalog's ridge point, the tuning rules, the sizing workload.

Inputs: a rank's analysis pieces and the GPU catalog. Outputs: a ridge function for the
classifier, :class:`Recommendation` objects from the rule catalog kept as data
(``data/recommendations.json``), and the :class:`~rightsize.analyzers.sizing.projection.Workload` that the
projection scales. Pure (the rule file is package data).
"""

from __future__ import annotations

import json
import operator
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from rightsize.analyzers.diagnosis.classify import Ridge
from rightsize.analyzers.document.diagnosis import Recommendation
from rightsize.analyzers.metrics.kernels import tensor_core_flag
from rightsize.catalog import Gpu
from rightsize.vocab import Precision

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


def dominant_precision(work: pl.DataFrame) -> str:
    """Precision of most compute-bound kernel time: from recorded op dtypes, else kernel names."""
    w = work.filter(pl.col("work") == "compute") if "work" in work.columns else work
    if w.height == 0:
        return "fp32"
    name = pl.col("name").str.to_lowercase()
    by_name = (pl.when(name.str.contains("e4m3|e5m2|fp8")).then(pl.lit("fp8"))
               .when(name.str.contains("bf16")).then(pl.lit("bf16"))
               .when(name.str.contains(r"fp16|f16|h884|h1688|h16816|_h_|half")).then(pl.lit("fp16"))
               .when(name.str.contains("tf32")).then(pl.lit("tf32"))
               .otherwise(pl.lit("fp32")))
    prec = pl.coalesce(pl.col("precision"), by_name) if "precision" in w.columns else by_name
    top = (w.with_columns(p=prec).group_by("p").agg(pl.col("dur_ns").sum())
           .sort(["dur_ns", "p"], descending=[True, False]))
    value = top["p"][0]
    return value if value in PRECISIONS else "fp32"


@cache
def rules() -> tuple[dict[str, Any], ...]:
    text = resources.files("rightsize.analyzers.diagnosis").joinpath("data/recommendations.json").read_text()
    return tuple(json.loads(text)["rules"])


# The rules that act on each verdict's own share: listed first when they fire.
FOR_BOUND = {"dataloader": ("dataloader-stall", "dataloader-stall-cpu"), "host": ("host-bound", "host-wait"),
             "pcie": ("pcie-bound", "pageable-copies"),
             "communication": ("exposed-communication",),
             "memory": ("memory-bound-kernels",), "compute": ("fp32-without-tensor-cores",)}


def recommend(measures: dict[str, float | None], bound: str | None = None) -> list[Recommendation]:
    """The rules that fire on ``measures`` (missing measures never fire).

    The rules for the verdict ``bound`` come first; then by impact (the share of the step the
    action addresses, from the rule's ``impact`` measure), then by how far past its threshold
    each rule is.
    """
    own = FOR_BOUND.get(bound or "", ())
    out: list[tuple[float, float, Recommendation]] = []
    for rule in rules():
        value = measures.get(rule["measure"])
        if value is None or not _OPS[rule["op"]](value, rule["threshold"]):
            continue
        if "requires" in rule and measures.get(rule["requires"]) is None:
            continue  # e.g. GPU advice on a CPU-only run
        if "unless" in rule and measures.get(rule["unless"]) is not None:
            continue
        evidence = (f"{value:.1f} {rule['unit']} "  # the unit names the measure, for people
                    f"({rule['op']} {rule['threshold']}; {rule['source']})")
        strength = abs(value - rule["threshold"]) / max(abs(rule["threshold"]), 1.0)
        impact = measures.get(rule.get("impact", "")) or 0.0
        out.append((impact, strength, Recommendation(rule["id"], rule["title"],
                                                     rule["detail"].format(value=value),
                                                     evidence)))
    return [r for _, _, r in sorted(out, key=lambda x: (x[2].id not in own, -x[0], -x[1]))]


def fp32_matmul_pct(work: pl.DataFrame) -> float | None:
    """Share of kernel time in fp32 compute kernels that are not tensor-core kernels (the
    extended definition: on neither list, or an FP32 CUDA-core GEMM by its name)."""
    if work.height == 0 or "precision" not in work.columns:
        return None
    total = int(work["dur_ns"].sum())
    tc = tensor_core_flag(work)
    fp32 = work.filter((pl.col("work") == "compute") & (pl.col("precision") == "fp32") & ~tc)
    return 100.0 * int(fp32["dur_ns"].sum()) / total if total else None


def sync_pct(cpu_ops: pl.DataFrame, runtime: pl.DataFrame, step_ns: int) -> float | None:
    if step_ns <= 0:
        return None
    calls = pl.concat([
        runtime.filter(pl.col("name").is_in(SYNC_CALLS)).select("ts_ns", "dur_ns"),
        cpu_ops.filter(pl.col("name").is_in(SYNC_CALLS)).select("ts_ns", "dur_ns"),
    ])
    from rightsize.analyzers.metrics import intervals as iv
    s = calls["ts_ns"].to_numpy()
    return 100.0 * iv.total(iv.union(iv.of(s, s + calls["dur_ns"].to_numpy()))) / step_ns


def data_parallel_ops(cpu_ops: pl.DataFrame) -> int:
    return int(cpu_ops.select(pl.col("name").str.contains(DATA_PARALLEL).sum()).item())
