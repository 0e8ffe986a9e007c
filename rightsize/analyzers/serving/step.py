"""The served step-time model: how long one prefill, one decode step or one mixed
(continuous-batching) step of a model takes on a deployment, with its range.

This module is the contract between the step model and what plans on it (the
continuous-batching simulation, ``serving plan``; /work/wt/SERVING_API.md): :class:`Timed`,
:class:`Deployment`, the :class:`StepModel` protocol, :func:`step_model` and :func:`fits`.

Inputs: a model config (a :class:`~rightsize.analyzers.sizing.model_shape.ModelShape`, what
``rightsize estimate`` reads from a Hugging Face config), a deployment (catalog GPU, tensor and
pipeline degrees, weight precision), optionally a :class:`~.factors.Calibration` fitted on the
user's measurements and per-operator :class:`~.tables.Tables`. Output: a :class:`ServingStep`
whose times are the sum over layers of its operators (``forward.py``) timed by the measured
tables of that GPU, else by the per-kernel projection (``timer.py``), scaled by the calibration's
factors, plus a fixed per-step overhead; each carries a low-high range (``factors.py``). Pure
but for reading the tables once per process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from rightsize.analyzers.serving.factors import (
    ENGINE_SEQ_OVERHEAD_MS,
    UNCALIBRATED,
    Calibration,
    Factors,
    Spread,
)
from rightsize.analyzers.serving.forward import Parts, StepCurves, context_us, step_parts
from rightsize.analyzers.serving.ops import PRECISIONS, Ops, build_ops
from rightsize.analyzers.serving.timer import CommTimer, ProjectionTimer, Timer
from rightsize.analyzers.sizing.model_shape import ModelShape
from rightsize.analyzers.sizing.parallelism import tensor_parallel_ok
from rightsize.catalog import Catalog, Gpu, load_catalog
from rightsize.errors import RightsizeError

if TYPE_CHECKING:
    from rightsize.analyzers.serving.tables import Tables

ModelConfig = ModelShape  # what `rightsize estimate` reads from a Hugging Face config
GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default --gpu-memory-utilization
KV_CACHE_DTYPES = ("", "fp8", "bf16")
GIB = 1 << 30

__all__ = ["Deployment", "ModelConfig", "ServingError", "ServingStep", "StepModel", "Timed",
           "build_step", "fits", "layout_problem", "memory_bytes", "step_model", "timer_for"]


class ServingError(RightsizeError):
    """A deployment or serving input that cannot be modelled as given."""


@dataclass(frozen=True, slots=True)
class Timed:
    """One predicted time with its range (from calibration residuals), ms."""

    ms: float
    low_ms: float
    high_ms: float


@dataclass(frozen=True, slots=True)
class Deployment:
    """One replica's shape."""

    gpu: str  # catalog key, e.g. "H100 SXM"
    tp: int = 1
    pp: int = 1
    precision: str = "bf16"  # bf16 | fp8 | int8 | int4 (weights)
    # the KV cache's dtype: "fp8" or "bf16"; "" follows the weights (fp8 under fp8 weights, as
    # vllm serve --kv-cache-dtype fp8 stores it; else 16-bit, vLLM's "auto")
    kv_cache: str = ""
    # the serving engine: "vllm" (V1, vLLM's default engine from 0.8) or "vllm-v0" (vLLM <= 0.6,
    # whose CPU work per scheduled sequence adds to every step: factors.ENGINE_SEQ_OVERHEAD_MS)
    engine: str = "vllm"


