"""How much one simulated run's median TPOT moves with its random draws alone.

``serving_online.py`` simulates each measured run once (seed 1: Poisson arrivals and
log-normal lengths). Near capacity a run's median TPOT depends on the arrivals it happened to
get, in the simulation as in the measurement; this reruns each MLPerf run and each dstack
setting's 16 req/s run, uncalibrated, with seeds 1-6 and prints the spread of the six medians:
the noise floor under any comparison of one measured run with one simulated run.

    RIGHTSIZE_SHARED=../shared python benchmarks/serving_online_seeds.py [--markdown]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_online import V0, Case, Runner, dstack_cases, mlperf_cases, requests

from rightsize.analyzers.serving.latency import summarize
from rightsize.analyzers.serving.simulate import Limits, simulate

SEEDS = range(1, 7)


def medians(runner: Runner, c: Case) -> list[float]:
    t, kv = runner.table(c)
    lim = Limits(c.limits[0], c.limits[1], kv, c.limits[2])
    return [summarize((simulate(requests(c, s), lim, t),), c.skip).tpot_ms.p50 for s in SEEDS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    runner = Runner()
    cases = [c for c in dstack_cases(V0) if not c.note and c.rate == 16] + mlperf_cases(v0=V0)
    sep = " | " if args.markdown else "  "
    head = ["run", "TPOT p50 meas", "sim, seeds 1-6 (ms)", "min-max", "half-range / mid"]
    print(("| " + sep.join(head) + " |") if args.markdown else sep.join(head))
    if args.markdown:
        print("|" + "---|" * len(head))
    for c in cases:
        m = medians(runner, c)
        lo, hi = min(m), max(m)
        cells = [c.name, f"{c.tpot_p50:.1f}", ", ".join(f"{x:.1f}" for x in m),
                 f"{lo:.1f}-{hi:.1f}", f"{100 * (hi - lo) / (hi + lo):.1f}%"]
        print(("| " + sep.join(cells) + " |") if args.markdown else sep.join(cells), flush=True)


if __name__ == "__main__":
    main()
