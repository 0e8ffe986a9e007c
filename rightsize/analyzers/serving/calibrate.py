"""Calibration: the few interpretable factors that bring the step model to a user's own
measured steps, and the range their residuals give every prediction.

Inputs: :class:`Observation` rows (a measured prefill or decode step: its deployment, what it
held, its time; a ``--measured`` CSV row gives one of each, a trace or Prometheus metrics give
their own), the measured model's config, tables and catalog. Output: a
:class:`~.factors.Calibration` with one :class:`~.factors.Factors` per GPU that has points and a
pooled one (``any``) fitted on all of them for GPUs that have none.

The fit: the model's time of each observation split by class (compute, memory, comm: see
:class:`~.forward.Parts`) is scaled by the factors plus the prefill or decode overhead, and the
factors minimise the squared log error over the observations plus a prior that keeps each
factor near 1 and each overhead near its default (a few points cannot move what they do not
measure: one batch-1 decode says little about compute). Never a per-point lookup. Ranges:
leave-one-out residuals (refit without each point, predict it) when a GPU has at least
:data:`LOO_MIN` observations of a kind, else the default spread of the validation. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rightsize.analyzers.serving.factors import (
    ANY_GPU,
    DEFAULT_OVERHEAD_MS,
    DEFAULT_SPREAD,
    ENGINE_SEQ_OVERHEAD_MS,
    Calibration,
    Factors,
    Spread,
)
from rightsize.analyzers.serving.fit import least_squares
from rightsize.analyzers.serving.forward import Parts, context_us
from rightsize.analyzers.serving.step import (
    Deployment,
    ModelConfig,
    ServingError,
    ServingStep,
    build_step,
    timer_for,
)
from rightsize.analyzers.serving.tables import Tables
from rightsize.catalog import Catalog, load_catalog

# Prior: a factor's log within ±PRIOR_LOG of 0 costs as much as a residual of ±NOISE_LOG; the
# overheads within ±PRIOR_OVERHEAD_MS of their defaults.
NOISE_LOG = 0.03  # run-to-run spread of a measured serving step (3%)
PRIOR_LOG = 0.5  # a stack 40% slower or faster than the tables is plausible
PRIOR_OVERHEAD_MS = {"prefill": 5.0, "decode": 1.0}
LOO_MIN = 4  # observations of one kind on one GPU before their residuals set its range


@dataclass(frozen=True, slots=True)
class Observation:
    """One measured step: ``prefill_seqs`` prompts of ``prefill_tokens`` each, or
    ``decode_seqs`` sequences at mean KV length ``kv_mean``, took ``ms``."""

    deployment: Deployment
    ms: float
    prefill_seqs: int = 0
    prefill_tokens: int = 0
    decode_seqs: int = 0
    kv_mean: float = 0.0
    source: str = ""
    # a decode step that also prefilled this many prompt tokens (continuous batching)
    mixed_prefill_tokens: float = 0.0

    @property
    def kind(self) -> str:
        return "prefill" if self.prefill_seqs else "decode"


PartsOf = Callable[[Observation], Parts]


def _predict(x: np.ndarray, parts: Sequence[Parts], prefill: np.ndarray) -> np.ndarray:
    f = Factors(float(np.exp(x[0])), float(np.exp(x[1])), float(np.exp(x[2])),
                DEFAULT_OVERHEAD_MS["prefill"] + x[3], DEFAULT_OVERHEAD_MS["decode"] + x[4])
    return np.array([f.step_ms(p, np.array([pf]))[0] for p, pf in zip(parts, prefill,
                                                                         strict=True)])


def _fit(parts: Sequence[Parts], obs: Sequence[Observation]) -> Factors:
    ms = np.array([o.ms for o in obs])
    prefill = np.array([o.kind == "prefill" for o in obs])
    has_comm = any(float(p.comm[0]) > 0 for p in parts)

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = _predict(x, parts, prefill)
        data = (np.log(np.maximum(pred, 1e-6)) - np.log(ms)) / NOISE_LOG
        prior = np.array([x[0] / PRIOR_LOG, x[1] / PRIOR_LOG,
                          x[2] / (PRIOR_LOG if has_comm else 1e-3),
                          x[3] / PRIOR_OVERHEAD_MS["prefill"],
                          x[4] / PRIOR_OVERHEAD_MS["decode"]])
        return np.concatenate([data, prior])

    lo = np.array([-3.0, -3.0, -3.0, -DEFAULT_OVERHEAD_MS["prefill"],
                   -DEFAULT_OVERHEAD_MS["decode"]])
    hi = np.array([3.0, 3.0, 3.0, 1e4, 1e4])
    x = least_squares(residuals, np.zeros(5), lower=lo, upper=hi)
    return Factors(float(np.exp(x[0])), float(np.exp(x[1])), float(np.exp(x[2])),
                   float(DEFAULT_OVERHEAD_MS["prefill"] + x[3]),
                   float(DEFAULT_OVERHEAD_MS["decode"] + x[4]))


def _spread(parts: Sequence[Parts], obs: Sequence[Observation], kind: str) -> Spread:
    """Leave-one-out: refit without each observation of ``kind`` and compare its prediction
    with it; p10-p90 of measured / predicted - 1 (never narrower than the noise)."""
    idx = [i for i, o in enumerate(obs) if o.kind == kind]
    if len(idx) < LOO_MIN:
        return DEFAULT_SPREAD_CALIBRATED[kind]
    errs = []
    for i in idx:
        rest = [j for j in range(len(obs)) if j != i]
        f = _fit([parts[j] for j in rest], [obs[j] for j in rest])
        pred = float(f.step_ms(parts[i], np.array([kind == "prefill"]))[0])
        errs.append(obs[i].ms / pred - 1)
    lo, hi = np.percentile(errs, [10, 90])
    return Spread(min(float(lo), -NOISE_LOG), max(float(hi), NOISE_LOG),
                  f"leave-one-out residuals of {len(idx)} {kind} points")


# The range of a calibrated prediction with too few points for leave-one-out: p10 / p90 of
# measured / predicted - 1 after the one-point-per-GPU calibration of the validation
# (benchmarks/serving_accuracy.py, docs/serving.md).
DEFAULT_SPREAD_CALIBRATED = {
    "prefill": Spread(-0.09, 0.52, "default: one-point calibration in the validation, p10-p90"),
    "decode": Spread(-0.11, 0.32, "default: one-point calibration in the validation, p10-p90"),
}


def fit_calibration(observations: Sequence[Observation], parts_of: PartsOf,
                    described: str) -> Calibration:
    """Factors per GPU (and pooled, ``any``) fitted on ``observations``; ``parts_of`` gives
    an observation's modelled time by class, uncalibrated (:func:`observation_parts`)."""
    obs = [o for o in observations if o.ms > 0]
    if not obs:
        raise ServingError("no measured step to calibrate on (every time is 0 or missing)")
    parts = [parts_of(o) for o in obs]
    factors: dict[str, Factors] = {ANY_GPU: _fit(parts, obs)}
    spread: dict[str, Spread] = {}
    for gpu in sorted({o.deployment.gpu for o in obs}):
        mine = [i for i, o in enumerate(obs) if o.deployment.gpu == gpu]
        factors[gpu] = _fit([parts[i] for i in mine], [obs[i] for i in mine])
    for kind in ("prefill", "decode"):
        have = [o for o in obs if o.kind == kind]
        spread[kind] = _spread(parts, obs, kind) if have else DEFAULT_SPREAD[kind]
    notes = tuple(f"calibrated on {g}: {_words(f)}" for g, f in factors.items() if g != ANY_GPU)
    return Calibration(factors, spread, described, notes)