class StepModel(Protocol):
    deployment: Deployment
    calibrated_by: str
    assumes: tuple[str, ...]
    memory_per_gpu_bytes: int
    kv_cache_tokens: int

    def prefill(self, prompt_tokens: Sequence[int]) -> Timed: ...

    def decode(self, kv_lens: Sequence[int]) -> Timed: ...

    def step(self, chunks: Sequence[tuple[int, int]], kv_lens: Sequence[int]) -> Timed: ...

    def step_ms_vec(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                    decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray: ...


def _timed(ms: float, spread: Spread) -> Timed:
    return Timed(ms, ms * (1 + spread.low), ms * (1 + spread.high))


class ServingStep:
    """The step model of one deployment (implements :class:`StepModel`)."""

    def __init__(self, deployment: Deployment, ops: Ops, timer: Timer, factors: Factors,
                 calibration: Calibration, calibrated_by: str, assumes: tuple[str, ...],
                 memory_per_gpu_bytes: int, kv_cache_tokens: int) -> None:
        self.deployment = deployment
        self.ops = ops
        self.timer = timer
        self.factors = factors
        self.calibration = calibration
        self.calibrated_by = calibrated_by
        self.assumes = assumes
        self.memory_per_gpu_bytes = memory_per_gpu_bytes
        self.kv_cache_tokens = kv_cache_tokens
        self._curves: StepCurves | None = None

    def parts(self, prefill_tokens: np.ndarray, prefill_seqs: np.ndarray,
              prefill_attention_us: np.ndarray, decode_seqs: np.ndarray,
              decode_kv_sum: np.ndarray) -> Parts:
        """µs per step by operator class, before calibration."""
        if self._curves is None:
            self._curves = StepCurves(self.ops, self.timer, self.deployment.pp)
        return step_parts(self._curves, self.ops, self.timer, prefill_tokens, prefill_seqs,
                          prefill_attention_us, decode_seqs, decode_kv_sum)

    def _ms(self, parts: Parts, prefill: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """The step (ms): the calibrated kernels and fixed overhead, plus the engine's CPU work
        for each of the step's ``seqs`` scheduled sequences (prefill and decode)."""
        per_seq = ENGINE_SEQ_OVERHEAD_MS[self.deployment.engine]
        return self.factors.step_ms(parts, prefill) + per_seq * seqs

    def _one(self, chunks: Sequence[tuple[int, int]], kv_lens: Sequence[int]) -> Timed:
        new = np.array([c[0] for c in chunks], dtype=float)
        cached = np.array([c[1] for c in chunks], dtype=float)
        if (new < 0).any() or (cached < 0).any() or any(k < 0 for k in kv_lens):
            raise ServingError("token counts must be 0 or more")
        # equal chunks run as one batch of a varlen attention kernel (the tables' batch axis)
        shapes, counts = np.unique(np.stack([new, cached], axis=1).reshape(-1, 2), axis=0,
                                   return_counts=True)
        att = np.array([context_us(self.ops, self.timer, counts.astype(float), shapes[:, 0],
                                   shapes[:, 1]).sum()])
        tokens = np.array([new.sum()])
        prefills = np.array([float((new > 0).sum())])
        decodes = np.array([float(len(kv_lens))])
        parts = self.parts(tokens, prefills, att, decodes, np.array([float(sum(kv_lens))]))
        ms = float(self._ms(parts, tokens > 0, prefills + decodes)[0])
        kind = "prefill" if tokens[0] > 0 else "decode"
        return _timed(ms, self.calibration.spread[kind])

    def prefill(self, prompt_tokens: Sequence[int]) -> Timed:
        """One prefill of these prompts together (static batching's TTFT)."""
        return self._one([(int(t), 0) for t in prompt_tokens], [])

    def decode(self, kv_lens: Sequence[int]) -> Timed:
        """One decode step: one new token for each sequence, over its KV length."""
        return self._one([], kv_lens)

    def step(self, chunks: Sequence[tuple[int, int]], kv_lens: Sequence[int]) -> Timed:
        """One continuous-batching step: prefill chunks (new tokens, tokens already cached)
        with decode sequences by KV length."""
        return self._one(chunks, kv_lens)

    def step_ms_vec(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                    decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray:
        """Point estimates (ms) of many steps at once; the prefill of each step is taken as one
        chunk of ``prefill_tokens`` over ``prefill_ctx`` cached tokens."""
        t = np.asarray(prefill_tokens, dtype=float)
        c = np.asarray(prefill_ctx, dtype=float)
        d = np.asarray(decode_seqs, dtype=float)
        k = np.asarray(decode_kv_sum, dtype=float)
        seqs = (t > 0).astype(float)
        att = context_us(self.ops, self.timer, seqs, t, c)
        return self._ms(self.parts(t, seqs, att, d, k), t > 0, seqs + d)


def _gpu(deployment: Deployment, catalog: Catalog | None) -> Gpu:
    return (catalog or load_catalog()).gpu(deployment.gpu)


def _check(config: ModelConfig, deployment: Deployment) -> None:
    if deployment.precision not in PRECISIONS:
        raise ServingError(f"precision {deployment.precision!r} is not one of"
                           f" {', '.join(PRECISIONS)}")
    if deployment.kv_cache not in KV_CACHE_DTYPES:
        raise ServingError(f"KV cache dtype {deployment.kv_cache!r} is not one of fp8, bf16")
    if deployment.engine not in ENGINE_SEQ_OVERHEAD_MS:
        raise ServingError(f"engine {deployment.engine!r} is not one of"
                           f" {', '.join(ENGINE_SEQ_OVERHEAD_MS)}")
    for label, v in (("tensor parallel", deployment.tp), ("pipeline parallel", deployment.pp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ServingError(f"{label} must be a whole number of at least 1, not {v!r}")
    if not config.lm_head:
        raise ServingError(f"{config.name or 'this model'} has no LM head (an encoder): it"
                           " does not generate, so it has no prefill/decode steps")


def memory_bytes(config: ModelConfig, deployment: Deployment, gpu: Gpu) -> tuple[int, float]:
    """(weights + activations + overhead per GPU, KV bytes per token per GPU), as vLLM
    budgets them: the activations of one forward pass at its default token budget."""
    from rightsize.analyzers.sizing.estimator import Mode, Setup, estimate
    from rightsize.analyzers.sizing.run_setup import PREFILL_CHUNK
    from rightsize.vocab import Precision

    chunk = PREFILL_CHUNK.for_gpu(gpu.name, gpu.memory_gib)
    n = deployment.tp * deployment.pp
    setup = Setup(mode=Mode.INFERENCE, precision=Precision(deployment.precision), batch=1,
                  seq=chunk, gpus=n, tensor_parallel=deployment.tp, prefill_chunk=chunk)
    est = estimate(config, setup)
    ops = build_ops(config, deployment.tp, deployment.precision, deployment.kv_cache)
    m = est.memory
    return (m.weights_bytes + m.activations_bytes + m.overhead_bytes,
            ops.kv_bytes_per_token / deployment.pp)


def layout_problem(config: ModelConfig, deployment: Deployment) -> str | None:
    """Why the tensor/pipeline layout cannot split ``config`` at all (None: it can)."""
    _check(config, deployment)
    tp, pp = deployment.tp, deployment.pp
    if not tensor_parallel_ok(config, tp):
        return (f"tensor parallel {tp} does not split {config.num_heads} query heads and"
                f" {config.kv_heads} KV heads evenly")
    if pp > config.num_layers:
        return f"pipeline parallel {pp} exceeds the model's {config.num_layers} layers"
    return None


def fits(config: ModelConfig, deployment: Deployment, *, catalog: Catalog | None = None,
         batch: int = 0, seq: int = 0) -> str | None:
    """None when ``deployment`` can serve ``config`` (and ``batch`` sequences of ``seq``
    tokens, when given), else why not, in one line."""
    why = layout_problem(config, deployment)
    if why is not None:
        return why
    gpu = _gpu(deployment, catalog)
    fixed, per_token = memory_bytes(config, deployment, gpu)
    budget = GPU_MEMORY_UTILIZATION * gpu.memory_bytes
    if fixed >= budget:
        return (f"weights and activations need {fixed / GIB:,.1f} GiB per GPU, more than"
                f" {GPU_MEMORY_UTILIZATION:.0%} of the {gpu.name}'s {gpu.memory_gib:g} GiB")
    need = batch * seq * per_token
    if need > budget - fixed:
        return (f"the KV cache of {batch} sequences of {seq:,} tokens needs {need / GIB:,.1f}"
                f" GiB per GPU; {(budget - fixed) / GIB:,.1f} GiB is left after the weights")
    return None


def _assumes(config: ModelConfig, deployment: Deployment, timer: Timer) -> tuple[str, ...]:
    out = [timer.source]
    p = deployment.precision
    if p in ("int8", "int4"):
        out.append(f"{p} weights: weight-only kernels (Marlin/Machete) assumed, 16-bit math,"
                   f" {'1 byte' if p == 'int8' else 'half a byte'} per weight read")
    kv = deployment.kv_cache or ("fp8" if p == "fp8" else "")
    if p == "fp8":
        out.append(f"fp8 weights and fp8 GEMMs, a{'n fp8' if kv == 'fp8' else ' 16-bit'} KV cache")
    elif kv == "fp8":
        out.append("an fp8 KV cache")
    if config.num_experts:
        out.append(f"MoE: each token to {config.experts_per_token} of {config.num_experts}"
                   " experts, uniformly; experts split by tensor parallelism (vLLM's default)")
    if config.mla:
        out.append("multi-head latent attention timed as attention over decompressed heads")
    if deployment.pp > 1:
        out.append(f"pipeline parallel {deployment.pp}: a step's latency is every stage in"
                   " turn (no micro-batch overlap)")
    per_seq = ENGINE_SEQ_OVERHEAD_MS[deployment.engine]
    if per_seq:
        out.append(f"{deployment.engine}: {per_seq:g} ms of engine CPU work per scheduled"
                   " sequence a step (vLLM issue #6801's figure)")
    return tuple(out)


def timer_for(gpu: Gpu, tables: Tables | None = None) -> Timer:
    """Where ``gpu``'s operator times come from: its measured tables, else the rate curves
    fitted on them (shipped), else the curves of the measured GPUs on its datasheet, else the
    per-kernel projection."""
    if tables is None:
        from rightsize.analyzers.serving.tables import default_tables
        tables = default_tables()
    from rightsize.analyzers.serving.curves import curve_timer

    return tables.timer_for(gpu) or curve_timer(gpu) or ProjectionTimer(gpu)


def build_step(config: ModelConfig, deployment: Deployment, gpu: Gpu, timer: Timer,
               calibration: Calibration | None = None) -> ServingStep:
    """The step model of ``config`` on ``deployment`` with ``timer`` (layout checked)."""
    why = layout_problem(config, deployment)
    if why is not None:
        raise ServingError(f"{deployment.gpu} TP {deployment.tp}: {why}")
    calibration = calibration or UNCALIBRATED
    if calibration.comm_model is not None:
        timer = CommTimer(timer, calibration.comm_model)
    factors, own = calibration.for_gpu(gpu.name)
    by = calibration.described
    if by and not own:
        by += f" (no point on {gpu.name}: the pooled factors)"
    ops = build_ops(config, deployment.tp, deployment.precision, deployment.kv_cache)
    fixed, per_token = memory_bytes(config, deployment, gpu)
    free = GPU_MEMORY_UTILIZATION * gpu.memory_bytes - fixed
    return ServingStep(deployment, ops, timer, factors, calibration, by,
                       _assumes(config, deployment, timer) + calibration.notes, int(fixed),
                       int(max(0.0, free) // per_token))


def step_model(config: ModelConfig, deployment: Deployment, *,
               calibration: Calibration | None = None, catalog: Catalog | None = None,
               tables: Tables | None = None) -> ServingStep:
    """The step model of ``config`` served on ``deployment``.

    ``tables``: measured per-operator tables (None: the default ones, see
    :func:`~.tables.default_tables`); a GPU without a table gets the fitted rate curves, else
    the per-kernel projection (:func:`timer_for`). Raises :class:`ServingError` for a layout
    that cannot split the model; one whose memory does not fit still gets times
    (``kv_cache_tokens`` 0; :func:`fits` says why)."""
    layout = layout_problem(config, deployment)
    if layout is not None:
        raise ServingError(f"{deployment.gpu} TP {deployment.tp}: {layout}")
    gpu = _gpu(deployment, catalog)
    return build_step(config, deployment, gpu, timer_for(gpu, tables), calibration)
