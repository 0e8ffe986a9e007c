"""Fit the serving rate curves (rightsize/analyzers/serving/curves.py) on AIConfigurator's
measured tables and write rightsize/catalog/data/serving_rates.json.

    PYTHONPATH=. python benchmarks/fit_serving_rates.py [--check]

Per GPU: GEMM (bf16, fp8 where measured), prefill attention and decode attention, each by least
squared log error over every measured row (the bf16 KV, full-attention rows for attention).
Prints each fit's median and p90 |error| on its own rows. ``--check`` only prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_common import attention_rows, catalog, gemm_rows, systems, tables

from rightsize.analyzers.serving.curves import (
    COMPUTE,
    COMPUTE_FP8,
    STREAM,
    compute_us,
    context_flops_bytes,
    generation_bytes,
    stream_us,
)
from rightsize.analyzers.serving.fit import least_squares
from rightsize.analyzers.serving.ops import Attention

OUT = Path(__file__).resolve().parents[1] / "rightsize" / "catalog" / "data" / "serving_rates.json"
COMPUTE_START = np.log([5.0, 0.7, 5.0, 1.0, 0.8])
COMPUTE_LO = np.log([0.5, 0.05, 0.01, 0.3, 0.05])
COMPUTE_HI = np.log([200.0, 1.2, 2000.0, 4.0, 1.2])
STREAM_START = np.log([5.0, 0.8, 5.0, 1.0, 0.1])
STREAM_LO = np.log([0.5, 0.05, 0.01, 0.3, 1e-5])
STREAM_HI = np.log([200.0, 1.2, 2000.0, 4.0, 10.0])
ROW = (np.log(0.005), np.log(1e-6), np.log(1.0))


def _fit(model, measured: np.ndarray, names: tuple[str, ...], start, lo, hi) -> dict[str, float]:
    log_meas = np.log(measured)

    def res(x: np.ndarray) -> np.ndarray:
        return np.log(model(dict(zip(names, np.exp(x), strict=True)))) - log_meas

    x = least_squares(res, start, lower=lo, upper=hi, iterations=200)
    return {k: round(float(v), 6) for k, v in zip(names, np.exp(x), strict=True)}


def _err(model, params, measured) -> tuple[float, float]:
    e = np.abs(model(params) / measured - 1) * 100
    return float(np.median(e)), float(np.percentile(e, 90))


def fit_gpu(system: str, gpu) -> tuple[dict, dict]:
    t = tables(system)
    bw = gpu.memory_bandwidth_gbs * 1e3
    out, errs = {}, {}
    for dtype, key, prec, wb in (("bfloat16", "gemm_bf16", "bf16", 2.0),
                                 ("fp8", "gemm_fp8", "fp8", 1.0)):
        if dtype not in t.gemm or gpu.tflops(prec)[1] != prec:
            continue
        m, n, k, us = gemm_rows(t, dtype)
        flops, bytes_ = 2.0 * m * n * k, n * k * wb + m * (n + k) * 2.0
        peak = gpu.tflops(prec)[0] * 1e6

        def model(p, flops=flops, bytes_=bytes_, peak=peak, m=m):
            return compute_us(p, flops, bytes_, peak, bw, m)
        names, start, lo, hi = COMPUTE, COMPUTE_START, COMPUTE_LO, COMPUTE_HI
        if prec == "fp8":
            names = COMPUTE_FP8
            start, lo, hi = (np.append(v, r) for v, r in zip((start, lo, hi), ROW, strict=True))
        out[key] = _fit(model, us, names, start, lo, hi)
        errs[key] = _err(model, out[key], us)
    peak = gpu.tflops("bf16")[0] * 1e6
    b, s, h, kv, hd, us = attention_rows(t, decode=False)
    a = Attention(1, 1, 1, 1)
    flops, bytes_ = context_flops_bytes(b, s, np.zeros_like(s), a, 2.0)
    flops, bytes_ = flops * h * hd, bytes_ * 0 + b * s * (h + kv) * 2 * hd * 2.0

    def cmodel(p, flops=flops, bytes_=bytes_):
        return compute_us(p, flops, bytes_, peak, bw)
    out["context"] = _fit(cmodel, us, COMPUTE, COMPUTE_START, COMPUTE_LO, COMPUTE_HI)
    errs["context"] = _err(cmodel, out["context"], us)
    b, step, h, kv, hd, us = attention_rows(t, decode=True)
    kvb = generation_bytes(b, step + 1, a, 2.0) * kv * hd

    def gmodel(p, kvb=kvb, b=b):
        return stream_us(p, kvb, bw, b)
    out["generation"] = _fit(gmodel, us, STREAM, STREAM_START, STREAM_LO, STREAM_HI)
    errs["generation"] = _err(gmodel, out["generation"], us)
    out["tables"] = f"{system} ({t.versions})"
    return out, errs


def main() -> None:
    cat = catalog()
    doc = {"procedure": "benchmarks/fit_serving_rates.py: per GPU, least squared log error of "
                        "the curves.py forms over every measured row of AIConfigurator 0.12.0's "
                        "vLLM tables (GEMM per dtype; attention: bf16 KV, full attention)",
           "source": "shared/serving/aiconfigurator (aiconfigurator-core 0.12.0, Apache-2.0): a"
                     " fit, not the tables",
           "gpus": {}}
    for system, name in systems().items():
        params, errs = fit_gpu(system, cat.gpu(name))
        doc["gpus"][name] = params
        print(name, {k: f"median {v[0]:.1f}% p90 {v[1]:.1f}%" for k, v in errs.items()})
    if "--check" not in sys.argv:
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
        print("wrote", OUT)


if __name__ == "__main__":
    main()
