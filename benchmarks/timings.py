"""Readers for folders laid out like ``shared/timings`` (NeuSight and Vidur measurements).

Each measured operator becomes an :class:`Op`: its FLOPs and bytes (from the shapes the file
records), its kind for the rate model, its measured time, and how many times it counts towards
the end-to-end time (NeuSight files hold one transformer layer: layer ops count ``num_layer``
times). Ops with no device work (views, ``size``, ``getitem``: host-side bookkeeping) have kind
``host`` and are held constant by the projection, like host time in a trace.

Used by ``fit_rates.py`` and ``projection_accuracy.py``; not part of the package.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rightsize.analyzers.sizing.kernel_class import (
    BMM,
    ELEMENTWISE,
    GEMM,
    NORM_CLASS,
    SOFTMAX_CLASS,
)
from rightsize.catalog import Catalog, load_catalog
from rightsize.catalog.catalog import parse_catalog_text

# GPUs the timings measured that the shipped catalog lacks (NeuSight's MI100, MI210, MI250),
# with their datasheet specs: fitted like the others, used through their vendor's median.
FIT_GPUS = Path(__file__).resolve().parent / "data" / "fit_gpus.csv"


def fit_catalog() -> Catalog:
    """The shipped catalog plus :data:`FIT_GPUS`: every GPU the timings measured."""
    return load_catalog([parse_catalog_text(FIT_GPUS.read_text(), FIT_GPUS.name)])

HOST = "host"
ELEMENT_BYTES = {"torch.float32": 4, "torch.float16": 2, "torch.bfloat16": 2, "torch.int64": 8,
                 "torch.int32": 4, "torch.bool": 1}
VIEW_OPS = {"view", "permute", "transpose", "size", "getitem", "getattr", "unsqueeze", "expand",
            "split", "dim", "reshape", "type", "finfo", "setitem", "type_as", "float", "long",
            "bool", "to"}
NORM_MODULES = ("norm", "ln")
STREAM_MODULES = ("drop", "dropout", "act", "activation", "embeddings", "wte", "wpe", "tokens",
                  "f", "fn")
MODULE_CLASS = re.compile(r"<class '([\w.]+)'>")
STREAM_CLASSES = {"Dropout", "Embedding", "ReLU", "GELU", "Tanh", "Softmax", "SiLU"}
LAYER = re.compile(r"(?:^|_)(?:layer|layers|h|block|blocks)_0_")


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    kind: str  # its kernel_class (gemm, bmm, norm, softmax, elementwise) or HOST
    flops: float
    bytes: float
    precision: str
    measured_ms: float
    count: float  # times it runs per end-to-end measurement


@dataclass(frozen=True, slots=True)
class Workload:
    """One model configuration measured on one GPU."""

    key: str  # model configuration, the same on every GPU
    gpu: str  # catalog name
    ops: tuple[Op, ...]
    e2e_ms: float  # measured end to end


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def _shapes(text: str) -> list[list[int]]:
    try:
        value = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        return []
    return [list(s) for s in value if isinstance(s, (list, tuple))]


def _short(target: str) -> str:
    m = re.search(r"(?:function|method) (\w+)", target)
    return m.group(1) if m else target.split(".")[-1]


def _module_part(row: dict[str, str]) -> str:
    """What a call_module node is: its class from the fx meta (GPT-2's ``ln_1`` is a LayerNorm,
    not a Linear named "1"), else the last part of its name."""
    classes = MODULE_CLASS.findall(row.get("meta") or "")
    cls = classes[-1].rsplit(".", 1)[-1] if classes else ""
    if "Norm" in cls:
        return "norm"
    if cls in STREAM_CLASSES:
        return "act"
    return row["Name"].split("_")[-1]


def neusight_ops(row: dict[str, str], count: float, training: bool) -> list[Op]:
    """The device work of one torch.fx node (forward, and backward when training)."""
    ins = _shapes(row["input_shapes"])
    out = _shapes("[" + row["output_shape"] + "]") if row["output_shape"] else []
    out_n = _numel(out[0]) if out else 0
    size = ELEMENT_BYTES.get(row["dtype"], 4)
    prec = {"torch.float16": "fp16", "torch.bfloat16": "bf16"}.get(row["dtype"], "fp32")
    name = _short(row["target"]) if row["op"] != "call_module" else row["Name"]
    part = _module_part(row)
    kind, flops, moved = ELEMENTWISE, 0.0, 0.0
    big_ins = [s for s in ins if _numel(s) > 1]
    if row["op"] in ("placeholder", "get_attr", "output"):
        return []
    if name in ("addmm", "matmul", "bmm", "baddbmm") and len(big_ins) >= 2 and out:
        a, b = big_ins[-2], big_ins[-1]
        kind = BMM if name != "addmm" and len(a) >= 3 else GEMM  # attention's score GEMMs
        flops = 2.0 * out_n * a[-1]
        moved = (_numel(a) + _numel(b) + out_n) * size
    elif row["op"] == "call_module" and part.startswith(NORM_MODULES):
        kind, flops, moved = NORM_CLASS, 5.0 * out_n, 2.0 * out_n * size
    elif row["op"] == "call_module" and part not in STREAM_MODULES and ins and out:
        k, n = ins[0][-1], out[0][-1]  # a Linear: weight [n, k] is not in input_shapes
        kind, flops = GEMM, 2.0 * out_n * k
        moved = (_numel(ins[0]) + k * n + out_n) * size
    elif out_n <= 1 or name in VIEW_OPS:
        kind = HOST
    else:
        moved = (sum(_numel(s) for s in big_ins) + out_n) * size
        flops = float(out_n)
        if "softmax" in (name + part).lower():
            kind = SOFTMAX_CLASS
    if kind != HOST and moved <= 0:
        kind = HOST
    fw = float(row["fw_latency"] or row["latency"] or 0)
    ops = [Op(row["Name"], kind, flops, moved, prec, fw, count)]
    bw = float(row["bw_latency"] or 0) if training else 0.0
    if bw > 0:  # backward: two GEMMs per forward GEMM; elementwise grads move ~2x the bytes
        ops.append(Op(row["Name"] + ".bw", kind, 2 * flops, 2 * moved, prec, bw, count))
    return ops


def read_neusight(root: Path, catalog: Catalog) -> list[Workload]:
    out = []
    for csv_path in sorted(root.glob("neusight/label/*/*.csv")):
        meta_path = csv_path.with_suffix(".json")
        if not meta_path.exists():
            continue
        match = catalog.match(csv_path.parent.name.replace("_", " "))
        if match.gpu is None:
            continue
        meta = json.loads(meta_path.read_text())
        training = "-train-" in csv_path.name
        ops: list[Op] = []
        with csv_path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        # The file holds one layer: the nodes from its first to its last named node (function
        # nodes between them carry no module path) run num_layer times.
        inside = [i for i, r in enumerate(rows) if LAYER.search(r["Name"])]
        first, last = (inside[0], inside[-1]) if inside else (-1, -2)
        for i, row in enumerate(rows):
            count = float(meta["num_layer"]) if first <= i <= last else 1.0
            ops += neusight_ops(row, count, training)
        out.append(Workload(f"neusight/{csv_path.stem}", match.gpu.name, tuple(ops),
                            float(meta["e2e_latency"])))
    return out


VIDUR_GPUS = {"a100": "A100 80GB SXM", "h100": "H100 SXM", "a40": "A40"}
VIDUR_TOKENS = tuple(2 ** i for i in range(13))  # 1 .. 4096


def vidur_ops(r: dict[str, str]) -> list[Op]:
    """One decoder layer's operators (fp16) at ``num_tokens`` from the model's dimensions."""
    t = int(r["num_tokens"])
    tp = int(r["num_tensor_parallel_workers"])
    e, f = int(r["n_embd"]), int(r["n_expanded_embd"])
    h, kv = int(r["n_head"]), int(r["n_kv_head"])
    hd = e // h
    gated = r["use_gated_mlp"] == "True"
    size = 2

    def ms(name: str) -> float:
        return float(r.get(f"time_stats.{name}.median") or 0.0)

    def gemm(name: str, k: int, n: int) -> Op:
        return Op(name, GEMM, 2.0 * t * k * n, (t * k + k * n + t * n) * size, "fp16",
                  ms(name), 1.0)

    def stream(name: str, elems_in: int, elems_out: int, flops_per: float = 1.0) -> Op:
        kind = NORM_CLASS if name.endswith("layernorm") else ELEMENTWISE
        return Op(name, kind, flops_per * elems_out, (elems_in + elems_out) * size, "fp16",
                  ms(name), 1.0)

    up = f * (2 if gated else 1) // tp
    ops = [
        stream("input_layernorm", t * e, t * e, 5.0),
        gemm("attn_pre_proj", e, (h + 2 * kv) * hd // tp),
        stream("attn_rope", t * (h + kv) * hd // tp, t * (h + kv) * hd // tp, 6.0),
        gemm("attn_post_proj", e // tp, e),
        stream("post_attention_layernorm", t * e, t * e, 5.0),
        gemm("mlp_up_proj", e, up),
        stream("mlp_act", t * up, t * f // tp, 4.0),
        gemm("mlp_down_proj", f // tp, e),
        stream("add", 2 * t * e, t * e),
    ]
    return [o for o in ops if f"time_stats.{o.name}.median" in r]


def read_vidur(root: Path) -> list[Workload]:
    out = []
    for path in sorted(root.glob("vidur/*/*-mlp.csv")):
        gpu = VIDUR_GPUS.get(path.parent.name)
        if gpu is None:
            continue
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                if int(r["num_tokens"]) not in VIDUR_TOKENS:
                    continue
                ops = tuple(vidur_ops(r))
                key = (f"vidur/{path.stem.removesuffix('-mlp')}-tp{r['num_tensor_parallel_workers']}"
                       f"-t{r['num_tokens']}")
                out.append(Workload(key, gpu, ops, sum(o.measured_ms for o in ops)))
    return out


def model_of(key: str) -> str:
    """The model a workload key belongs to (for leave-one-model-out)."""
    if key.startswith("neusight/"):
        return "neusight/" + key.split("/")[1].split("-")[0]
    return key.rsplit("-tp", 1)[0]


def read_all(roots: list[Path], catalog: Catalog) -> list[Workload]:
    out: list[Workload] = []
    for root in roots:
        out += read_neusight(root, catalog) + read_vidur(root)
    return out


def trace_kernels(path: Path, catalog: Catalog) -> tuple[object, tuple, float]:
    """(catalog GPU, per-step KernelWork items, step ms) of one trace, via the product."""
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.analyzers.sizing.kernels_projection import kernel_work
    from rightsize.traces.loader import ReadOptions, load

    inputs = load([path], None, ReadOptions())
    rank = analyze_trace(inputs.traces[0], Context(catalog=catalog))
    gpu = rank.device_match.gpu if rank.device_match else None
    if gpu is None or rank.work is None or rank.diagnosis is None:
        raise SystemExit(f"{path}: no catalog GPU or no kernels")
    steps = rank.steps.count
    return gpu, kernel_work(rank.work, steps, gpu.architecture), \
        rank.diagnosis.step_ns / steps / 1e6


def trace_workload(path: Path, catalog: Catalog) -> tuple[Any, Any]:
    """(sizing Workload, catalog GPU) of one trace, built as the analysis builds it."""
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.analyzers.sizing.measured import measured_inputs
    from rightsize.analyzers.sizing.model import Workload as SizingWorkload
    from rightsize.traces.loader import ReadOptions, load

    inputs = load([path], None, ReadOptions())
    trace = inputs.traces[0]
    rank = analyze_trace(trace, Context(catalog=catalog))
    gpu = rank.device_match.gpu if rank.device_match else None
    diag = rank.diagnosis
    if gpu is None or rank.work is None or diag is None or diag.shares_pct is None:
        raise SystemExit(f"{path}: no catalog GPU or no diagnosis")
    step_ms = diag.step_ns / rank.steps.count / 1e6
    shares = {k: step_ms * v / 100.0 for k, v in diag.shares_pct.items()}
    return SizingWorkload(step_ms=step_ms, shares_ms=shares, peak_memory_bytes=None,
                          current_device_name=gpu.name,
                          **measured_inputs(trace, rank.work, rank.steps.count,
                                            rank.primary_device, gpu.architecture)), gpu
