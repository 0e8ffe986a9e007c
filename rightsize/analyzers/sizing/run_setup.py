"""How a model runs, for the memory estimate: mode, optimizer, recomputation, and fixed figures.

Inputs: none (definitions). Outputs: the :class:`Setup` of one run, its enums,
:data:`ASSUMPTIONS` and vLLM's prefill chunk (:data:`PREFILL_CHUNK`), each figure with its reason
or source. Shared by :mod:`.estimator` and
:mod:`.memory_parts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rightsize.errors import RightsizeError
from rightsize.vocab import Precision


class EstimateError(RightsizeError):
    """The requested setup is contradictory (e.g. training int4 weights without LoRA)."""


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
class PrefillChunk:
    """vLLM's default tokens per forward pass under chunked prefill (``max_num_batched_tokens``).

    Source: vLLM v0.11, ``EngineArgs._set_default_args`` in vllm/engine/arg_utils.py
    (vllm-project/vllm @99d7eb5, whose deprecations name v0.12 as the next release): chunked
    prefill is on by default for generative models, and ``vllm serve`` (the OpenAI API server
    usage context) schedules 8192 tokens per step on a GPU with at least 70 GiB that is not an
    A100 (H100, H200, MI300X...), 2048 on the others (A100 slows down with larger budgets, vLLM
    PR #17885). The offline ``LLM`` class uses twice as many (16384 / 8192).
    """

    large_gpu_tokens: int = 8192
    other_gpu_tokens: int = 2048
    large_gpu_min_gib: float = 70.0

    def for_gpu(self, name: str, memory_gib: float) -> int:
        large = memory_gib >= self.large_gpu_min_gib and "a100" not in name.lower()
        return self.large_gpu_tokens if large else self.other_gpu_tokens

    @property
    def words(self) -> str:
        return (f"vLLM v0.11's default for `vllm serve`: {self.large_gpu_tokens} tokens on a GPU"
                f" with {self.large_gpu_min_gib:g} GiB or more other than an A100,"
                f" {self.other_gpu_tokens} on the others")


PREFILL_CHUNK = PrefillChunk()


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
    gpus: int = 1  # all GPUs: tensor parallel x data parallel (ZeRO), or x pipeline (inference)
    lora_rank: int = ASSUMPTIONS.lora_rank
    device: str = "cuda"  # "cpu": no CUDA context, no allocator fragmentation
    # Gradients live through the forward pass: gradient accumulation over micro-batches, DDP
    # gradient buckets, or zero_grad(set_to_none=False). Otherwise backward frees activations
    # as it creates gradients and the peak holds only the larger of the two.
    accumulate_gradients: bool = False
    # GPUs that split each layer (Megatron-style tensor parallelism), out of ``gpus``. None:
    # inference takes the largest degree that splits the heads within a node (the rest pipeline
    # parallel); training 1 (data parallel only).
    tensor_parallel: int | None = None
    # Megatron sequence parallelism: the norms and dropouts that tensor parallelism replicates
    # are split along the sequence over the same GPUs.
    sequence_parallel: bool = False
    # Inference: prompt tokens one forward pass takes (chunked prefill, shared by the batch).
    # None: vLLM's default (PREFILL_CHUNK); 0: the whole prompt at once (Hugging Face generate).
    prefill_chunk: int | None = None

