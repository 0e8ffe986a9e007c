"""Which catalog GPUs a memory estimate fits on, alone or as N GPUs.

Inputs: a model shape, a :class:`~rightsize.analyzers.sizing.estimator.Setup`, a
:class:`~rightsize.catalog.Catalog` and a headroom fraction. Outputs: one frozen
:class:`Placement` per GPU: the smallest power-of-two GPU count whose per-GPU estimate (FSDP /
ZeRO-3 for training, tensor parallelism for inference) fits with headroom, with the
parallelism and the interconnect that count needs. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rightsize.analyzers.sizing.run_setup import Mode, Recompute, Setup
from rightsize.catalog import Catalog, Gpu
from rightsize.vocab import Precision

if TYPE_CHECKING:
    from rightsize.analyzers.sizing.model_shape import ModelShape

# Powers of two: how data/tensor parallel groups are laid out on 8-GPU nodes.
GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
# One node holds 8 GPUs on NVLink/Infinity Fabric boards (HGX, OAM platforms).
GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class Placement:
    """How ``gpu`` holds the job: ``gpus`` of them, ``memory_bytes_per_gpu`` each."""

    gpu: str
    gpus: int
    fits: bool
    memory_bytes_per_gpu: int
    gpu_memory_bytes: int
    parallelism: str
    interconnect: str

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "gpus": self.gpus, "fits": self.fits,
                "memory_bytes_per_gpu": self.memory_bytes_per_gpu,
                "gpu_memory_bytes": self.gpu_memory_bytes,
                "parallelism": self.parallelism, "interconnect": self.interconnect}


def nvlink_group(gpu: Gpu) -> int:
    """How many of ``gpu`` one NVLink/Infinity Fabric domain joins: a whole node for SXM/OAM
    boards, 2 (or 4 for "4-way" bridges) for bridged PCIe cards, 1 without a link."""
    if not gpu.nvlink_gbs_total:
        return 1
    if gpu.form_factor.startswith("PCIe"):
        return 4 if "4-way" in gpu.form_factor else 2
    return GPUS_PER_NODE


def parallelism_for(training: bool, gpus: int, gpu: Gpu,
                    tp: int | None = None) -> tuple[str, str]:
    """Words for the parallelism ``gpus`` copies of ``gpu`` need, and the interconnect.

    Inference shards with tensor parallelism inside one node (its all-reduces need a GPU
    link's bandwidth) and pipeline parallelism across nodes; NVLink is named only for a GPU
    the catalog gives one (an L4 has none: its node talks over PCIe)."""
    if gpus == 1:
        return "single GPU", "none"
    tp = tp or min(gpus, GPUS_PER_NODE)
    kind = ("FSDP / ZeRO-3 data parallel (weights, gradients and optimizer state sharded)"
            if training else "tensor parallel (weights and KV cache split)" if gpus == tp
            else f"tensor parallel {tp} x pipeline parallel {gpus // tp} (weights and KV cache"
                 " split; tensor parallel within a node)")
    link = gpu.nvlink_gbs_total or 0
    inside = "NVLink within a node" if nvlink_group(gpu) > 1 else \
        f"PCIe within a node ({gpu.host_link_gbs_per_direction or 0:g} GB/s per direction)"
    if gpus > GPUS_PER_NODE:
        wire = (f"{gpus // GPUS_PER_NODE} nodes of {GPUS_PER_NODE}: {inside}"
                " and InfiniBand/RoCE (400 Gb/s per GPU) between nodes")
    elif gpus <= nvlink_group(gpu):
        wire = f"NVLink/Infinity Fabric within one node ({link:g} GB/s per GPU)"
    else:
        wire = (f"one node, but {gpus} x {gpu.name} are not all on one NVLink domain: the"
                f" traffic crosses PCIe ({gpu.host_link_gbs_per_direction or 0:g} GB/s per"
                " direction) and will dominate the step")
    return f"{kind} over {gpus} GPUs", wire


def place(shape: ModelShape | None, setup: Setup, catalog: Catalog,
          headroom_fraction: float = 0.10, params: int | None = None) -> tuple[Placement, ...]:
    """Per GPU, the smallest count that holds ``setup`` with headroom (or, when the setup
    already names ``gpus`` > 1, whether that count fits)."""
    # Imported here: sizing a measured trace needs only the parallelism words of this
    # module, not the memory estimator (five modules, ~4 ms of every `rightsize analyze`).
    from rightsize.analyzers.sizing.estimator import estimate, with_gpus

    training = setup.mode is not Mode.INFERENCE
    counts = (setup.gpus,) if setup.gpus > 1 else GPU_COUNTS
    tps = {n: tp_degree(shape, n) if not training and shape is not None else None
           for n in counts}
    counts = tuple(n for n in counts if training or shape is None or tps[n] is not None)
    cache = {n: estimate(shape, with_gpus(setup, n), params).total_bytes for n in counts}
    out = []
    for gpu in catalog.gpus:
        for n in counts:
            need = cache[n]
            if need * (1 + headroom_fraction) <= gpu.memory_bytes:
                break
        fits = need * (1 + headroom_fraction) <= gpu.memory_bytes
        words, wire = parallelism_for(training, n, gpu, tps.get(n))
        out.append(Placement(gpu.name, n, fits, need, gpu.memory_bytes, words, wire))
    return tuple(out)


def tp_degree(shape: ModelShape, gpus: int) -> int | None:
    """The tensor-parallel degree for ``gpus`` (the rest pipeline parallel): the largest that
    divides ``gpus``, fits one node and splits the attention evenly (``None``: none does)."""
    for tp in range(min(gpus, GPUS_PER_NODE), 0, -1):
        if gpus % tp == 0 and tensor_parallel_ok(shape, tp):
            return tp if tp > 1 or gpus == 1 else None
    return None


def tensor_parallel_ok(shape: ModelShape, tp: int) -> bool:
    """Can ``tp`` GPUs split the attention: the query heads evenly, and the KV heads evenly or
    each replicated to a whole number of GPUs (vLLM's rule)? A 28-head model has no TP 8."""
    kv = shape.kv_heads
    return shape.num_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def suggestions(setup: Setup) -> tuple[str, ...]:
    """What shrinks a setup that fits nowhere, cheapest change first, each with its effect."""
    out: list[str] = []
    if setup.mode in (Mode.TRAIN, Mode.FINETUNE):
        out.append("--mode lora: a frozen base and small adapters drop gradients and"
                   " optimizer state (about 16 -> 2 bytes per parameter)")
        out.append("--mode lora --precision int4 (QLoRA): about 0.5 bytes per parameter")
        if setup.recompute is not Recompute.FULL:
            out.append("--recompute full: keep only each layer's input for backward")
    elif setup.precision not in (Precision.INT4, Precision.INT8):
        out.append("--precision int8 or int4: half or a quarter of the 16-bit weights")
    if setup.mode is Mode.INFERENCE:
        out.append("a smaller --batch or --seq: the KV cache grows with both")
    else:
        out.append("a smaller --batch with gradient accumulation: activations scale with it")
    out.append(f"more than {GPU_COUNTS[-1]} GPUs, or larger GPUs (--catalog)")
    return tuple(out)
