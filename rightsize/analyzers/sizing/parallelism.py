"""Parallel layouts for the memory estimate: tensor-parallel degrees, nodes, prefill chunks.

Inputs: a :class:`~.model_shape.ModelShape` and a :class:`~.run_setup.Setup`. Outputs: the
tensor-parallel degree a setup runs at (given, or the largest that splits the attention heads
within a node), whether a degree splits the heads (vLLM's rule), the prefill chunk of an
inference setup (vLLM's default, :data:`~.run_setup.PREFILL_CHUNK`) and one-line errors for a
layout that cannot run. Shared by :mod:`.estimator` and :mod:`.placement`. Pure.
"""

from __future__ import annotations

from rightsize.analyzers.sizing.hf_fields import MAX_COUNT
from rightsize.analyzers.sizing.model_shape import ModelShape
from rightsize.analyzers.sizing.run_setup import PREFILL_CHUNK, EstimateError, Mode, Setup

# GPUs in one node when the catalog gives no node size (8-GPU HGX/OAM boards and most PCIe
# servers); the catalog's ``gpus_per_node`` overrides it per GPU.
GPUS_PER_NODE = 8


def tensor_parallel_ok(shape: ModelShape, tp: int) -> bool:
    """Can ``tp`` GPUs split the attention: the query heads evenly, and the KV heads evenly or
    each replicated to a whole number of GPUs (vLLM's rule)? A 28-head model has no TP 8."""
    kv = shape.kv_heads
    return shape.num_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def tp_degree(shape: ModelShape, gpus: int, per_node: int = GPUS_PER_NODE) -> int | None:
    """The tensor-parallel degree for ``gpus`` (the rest pipeline parallel): the largest that
    divides ``gpus``, fits one node of ``per_node`` and splits the attention evenly (``None``:
    none does)."""
    for tp in range(min(gpus, per_node), 0, -1):
        if gpus % tp == 0 and tensor_parallel_ok(shape, tp):
            return tp if tp > 1 or gpus == 1 else None
    return None


def validate_parallel(shape: ModelShape | None, setup: Setup) -> None:
    tp = setup.tensor_parallel
    if tp is not None:
        if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= setup.gpus \
                or setup.gpus % tp:
            raise EstimateError(f"tensor parallel {tp!r} must divide --gpus {setup.gpus}"
                                " (the GPUs are tensor x data parallel, or x pipeline for"
                                " inference)")
        if shape is not None and not tensor_parallel_ok(shape, tp):
            raise EstimateError(f"tensor parallel {tp} does not split {shape.num_heads} query"
                                f" heads and {shape.kv_heads} KV heads evenly")
    if setup.sequence_parallel and tensor_parallel(shape, setup) == 1:
        raise EstimateError("sequence parallelism splits what tensor parallelism replicates:"
                            " it needs a tensor-parallel degree of 2 or more (--tp)")
    chunk = setup.prefill_chunk
    if chunk is not None:
        if setup.mode is not Mode.INFERENCE:
            raise EstimateError("--prefill-chunk applies to inference (--mode inference)")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or not 0 <= chunk <= MAX_COUNT:
            raise EstimateError(f"the prefill chunk must be a whole number of tokens from 0"
                                f" (the whole prompt at once) to {MAX_COUNT:,}, not {chunk!r}")


def tensor_parallel(shape: ModelShape | None, setup: Setup) -> int:
    """The tensor-parallel degree ``setup`` runs at: as given, else for inference over several
    GPUs the largest that splits the heads within a node (1, all pipeline parallel, when none
    does; without layer shapes every GPU), else 1."""
    if setup.tensor_parallel is not None:
        return setup.tensor_parallel
    if setup.mode is not Mode.INFERENCE or setup.gpus == 1:
        return 1
    if shape is None:
        return setup.gpus
    return tp_degree(shape, setup.gpus) or 1


def prefill_chunk(setup: Setup) -> int:
    """Prompt tokens per forward pass: as given, else vLLM's default on a large GPU (the
    larger of its two: placements use each GPU's own)."""
    return PREFILL_CHUNK.large_gpu_tokens if setup.prefill_chunk is None else setup.prefill_chunk
