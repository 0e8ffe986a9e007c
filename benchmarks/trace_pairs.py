"""The GPU part of the shared H100/MI300X trace pairs, projected both ways by the sizing code.

    python benchmarks/trace_pairs.py ../shared/traces/kineto --timings ../shared/timings \\
        [--json | --markdown]

For each TraceLens pair (the same inference workload traced on an H100 and on an MI300X) and
each direction, the source trace is analyzed as ``rightsize analyze`` does, sized onto the
other trace's GPU (``sizing.projection.project``) and the candidate's ``projected_gpu_ms`` (with
its range) compared with the target trace's measured ``steps.gpu_ms`` (the union of kernel, copy
and memset time per step). Twice: with the shipped rates (fitted on the timings and all three
pairs: in sample) and with rates refitted without that pair's two traces (leave-one-pair-out:
the pair is then a check the rates never saw). Direction symmetry: the speed ratio the A trace
implies (projected B / measured A) and the one the B trace implies (measured B / projected A),
each with the range of its projection; they agree when the two ranges overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_rates import PROCEDURE, Sample, fit, gather, trace_samples
from timings import fit_catalog, trace_workload

from rightsize.analyzers.sizing.projection import project
from rightsize.analyzers.sizing.rates import RatesTable, load_rates, parse_rates
from rightsize.catalog import Catalog

PAIRS = ("Falconsai_nsfw_image_detection__1016002", "Qwen_Qwen1.5-0.5B-Chat__1016005",
         "gaunernst_bert-small-uncased__1016001")
VENDORS = ("h100", "mi300")


def _measured(path: Path, catalog: Catalog) -> tuple[Any, Any, float]:
    """(sizing Workload, catalog GPU, measured GPU part ms per step) of one trace."""
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.traces.loader import ReadOptions, load

    workload, gpu = trace_workload(path, catalog)
    rank = analyze_trace(load([path], None, ReadOptions()).traces[0], Context(catalog=catalog))
    return workload, gpu, float(rank.values["steps"].gpu_ms)


def _projected(workload: Any, target: str, catalog: Catalog,
               table: RatesTable) -> tuple[float, float, float]:
    """(projected GPU part, its low, its high) of ``workload`` on ``target``, ms per step."""
    sizing = project(workload, catalog, gpus=(target,), rates=table)
    c = next(c for c in sizing.candidates if c.gpu == target and c.gpus == 1)
    assert c.projected_gpu_ms is not None and c.projected_gpu_ms_low is not None \
        and c.projected_gpu_ms_high is not None
    return c.projected_gpu_ms, c.projected_gpu_ms_low, c.projected_gpu_ms_high


def _left_out(timed: list[Sample], traced: list[Sample], catalog: Catalog, pair: str,
              base: RatesTable) -> RatesTable:
    """The rates refitted on the timings' samples and the other pairs' traces' samples."""
    doc = fit(timed + [s for s in traced if not pair.startswith(s.model[6:])], catalog)
    return parse_rates({**doc, "procedure": PROCEDURE, "error_pct": base.error_pct,
                        "error_pct_unfitted": base.error_pct_unfitted,
                        "error_pct_cross_vendor": base.error_pct_cross_vendor})


def rows(trace_dir: Path, timings: list[Path], catalog: Catalog) -> list[dict[str, Any]]:
    """Both directions of every pair, with the shipped rates and with the pair's traces left
    out of the rates (three refits on samples read once, about 10 s)."""
    shipped = load_rates()
    timed = gather(timings, None, catalog)
    traced = trace_samples(trace_dir, catalog)
    out = []
    for pair in PAIRS:
        paths = [trace_dir / f"tracelens-{v}-{pair}.json.gz" for v in VENDORS]
        if not all(p.exists() for p in paths):
            continue
        (wa, ga, ma), (wb, gb, mb) = (_measured(p, catalog) for p in paths)
        lopo = _left_out(timed, traced, catalog, pair, shipped)
        for (w, g, m), (tg, tm) in (((wa, ga, ma), (gb, mb)), ((wb, gb, mb), (ga, ma))):
            point, low, high = _projected(w, tg.name, catalog, shipped)
            held, held_low, held_high = _projected(w, tg.name, catalog, lopo)
            out.append({"workload": pair.split("__")[0], "source": g.name, "target": tg.name,
                        "source_gpu_ms": round(m, 4), "measured_gpu_ms": round(tm, 4),
                        "projected_gpu_ms": round(point, 4), "low": round(low, 4),
                        "high": round(high, 4), "error_pct": _err(point, tm),
                        "in_range": low <= tm <= high,
                        "left_out_gpu_ms": round(held, 4), "left_out_low": round(held_low, 4),
                        "left_out_high": round(held_high, 4),
                        "left_out_error_pct": _err(held, tm),
                        "left_out_in_range": held_low <= tm <= held_high})
    return out


