"""Which catalog GPUs a memory estimate fits on, alone or as N GPUs, on how many nodes.

Inputs: a model shape, a :class:`~rightsize.analyzers.sizing.estimator.Setup`, a
:class:`~rightsize.catalog.Catalog` and a headroom fraction. Outputs: one frozen
:class:`Placement` per GPU: the smallest power-of-two GPU count whose per-GPU estimate (FSDP /
ZeRO-3 beside any tensor-parallel groups for training; tensor parallel within a node and
pipeline parallel across nodes for inference, each GPU's own vLLM prefill chunk) fits with
headroom, with the parallelism, the interconnect and the node count it needs (GPUs per node from
the catalog, else 8, said which). Pure; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rightsize.analyzers.sizing.parallelism import (
    GPUS_PER_NODE,
    tensor_parallel_ok,
    tp_degree,
)
from rightsize.analyzers.sizing.run_setup import PREFILL_CHUNK, Mode, Recompute, Setup
from rightsize.catalog import Catalog, Gpu
from rightsize.vocab import Precision

if TYPE_CHECKING:
    from rightsize.analyzers.sizing.model_shape import ModelShape

__all__ = ["GPUS_PER_NODE", "GPU_COUNTS", "Placement", "gpus_per_node", "nvlink_group",
           "parallelism_for", "place", "suggestions", "tensor_parallel_ok", "tp_degree"]

# Powers of two: how data/tensor parallel groups are laid out on 8-GPU nodes.
GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True, slots=True)
class Placement:
    """How ``gpu`` holds the job: ``gpus`` of them on ``nodes`` nodes, ``memory_bytes_per_gpu``
    each."""

    gpu: str
    gpus: int
    fits: bool
    memory_bytes_per_gpu: int
    gpu_memory_bytes: int
    parallelism: str
    interconnect: str
    nodes: int = 1
    gpus_per_node: int = GPUS_PER_NODE
    gpus_per_node_source: str = "catalog"  # "catalog" or "default" (the catalog gives none)
    tensor_parallel: int = 1
    prefill_chunk_tokens: int | None = None  # inference: tokens per forward pass
    usd_per_hour: float | None = None  # all ``gpus`` at the catalog's cheapest price
    unsupported: str | None = None  # why it cannot run the precision at all (never fits)

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "gpus": self.gpus, "fits": self.fits,
                "memory_bytes_per_gpu": self.memory_bytes_per_gpu,
                "gpu_memory_bytes": self.gpu_memory_bytes,
                "parallelism": self.parallelism, "interconnect": self.interconnect,
                "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
                "gpus_per_node_source": self.gpus_per_node_source,
                "tensor_parallel": self.tensor_parallel,
                "prefill_chunk_tokens": self.prefill_chunk_tokens,
                "usd_per_hour": self.usd_per_hour, "unsupported": self.unsupported}

    @property
    def node_words(self) -> str:
        """'2 nodes of 8 (8 assumed: the catalog gives no node size for the L4)'."""
        nodes = f"{self.nodes} node{'s' if self.nodes > 1 else ''} of {self.gpus_per_node}"
        if self.gpus_per_node_source == "catalog":
            return nodes
        return f"{nodes} ({self.gpus_per_node} assumed: no node size in the catalog)"


def gpus_per_node(gpu: Gpu) -> tuple[int, str]:
    """GPUs one node of ``gpu`` holds, and where that number comes from."""
    if gpu.gpus_per_node:
        return gpu.gpus_per_node, "catalog"
    return GPUS_PER_NODE, "default"


def nvlink_group(gpu: Gpu) -> int:
    """How many of ``gpu`` one NVLink/Infinity Fabric domain joins: a whole node for SXM/OAM
    boards, 2 (or 4 for "4-way" bridges) for bridged PCIe cards, 1 without a link."""
    if not gpu.nvlink_gbs_total:
        return 1
    if gpu.form_factor.startswith("PCIe"):
        return 4 if "4-way" in gpu.form_factor else 2
    # An 8-GPU board; a GB200's NVLink domain spans its NVL72 rack, beyond its 4-GPU tray.
    return GPUS_PER_NODE


def _kind(training: bool, gpus: int, tp: int, sp: bool) -> str:
    seq = ", sequence parallel" if sp else ""
    if training and tp > 1:
        data = f" x FSDP / ZeRO-3 data parallel {gpus // tp}" if gpus > tp else ""
        return (f"tensor parallel {tp} (Megatron{seq}){data} (weights, gradients, optimizer"
                " state and activations split; tensor parallel within a node)")
    if training:
        return "FSDP / ZeRO-3 data parallel (weights, gradients and optimizer state sharded)"
    if gpus == tp:
        return f"tensor parallel{seq} (weights, KV cache and activations split)"
    return (f"tensor parallel {tp} x pipeline parallel {gpus // tp}{seq} (weights, KV cache"
            " and activations split; tensor parallel within a node)")


def parallelism_for(training: bool, gpus: int, gpu: Gpu, tp: int | None = None,
                    sequence_parallel: bool = False) -> tuple[str, str]:
    """Words for the parallelism ``gpus`` copies of ``gpu`` need, and the interconnect.

    Inference shards with tensor parallelism inside one node (its all-reduces need a GPU
    link's bandwidth) and pipeline parallelism across nodes; training is FSDP/ZeRO-3 data
    parallel, beside tensor-parallel groups when ``tp`` is given. NVLink is named only for a
    GPU the catalog gives one (an L4 has none: its node talks over PCIe)."""
    if gpus == 1:
        return "single GPU", "none"
    per_node = gpus_per_node(gpu)[0]
    tp = tp or (1 if training else min(gpus, per_node))
    kind = _kind(training, gpus, tp, sequence_parallel)
    link = gpu.nvlink_gbs_total or 0
    inside = f"{gpu.link_name} within a node" if nvlink_group(gpu) > 1 else \
        f"PCIe within a node ({gpu.host_link_gbs_per_direction or 0:g} GB/s per direction)"
    if gpus > per_node:
        between = ("NVLink through the NVL72 rack's switches between nodes (an NVL4 system:"
                   " InfiniBand/RoCE)" if "NVL72" in gpu.form_factor else
                   "InfiniBand/RoCE (400 Gb/s per GPU) between nodes")
        wire = f"{math.ceil(gpus / per_node)} nodes of {per_node}: {inside} and {between}"
    elif gpus <= nvlink_group(gpu):
        wire = f"{gpu.link_name} within one node ({link:g} GB/s per GPU)"
    else:
        wire = (f"one node, but {gpus} x {gpu.name} are not all on one"
                f" {gpu.link_name or 'NVLink'} domain: the"
                f" traffic crosses PCIe ({gpu.host_link_gbs_per_direction or 0:g} GB/s per"
                " direction) and will dominate the step")
    return f"{kind} over {gpus} GPUs", wire


def _counts(setup: Setup, training: bool) -> tuple[int, ...]:
    if setup.gpus > 1:
        return (setup.gpus,)
    tp = setup.tensor_parallel or 1
    return tuple(n for n in GPU_COUNTS if n % tp == 0) if training else GPU_COUNTS


def _tp_for(shape: ModelShape | None, setup: Setup, training: bool, n: int,
            per_node: int) -> int | None:
    """The tensor-parallel degree of ``n`` GPUs on nodes of ``per_node`` (None: no layout)."""
    if setup.tensor_parallel is not None:
        return setup.tensor_parallel if setup.tensor_parallel <= per_node else None
    if training:
        return 1
    if shape is None:
        return min(n, per_node) if n % min(n, per_node) == 0 else None
    # A count the user named runs pipeline parallel alone when no degree splits the heads.
    return tp_degree(shape, n, per_node) or (1 if n == setup.gpus else None)


def place(shape: ModelShape | None, setup: Setup, catalog: Catalog,
          headroom_fraction: float = 0.10, params: int | None = None) -> tuple[Placement, ...]:
    """Per GPU, the smallest count that holds ``setup`` with headroom (or, when the setup
    already names ``gpus`` > 1, whether that count fits)."""
    # Imported here: sizing a measured trace needs only the parallelism words of this
    # module, not the memory estimator (five modules, ~4 ms of every `rightsize analyze`).
    from rightsize.analyzers.sizing.estimator import estimate, with_gpus

    training = setup.mode is not Mode.INFERENCE
    cache: dict[tuple[int, int, int | None], int] = {}
    out = []
    for gpu in catalog.gpus:
        per_node, source = gpus_per_node(gpu)
        if (lacks := lacks_precision(gpu, setup.precision)) is not None:
            out.append(Placement(gpu.name, setup.gpus, False, 0, gpu.memory_bytes, lacks,
                                 "none", 1, per_node, source, unsupported=lacks))
            continue
        chunk = None if training else setup.prefill_chunk
        if chunk is None and not training and (shape is None or shape.lm_head):
            chunk = PREFILL_CHUNK.for_gpu(gpu.name, gpu.memory_gib)
        tried = None
        for n in _counts(setup, training):
            tp = _tp_for(shape, setup, training, n, per_node)
            if tp is None:
                continue
            key = (n, tp, chunk)
            if key not in cache:
                run = replace(with_gpus(setup, n, tp if not training else None),
                              prefill_chunk=chunk)
                cache[key] = estimate(shape, run, params).total_bytes
            tried = (n, tp, cache[key])
            if cache[key] * (1 + headroom_fraction) <= gpu.memory_bytes:
                break
        if tried is None:  # only a given --tp beyond this GPU's node size
            out.append(Placement(gpu.name, setup.gpus, False, 0, gpu.memory_bytes,
                                 f"no layout: tensor parallel {setup.tensor_parallel} does not"
                                 f" fit a node of {per_node}", "none", 0, per_node, source,
                                 setup.tensor_parallel or 1))
            continue
        n, tp, need = tried
        fits = need * (1 + headroom_fraction) <= gpu.memory_bytes
        words, wire = parallelism_for(training, n, gpu, tp, setup.sequence_parallel)
        price = catalog.price(gpu.name)
        out.append(Placement(gpu.name, n, fits, need, gpu.memory_bytes, words, wire,
                             math.ceil(n / per_node), per_node, source, tp,
                             None if training else chunk,
                             n * price.usd_per_gpu_hour if price is not None else None))
    return tuple(out)


# Precisions a job stores and computes in, which a GPU without them cannot run (int8/int4 are
# weight-only formats any GPU stores; fp16 and fp32 every GPU runs).
NATIVE_ONLY = ("bf16", "fp8")


def lacks_precision(gpu: Gpu, precision: str) -> str | None:
    """Why ``gpu`` cannot run ``precision`` (a V100 has no bf16), or None."""
    if precision in NATIVE_ONLY and not gpu.supports(precision):
        return f"the {gpu.name} has no {precision}"
    return None


def cheapest_first(placements: tuple[Placement, ...]) -> list[Placement]:
    """The placements that fit, the cheapest per hour first (unpriced last, fewest GPUs
    first among them)."""
    fits = [p for p in placements if p.fits]
    return sorted(fits, key=lambda p: (p.usd_per_hour is None, p.usd_per_hour or 0.0,
                                       p.gpus, p.gpu))


def suggestions(setup: Setup) -> tuple[str, ...]:
    """What shrinks a setup that fits nowhere, cheapest change first, each with its effect."""
    out: list[str] = []
    if setup.mode in (Mode.TRAIN, Mode.FINETUNE):
        out.append("--mode lora: a frozen base and small adapters drop gradients and"
                   " optimizer state (about 16 -> 2 bytes per parameter)")
        out.append("--mode lora --precision int4 (QLoRA): about 0.5 bytes per parameter")
        if setup.recompute is not Recompute.FULL:
            out.append("--recompute full: keep only each layer's input for backward")
        if not setup.tensor_parallel:
            out.append("--tp 8 --sequence-parallel (Megatron): weights, optimizer state and"
                       " activations split over the 8 GPUs of a node")
    elif setup.precision not in (Precision.INT4, Precision.INT8):
        out.append("--precision int8 or int4: half or a quarter of the 16-bit weights")
    if setup.mode is Mode.INFERENCE:
        out.append("a smaller --batch or --seq: the KV cache grows with both")
    else:
        out.append("a smaller --batch with gradient accumulation: activations scale with it")
    out.append(f"more than {GPU_COUNTS[-1]} GPUs, or larger GPUs (--catalog)")
    return tuple(out)
