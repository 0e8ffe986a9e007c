"""The step model's speed and what its token grid costs (docs/serving.md, "Speed").

    PYTHONPATH=. RIGHTSIZE_SHARED=../shared python benchmarks/serving_speed.py

24 deployments (Llama-3.1-8B, Mixtral-8x7B, Llama-3.1-70B x H100 SXM, A100 80GB SXM, L40S, H200
SXM x TP 1/2, where the heads split) built with their first step (the tables read once); then
100,000 random steps of one deployment in one call, and 64 steps per call; and the grid's error:
``step_ms_vec`` (token-dependent parts interpolated on the 577-point grid) against the parts
computed at every token count (``forward.token_parts`` / ``row_parts``), over 2,000 decode and
prefill steps per model on the H100.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rightsize.analyzers.serving.forward import context_us, decode_us, row_parts, token_parts
from rightsize.analyzers.serving.step import Deployment, layout_problem, step_model
from rightsize.analyzers.sizing.hf_config import from_hf_config
from tests.serving.test_serving_ops import LLAMA, MIXTRAL

LLAMA70 = {**LLAMA, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
           "num_attention_heads": 64}


def direct_ms(m, p: np.ndarray, d: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """The step without the grid: every part at its own token count."""
    ops, timer = m.ops, m.timer
    tok = p + d
    rows = (p > 0) + d
    comp, mem, other, comm = token_parts(ops, timer, m.deployment.pp, np.maximum(tok, 1)) * (
        tok > 0)
    rc, rm, ro = row_parts(ops, timer, np.maximum(rows, 1)) * (rows > 0)
    att = context_us(ops, timer, (p > 0).astype(float), p, np.zeros_like(p))
    dec = decode_us(ops, timer, d, kv)
    f = m.factors
    kernels = (f.compute * (comp + rc + att) + f.memory * (mem + rm + ro + other + dec)
               + f.comm * comm) / 1e3
    return kernels + np.where(p > 0, f.prefill_overhead_ms, f.decode_overhead_ms)


def main() -> None:
    configs = {"Llama-3.1-8B": LLAMA, "Mixtral-8x7B": MIXTRAL, "Llama-3.1-70B": LLAMA70}
    t0 = time.perf_counter()
    built = 0
    z = np.zeros(1)
    for cfg in configs.values():
        shape = from_hf_config(cfg)
        for gpu in ("H100 SXM", "A100 80GB SXM", "L40S", "H200 SXM"):
            for tp in (1, 2):
                dep = Deployment(gpu, tp)
                if layout_problem(shape, dep) is None:
                    step_model(shape, dep).step_ms_vec(z, z, z + 8, z + 8000)
                    built += 1
    print(f"{built} deployments built with a first step in {time.perf_counter() - t0:.2f} s")
    rng = np.random.default_rng(0)
    m = step_model(from_hf_config(LLAMA), Deployment("H100 SXM"))
    n = 100_000
    p = np.where(rng.random(n) < 0.3, rng.integers(1, 4096, n), 0).astype(float)
    d = rng.integers(0, 512, n).astype(float)
    kv = d * rng.integers(100, 4000, n)
    t0 = time.perf_counter()
    m.step_ms_vec(p, np.zeros(n), d, kv)
    print(f"{n:,} steps in one call: {time.perf_counter() - t0:.3f} s")
    t0 = time.perf_counter()
    for i in range(0, 6400, 64):
        m.step_ms_vec(p[i:i + 64], np.zeros(64), d[i:i + 64], kv[i:i + 64])
    print(f"64 steps a call: {(time.perf_counter() - t0) / 100 * 1e3:.2f} ms a call")
    for name, cfg in configs.items():
        tp = 2 if name == "Llama-3.1-70B" else 1
        m = step_model(from_hf_config(cfg), Deployment("H100 SXM", tp))
        k = 2000
        p = np.where(rng.random(k) < 0.5, rng.integers(1, 16384, k), 0).astype(float)
        d = rng.integers(1, 1024, k).astype(float)
        kv = d * rng.integers(100, 4000, k)
        grid = m.step_ms_vec(p, np.zeros(k), d, kv)
        err = np.abs(grid / direct_ms(m, p, d, kv) - 1)
        print(f"{name} TP {tp}: grid vs direct, median {100 * np.median(err):.3f}%, "
              f"max {100 * err.max():.2f}% ({k:,} steps)")


if __name__ == "__main__":
    main()