def _err(got: float, want: float) -> float:
    return round(100.0 * (got - want) / want, 2)


IN_SAMPLE = ("projected_gpu_ms", "low", "high")
LEFT_OUT = ("left_out_gpu_ms", "left_out_low", "left_out_high")


def symmetry(table: list[dict[str, Any]],
             keys: tuple[str, str, str] = IN_SAMPLE) -> list[dict[str, Any]]:
    """Per pair: the B/A speed ratio each trace implies, with its range, and the measured one."""
    out = []
    for ab, ba in zip(table[::2], table[1::2], strict=True):
        a, b = ab["source_gpu_ms"], ba["source_gpu_ms"]
        from_a = [ab[k] / a for k in keys]  # point, low, high
        point, low, high = (ba[k] for k in keys)
        from_b = [b / point, b / high, b / low]
        out.append({"workload": ab["workload"], "ratio": f"{ab['target']} / {ab['source']}",
                    "measured": round(b / a, 3), "from_a": [round(x, 3) for x in from_a],
                    "from_b": [round(x, 3) for x in from_b],
                    "agree": from_a[1] <= from_b[2] and from_b[1] <= from_a[2]})
    return out


def markdown(table: list[dict[str, Any]]) -> str:
    lines = [("| workload | direction | measured source | measured target | projected (range)"
              " | error | in range | left out: projected (range) | error | in range |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(
            f"| {r['workload']} | {r['source']} -> {r['target']} | {r['source_gpu_ms']:.3f}"
            f" | {r['measured_gpu_ms']:.3f} | {r['projected_gpu_ms']:.3f}"
            f" ({r['low']:.3f}-{r['high']:.3f}) | {r['error_pct']:+.1f}% |"
            f" {'yes' if r['in_range'] else 'no'} | {r['left_out_gpu_ms']:.3f}"
            f" ({r['left_out_low']:.3f}-{r['left_out_high']:.3f}) |"
            f" {r['left_out_error_pct']:+.1f}% | {'yes' if r['left_out_in_range'] else 'no'} |")
    lines += ["", ("| workload | ratio | measured | from the first trace (range) | from the"
                   " second (range) | agree | left out: first | second | agree |"),
              "|---|---|---|---|---|---|---|---|---|"]
    for s, h in zip(symmetry(table), symmetry(table, LEFT_OUT), strict=True):
        def rng(v: list[float]) -> str:
            return f"{v[0]:.2f} ({v[1]:.2f}-{v[2]:.2f})"
        lines.append(f"| {s['workload']} | {s['ratio']} | {s['measured']:.2f} |"
                     f" {rng(s['from_a'])} | {rng(s['from_b'])} |"
                     f" {'yes' if s['agree'] else 'no'} | {rng(h['from_a'])} |"
                     f" {rng(h['from_b'])} | {'yes' if h['agree'] else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", type=Path, help="folder with the tracelens-{h100,mi300} pairs")
    ap.add_argument("--timings", type=Path, nargs="+", required=True,
                    help="folders laid out like shared/timings (for the left-out refits)")
    ap.add_argument("--json", action="store_true", help="print the JSON document")
    ap.add_argument("--markdown", action="store_true", help="print the docs' tables")
    args = ap.parse_args(argv)
    table = rows(args.traces, args.timings, fit_catalog())
    doc = {"pairs": table, "symmetry": symmetry(table),
           "left_out_symmetry": symmetry(table, LEFT_OUT),
           "max_abs_error_pct": max((abs(r["error_pct"]) for r in table), default=None),
           "max_abs_left_out_error_pct": max((abs(r["left_out_error_pct"]) for r in table),
                                             default=None)}
    print(json.dumps(doc, indent=1) if args.json else markdown(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
