"""How a model runs, for the memory estimate: mode, optimizer, recomputation, and fixed figures.

Inputs: none (definitions). Outputs: the :class:`Setup` of one run, its enums, and
:data:`ASSUMPTIONS`, each figure with its reason. Shared by :mod:`.estimator` and
:mod:`.memory_parts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rightsize.vocab import Precision


class Mode(StrEnum):
    TRAIN = "train"  # pre-training: every parameter trained
    FINETUNE = "finetune"  # full fine-tuning: the same memory as train
    LORA = "lora"  # frozen base (any precision, int4 = QLoRA) + trainable low-rank adapters
    INFERENCE = "inference"


class Optimizer(StrEnum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD = "sgd"  # with momentum
    ADAM8BIT = "adam8bit"  # bitsandbytes 8-bit Adam


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"  # recompute the attention core only (Korthikanti et al. 2022 sec. 4)
    FULL = "full"  # keep only each layer's input; recompute the layer in backward


BYTES_PER_ELEMENT: dict[Precision, float] = {
    Precision.FP32: 4, Precision.TF32: 4, Precision.BF16: 2, Precision.FP16: 2,
    Precision.FP8: 1, Precision.INT8: 1, Precision.INT4: 0.5,
}

# Optimizer state bytes per trainable parameter: (fp32 training, mixed precision). Mixed
# precision adds the fp32 master copy (4 bytes), hence Adam 4+4+4 = 12: with 2-byte weights and
# grads that is the 16 bytes/parameter of Rajbhandari et al. 2020 (ZeRO, sec. 3.1).
OPTIMIZER_STATE_BYTES: dict[Optimizer, tuple[float, float]] = {
    Optimizer.ADAM: (8, 12),  # exp_avg + exp_avg_sq in fp32 (+ master)
    Optimizer.ADAMW: (8, 12),  # same states as Adam
    Optimizer.SGD: (4, 8),  # momentum buffer (+ master)
    Optimizer.ADAM8BIT: (2, 6),  # Dettmers et al. 2022: two 8-bit states (+ master)
}


@dataclass(frozen=True, slots=True)
class Assumptions:
    """Fixed figures the estimate relies on; each says why."""

    # torch 2.x CUDA context with lazy module loading plus cuBLAS/cuDNN workspaces is typically
    # 0.5-1 GiB as nvidia-smi shows before the first tensor; we take the upper end.
    cuda_context_bytes: int = 1 << 30
    # The caching allocator rounds blocks (512 B / 2 MiB segments) and fragments; 5% on top of
    # the tensors is a common rule (PyTorch "Understanding CUDA memory usage" notes reserved >
    # allocated).
    allocator_fragmentation_fraction: float = 0.05
    # HF PEFT defaults: LoRA rank 16 on the four attention projections (q, k, v, o).
    lora_rank: int = 16
    # Inference holds one layer's working set at a time; logits only for the last position.
    inference_layers_live: int = 1


ASSUMPTIONS = Assumptions()


@dataclass(frozen=True, slots=True)
class Setup:
    """How the model runs. ``batch`` is the micro-batch per GPU; ``seq`` is the sequence length
    (for inference: prompt plus generated tokens, which sizes the KV cache)."""

    mode: Mode = Mode.TRAIN
    precision: Precision = Precision.BF16
    batch: int = 1
    seq: int = 2048
    optimizer: Optimizer = Optimizer.ADAMW
    recompute: Recompute = Recompute.NONE
    flash_attention: bool = True  # SDPA picks Flash/memory-efficient kernels on recent GPUs
    zero_stage: int = 0  # 0 = plain data parallel; 3 = FSDP full shard
    gpus: int = 1  # data-parallel (ZeRO) or, for inference, tensor-parallel degree
    lora_rank: int = ASSUMPTIONS.lora_rank
    device: str = "cuda"  # "cpu": no CUDA context, no allocator fragmentation
    # Gradients live through the forward pass: gradient accumulation over micro-batches, DDP
    # gradient buckets, or zero_grad(set_to_none=False). Otherwise backward frees activations
    # as it creates gradients and the peak holds only the larger of the two.
    accumulate_gradients: bool = False

