"""Static-batching predictions: TTFT and TPOT of a batch of equal requests on a deployment.

Inputs: a model config, :class:`Point` rows (GPU, TP, PP, batch, prompt and output tokens),
the weight precision and optionally a calibration and tables. Output: one
:class:`Prediction` per point, in order (the ``serving predict`` JSON rows,
docs/json-contract.md). ``ttft_ms`` is one prefill of the whole batch's prompts; ``tpot_ms``
one decode step of the batch at the mean KV length of the generation (``isl + osl / 2``: decode
time is linear in the KV length, so this is the mean step of ``osl`` of them), as a static
serving benchmark (vLLM ``benchmark_latency``) measures them. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rightsize.analyzers.serving.factors import Calibration
from rightsize.analyzers.serving.step import (
    Deployment,
    ModelConfig,
    ServingError,
    ServingStep,
    fits,
    layout_problem,
    memory_bytes,
    step_model,
)
from rightsize.analyzers.serving.tables import Tables
from rightsize.catalog import Catalog, load_catalog


@dataclass(frozen=True, slots=True)
class Point:
    """One static-batching configuration."""

    gpu: str
    tp: int
    pp: int
    batch: int
    isl: int  # prompt tokens per request
    osl: int  # output tokens per request


@dataclass(frozen=True, slots=True)
class Prediction:
    point: Point
    ttft_ms: float
    ttft_ms_low: float
    ttft_ms_high: float
    tpot_ms: float
    tpot_ms_low: float
    tpot_ms_high: float
    memory_per_gpu_bytes: int
    fits: bool
    calibrated_by: str
    assumes: tuple[str, ...]
    engine: str = "vllm"  # Deployment.engine

    def to_json(self) -> dict[str, Any]:
        p = self.point
        return {"gpu": p.gpu, "tp": p.tp, "pp": p.pp, "batch": p.batch, "isl": p.isl,
                "osl": p.osl, "ttft_ms": _r(self.ttft_ms), "ttft_ms_low": _r(self.ttft_ms_low),
                "ttft_ms_high": _r(self.ttft_ms_high), "tpot_ms": _r(self.tpot_ms),
                "tpot_ms_low": _r(self.tpot_ms_low), "tpot_ms_high": _r(self.tpot_ms_high),
                "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "fits": self.fits,
                "engine": self.engine, "calibrated_by": self.calibrated_by,
                "assumes": list(self.assumes)}


def _r(x: float) -> float:
    return round(x, 3)


def mean_kv(isl: int, osl: int) -> int:
    """The KV length of the mean decode step of a generation of ``osl`` tokens."""
    return isl + osl // 2


def _validate(p: Point) -> None:
    for label, v, low in (("tp", p.tp, 1), ("pp", p.pp, 1), ("batch", p.batch, 1),
                          ("isl", p.isl, 1), ("osl", p.osl, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= 1 << 40:
            raise ServingError(f"{label} must be a whole number of at least {low}, not {v!r}")


def predict_points(config: ModelConfig, points: Sequence[Point], precision: str = "bf16", *,
                   calibration: Calibration | None = None, catalog: Catalog | None = None,
                   tables: Tables | None = None, engine: str = "vllm") -> list[Prediction]:
    """One prediction per point, in order, on the serving ``engine`` (``Deployment.engine``:
    ``vllm-v0`` adds its CPU work per sequence to the batch's prefill and decode step alike). A
    layout that cannot split the model is an error; a point whose memory does not fit gets
    ``fits`` false, its times, and why first in ``assumes``."""
    catalog = catalog or load_catalog()
    models: dict[Deployment, ServingStep] = {}
    out = []
    for p in points:
        _validate(p)
        gpu = catalog.gpu(p.gpu)  # an unknown GPU: one line listing the known ones
        p = replace(p, gpu=gpu.name)
        dep = Deployment(gpu.name, p.tp, p.pp, precision, engine=engine)
        bad = layout_problem(config, dep)
        if bad is not None:
            raise ServingError(f"{gpu.name} TP {p.tp} PP {p.pp}: {bad}")
        why = fits(config, dep, catalog=catalog, batch=p.batch, seq=p.isl + p.osl)
        model = models.get(dep)
        if model is None:
            model = models[dep] = step_model(config, dep, calibration=calibration,
                                             catalog=catalog, tables=tables)
        ttft = model.prefill([p.isl] * p.batch)
        tpot = model.decode([mean_kv(p.isl, p.osl)] * p.batch)
        fixed, per_token = memory_bytes(config, dep, gpu)
        mem = int(fixed + p.batch * (p.isl + p.osl) * per_token)
        notes = model.assumes if why is None else (f"does not fit: {why}", *model.assumes)
        out.append(Prediction(p, ttft.ms, ttft.low_ms, ttft.high_ms, tpot.ms, tpot.low_ms,
                              tpot.high_ms, mem, why is None, model.calibrated_by, notes,
                              engine))
    return out
