"""The plan search's speed and what its fast path costs in accuracy.

1. ``--time``: ``serving plan``'s search (``planner.plan``) for Llama-3-8B at 20 req/s, 512/128
   tokens, TTFT p95 <= 500 ms and TPOT p95 <= 50 ms over every priced non-consumer catalog GPU
   and 64 GPUs: configurations screened, simulated, wall and CPU seconds, repeated.
2. ``--fastpath``: the fast path's p95s against the full simulation on random configurations
   (GPU, TP, batch limits, a per-replica rate between 10% and 90% of the fast path's
   capacity): median and 90th percentile relative error, and the bias.
3. ``--brute``: the plan's recommendation against every configuration of a small space
   simulated (the exact cheapest under the simulation): same cost or not.
4. ``--tables``: whole simulations on the tabulated step model against the model itself.

    RIGHTSIZE_SHARED=../shared python benchmarks/serving_plan.py --time --fastpath --brute
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from rightsize.analyzers.serving.fastpath import Curves, evaluate
from rightsize.analyzers.serving.latency import summarize
from rightsize.analyzers.serving.load import poisson
from rightsize.analyzers.serving.plan import Load, Slo
from rightsize.analyzers.serving.planner import plan
from rightsize.analyzers.serving.search import SKIP, Space
from rightsize.analyzers.serving.simulate import Limits, Vectorized, simulate
from rightsize.analyzers.serving.step import Deployment, step_model
from rightsize.analyzers.serving.tabulated import Tabulated
from rightsize.analyzers.sizing.hf_config import from_hf_config
from rightsize.catalog import load_catalog
from rightsize.cli.estimate import read_hf_config

REPO = Path(__file__).resolve().parents[1]
CONFIG = from_hf_config(read_hf_config(REPO / "samples" / "configs" / "Meta-Llama-3-8B.json"),
                        "Meta-Llama-3-8B")


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def time_search(repeat: int) -> None:
    cat = load_catalog()
    gpus = tuple(g.name for g in cat.gpus if not g.consumer and cat.price(g.name))
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        p = plan(CONFIG, "Meta-Llama-3-8B", Load.poisson(20, 512, 128, 800), Slo(500, 50),
                 Space(gpus, 64), cat)
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        r = p.recommended
        assert r is not None
        print(f"search: {p.evaluated:,} configurations screened, {p.simulated} simulated, "
              f"{len(gpus)} GPUs; wall {wall:.2f} s, CPU {cpu:.2f} s (load {load_avg()}); "
              f"recommended {r.label} ${r.cost_per_hour_usd:.2f}/h")


def fastpath(samples: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cat = load_catalog()
    cases = [("H100 SXM", 1), ("A100 80GB SXM", 1), ("L40S", 1), ("L4", 2), ("H100 SXM", 2)]
    loads = [(512, 128), (2000, 300), (200, 600), (1000, 50)]
    err_t, err_p = [], []
    for i in range(samples):
        gpu, tp = cases[i % len(cases)]
        isl, osl = loads[int(rng.integers(len(loads)))]
        mns = int(rng.choice([16, 64, 256, 1024]))
        mnbt = max(mns, int(rng.choice([512, 2048, 8192])))
        model = step_model(CONFIG, Deployment(gpu, tp), catalog=cat)
        curves = Curves.of(model.step_ms_vec, 1024, isl, osl, isl)
        rates = np.geomspace(0.05, 200, 400)
        est = evaluate(curves, rates, mns, mnbt, model.kv_cache_tokens, isl, osl, isl)
        top = rates[est.stable].max()
        lam = float(top * rng.uniform(0.1, 0.9))
        one = evaluate(curves, np.array([lam]), mns, mnbt, model.kv_cache_tokens, isl, osl, isl)
        reqs = poisson(lam, isl, osl, 800, seed=i)
        table = Tabulated(model.step_ms_vec, mns, max(mnbt, isl), isl + osl, prompts=(isl,))
        s = summarize((simulate(reqs, Limits(mns, mnbt, model.kv_cache_tokens), table),), SKIP)
        et = float(one.ttft_p95_ms[0]) / s.ttft_ms.p95 - 1
        ep = float(one.tpot_p95_ms[0]) / s.tpot_ms.p95 - 1
        err_t.append(et)
        err_p.append(ep)
        print(f"  {gpu} TP{tp} {isl}/{osl} mns {mns} mnbt {mnbt} {lam:.2f} req/s: TTFT p95 "
              f"fast {one.ttft_p95_ms[0]:.1f} sim {s.ttft_ms.p95:.1f} ({et:+.0%}); TPOT p95 "
              f"fast {one.tpot_p95_ms[0]:.2f} sim {s.tpot_ms.p95:.2f} ({ep:+.0%})")
    for name, e in (("TTFT p95", err_t), ("TPOT p95", err_p)):
        a = np.abs(e)
        print(f"fast path vs simulation, {name}: median |error| {np.median(a):.1%}, p90 "
              f"{np.percentile(a, 90):.1%}, max {a.max():.1%}, median signed "
              f"{statistics.median(e):+.1%} ({len(e)} configurations)")


def brute(seed: int) -> None:
    cat = load_catalog()
    gpus = ("L4", "A100 80GB SXM", "H100 SXM")
    space = Space(gpus, 8, tps=(1, 2), pps=(1,), max_num_seqs=(64, 256),
                  max_batched_tokens=(2048,))
    for rate, isl, osl, slo in ((6, 512, 128, Slo(400, 40)), (12, 1000, 200, Slo(1000, 30)),
                                (3, 2000, 300, Slo(2500, 60))):
        load = Load.poisson(rate, isl, osl, 600, seed)
        p = plan(CONFIG, "m", load, slo, space, cat)
        best = None
        n = 0
        for gpu in gpus:
            for tp in (1, 2):
                model = step_model(CONFIG, Deployment(gpu, tp), catalog=cat)
                price = cat.price(gpu)
                assert price is not None
                table = Tabulated(model.step_ms_vec, 256, 2048, isl + osl, prompts=(isl,))
                for mns in (64, 256):
                    for reps in range(1, 8 // tp + 1):
                        n += 1
                        reqs = load.per_replica(reps)
                        s = summarize(tuple(simulate(r, Limits(mns, 2048,
                                                               model.kv_cache_tokens), table)
                                            for r in reqs), SKIP)
                        if s.ttft_ms.p95 <= slo.ttft_p95_ms and s.tpot_ms.p95 <= slo.tpot_p95_ms:
                            cost = reps * tp * price.usd_per_gpu_hour
                            if best is None or cost < best[0]:
                                best = (cost, f"{reps} x {gpu} TP {tp} mns {mns}")
                            break
        r = p.recommended
        assert r is not None and best is not None
        same = abs(r.cost_per_hour_usd - best[0]) < 1e-9
        print(f"{rate} req/s {isl}/{osl} SLO {slo.ttft_p95_ms:g}/{slo.tpot_p95_ms:g}: plan "
              f"{r.label} ${r.cost_per_hour_usd:.2f} ({p.simulated} simulated), exhaustive "
              f"{best[1]} ${best[0]:.2f} ({n} simulated): {'same cost' if same else 'DIFFERS'}")


def tables(seeds: int = 5, n: int = 1000) -> None:
    """Whole simulations on the table and on the model, over several seeds, beside the
    statistic's own sensitivity: the model with every step 0.1% slower. A p95 of a queue near
    capacity moves by percents when every step moves by 0.1% (events reorder), so one seed
    says little; the per-step error of the table is its own figure (``Tabulated.check``)."""
    def ttft_tpot(reqs: object, lim: Limits, steps: object) -> tuple[float, float]:
        s = summarize((simulate(reqs, lim, steps),), SKIP)  # type: ignore[arg-type]
        return s.ttft_ms.p95, s.tpot_ms.p95

    for gpu, lam, isl, osl in (("L40S", 4, 1000, 200), ("H100 SXM", 20, 512, 128)):
        model = step_model(CONFIG, Deployment(gpu))
        lim = Limits(256, 2048, model.kv_cache_tokens)
        tab = Tabulated(model.step_ms_vec, 256, 2048, isl + osl, prompts=(isl,))
        slower = Vectorized(lambda *a, m=model: m.step_ms_vec(*a) * 1.001)
        d_ttft, d_tpot, noise = [], [], []
        for seed in range(seeds):
            reqs = poisson(lam, isl, osl, n, seed=seed)
            a = ttft_tpot(reqs, lim, tab)
            b = ttft_tpot(reqs, lim, Vectorized(model.step_ms_vec))
            c = ttft_tpot(reqs, lim, slower)
            d_ttft.append(a[0] / b[0] - 1)
            d_tpot.append(a[1] / b[1] - 1)
            noise.append(c[0] / b[0] - 1)
        med, top = tab.check(2000)
        print(f"{gpu} {lam} req/s {isl}/{osl}, {n} requests x {seeds} seeds: table vs model "
              f"TTFT p95 median {statistics.median(d_ttft):+.1%} (seeds {min(d_ttft):+.1%} to "
              f"{max(d_ttft):+.1%}), TPOT p95 median {statistics.median(d_tpot):+.1%}; the "
              f"model with every step +0.1%: TTFT p95 {min(noise):+.1%} to {max(noise):+.1%}; "
              f"one step, table vs model over 2,000 random steps: median {med:.2%}, max "
              f"{top:.2%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fastpath", action="store_true")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--brute", action="store_true")
    ap.add_argument("--tables", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.time:
        time_search(a.repeat)
    if a.fastpath:
        fastpath(a.samples, a.seed)
    if a.brute:
        brute(a.seed)
    if a.tables:
        tables()


if __name__ == "__main__":
    main()
