"""CPU cost of the report's added analyses on a large trace: ops by self time per call path
(``metrics/self_ops.py``) and the per-step split of the shares (``metrics/per_step.py``),
against the analysis of the same trace.

A shared Kineto trace is read once and its frames repeated ``--copies`` times in memory (each
copy shifted past the previous one, ids kept apart), so no large file is needed. CPU seconds
(user+sys of this process) are reported, alternating the contenders, so other load on the
machine inflates them less than wall time.

    python benchmarks/report_views.py /work/shared --copies 40
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
from pathlib import Path

import polars as pl

TRACE = "traces/kineto/hta-trace_diff-control-control.json.gz"
ID_COLS = ("correlation", "external_id", "id")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def repeated(trace, copies: int):  # type: ignore[no-untyped-def]
    """The trace with its timed frames repeated ``copies`` times, one after the other."""
    frames = {}
    span = 0
    for f in dataclasses.fields(trace):
        df = getattr(trace, f.name)
        if isinstance(df, pl.DataFrame) and "ts_ns" in df.columns and df.height:
            span = max(span, int((df["ts_ns"] + df.get_column("dur_ns")
                                  if "dur_ns" in df.columns else df["ts_ns"]).max())
                       - int(df["ts_ns"].min()))
    for f in dataclasses.fields(trace):
        df = getattr(trace, f.name)
        if not isinstance(df, pl.DataFrame) or "ts_ns" not in df.columns or not df.height:
            continue
        parts = []
        for k in range(copies):
            shift = [pl.col("ts_ns") + k * (span + 1_000)]
            shift += [pl.col(c) + k * 10**9 for c in ID_COLS if c in df.columns]
            parts.append(df.with_columns(shift))
        frames[f.name] = pl.concat(parts)
    return dataclasses.replace(trace, **frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shared", type=Path)
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.analyzers.diagnosis.verdict import diagnose
    from rightsize.analyzers.metrics.per_step import per_step
    from rightsize.analyzers.metrics.self_ops import self_ops
    from rightsize.analyzers.metrics.steps import find_steps
    from rightsize.traces.kineto import read_kineto

    trace = repeated(read_kineto(args.shared / TRACE), args.copies)
    steps = find_steps(trace)
    print(f"{trace.cpu_ops.height:,} host ranges, {trace.kernels.height:,} kernels, "
          f"{steps.count} steps")
    times: dict[str, list[float]] = {"analyze_trace": [], "self_ops": [], "per_step": []}
    diag, _ = diagnose(trace, steps, 0)
    assert diag is not None and diag.per_step is not None
    for _ in range(args.repeat):
        t = _cpu()
        analyze_trace(trace, Context())
        times["analyze_trace"].append(_cpu() - t)
        t = _cpu()
        self_ops(trace)
        times["self_ops"].append(_cpu() - t)
        t = _cpu()
        # the split alone: the intervals the verdict already has, cut at the steps
        from rightsize.analyzers.metrics import intervals as iv
        parts = {"all": iv.union(iv.of(trace.kernels["ts_ns"].to_numpy(),
                                       (trace.kernels["ts_ns"] + trace.kernels["dur_ns"])
                                       .to_numpy()))}
        per_step(parts, steps)
        times["per_step"].append(_cpu() - t)
    for name, v in times.items():
        print(f"{name:14s} median {statistics.median(v):.3f} CPU s  (runs: "
              + ", ".join(f"{x:.3f}" for x in v) + ")")
    share = statistics.median(times["self_ops"]) / statistics.median(times["analyze_trace"])
    print(f"self_ops is {100 * share:.1f}% of analyze_trace (which includes it)")


if __name__ == "__main__":
    main()