def _words(f: Factors) -> str:
    return (f"{1 / f.compute:.0%} of the tables' compute throughput, {1 / f.memory:.0%} of"
            f" their memory bandwidth, communication x{f.comm:.2f}, overhead"
            f" {f.prefill_overhead_ms:.2f} ms per prefill and {f.decode_overhead_ms:.2f} ms per"
            " decode step")


def observation_parts(model: ServingStep, o: Observation) -> Parts:
    """``o``'s modelled time by class on ``model`` (its deployment's step model)."""
    if o.kind == "prefill":
        seqs, new = np.array([float(o.prefill_seqs)]), np.array([float(o.prefill_tokens)])
        att = context_us(model.ops, model.timer, seqs, new, np.zeros(1))
        return model.parts(seqs * new, seqs, att, np.zeros(1), np.zeros(1))
    d = np.array([float(o.decode_seqs)])
    p = np.array([float(o.mixed_prefill_tokens)])
    seqs = (p > 0).astype(float)
    att = context_us(model.ops, model.timer, seqs, p, np.zeros(1))
    return model.parts(p, seqs, att, d, d * o.kv_mean)


def without_engine(observations: Sequence[Observation], engine: str) -> list[Observation]:
    """``observations`` measured on ``engine`` less its CPU work per scheduled sequence
    (``Deployment.engine``: the step model adds it back, so the factors must not hold it); a
    step shorter than that work alone is an error (measured on another engine)."""
    per_seq = ENGINE_SEQ_OVERHEAD_MS.get(engine)
    if per_seq is None:
        raise ServingError(f"engine {engine!r} is not one of {', '.join(ENGINE_SEQ_OVERHEAD_MS)}")
    out = []
    for o in observations:
        seqs = o.prefill_seqs + o.decode_seqs + (o.mixed_prefill_tokens > 0)
        cpu = per_seq * seqs
        if o.ms > 0 and o.ms <= cpu:
            raise ServingError(f"a measured {o.kind} step of {o.ms:g} ms at {seqs} sequences is"
                               f" not longer than {engine}'s CPU work alone ({cpu:g} ms): was"
                               " it measured on another engine?")
        out.append(replace(o, ms=o.ms - cpu if o.ms > 0 else o.ms))
    return out


def calibrate(observations: Sequence[Observation], config: ModelConfig, *,
              catalog: Catalog | None = None, tables: Tables | None = None,
              described: str = "", engine: str = "vllm") -> Calibration:
    """The calibration of the step model on ``observations`` of ``config`` (the measured
    model, which may differ from the one predicted), measured on ``engine``: per GPU and
    pooled factors, ranges."""
    catalog = catalog or load_catalog()
    observations = without_engine(observations, engine)
    models: dict[Deployment, ServingStep] = {}

    def parts_of(o: Observation) -> Parts:
        dep = o.deployment
        if dep not in models:
            gpu = catalog.gpu(dep.gpu)
            models[dep] = build_step(config, dep, gpu, timer_for(gpu, tables))
        return observation_parts(models[dep], o)

    return fit_calibration(observations, parts_of, described)
