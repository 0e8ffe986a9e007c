"""CPU seconds of the analysis stage of ``rightsize analyze``: everything after the readers.

    python benchmarks/analysis_cost.py TRACE [--runs N] [--profile]

Reads TRACE once (not timed), then runs the stage ``rightsize analyze F --format json -o OUT``
runs after reading: the analyzers, the document, its JSON and HTML renderings. Prints the CPU
seconds (user + sys of this process, all threads) and wall seconds of each run: the first run
is what the command pays (first-use costs such as regex compilation and lazy imports
included; module imports are not: the pipeline imports them before reading), later runs the
steady state. ``--profile`` prints the analyzers' top cumulative costs of one more run.
Compare two checkouts by running each alternately on the same machine.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import time
from pathlib import Path


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    # imported before timing: ``rightsize.pipeline.run`` imports them before reading too
    from rightsize.analyzers.analysis import Context, analyze
    from rightsize.analyzers.document.build import document
    from rightsize.analyzers.sizing.projection import Constraints
    from rightsize.catalog import load_catalog
    from rightsize.reports.render import render
    from rightsize.traces.loader import ReadOptions, load

    inputs = load([args.trace], None, ReadOptions())

    def stage() -> None:
        context = Context(catalog=load_catalog(), constraints=Constraints())
        doc = document(analyze(list(inputs.traces), context), list(inputs.described), "rightsize")
        render(doc, "json")
        render(doc, "html")

    for i in range(args.runs):
        c0, w0 = _cpu(), time.perf_counter()
        stage()
        print(f"run {i + 1}: analysis stage {_cpu() - c0:.3f} CPU-s, "
              f"{time.perf_counter() - w0:.3f} s wall", flush=True)
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(stage)
        pstats.Stats(prof).sort_stats("cumulative").print_stats("rightsize/", 40)


if __name__ == "__main__":
    main()
