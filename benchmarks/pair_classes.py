"""The GPU-part error of one H100/MI300X trace pair broken down per kernel class.

    python benchmarks/pair_classes.py ../shared/traces/kineto --timings ../shared/timings \\
        [--pair Qwen_Qwen1.5-0.5B-Chat__1016005] [--json]

For each direction, every kernel item of the source trace (``sizing.kernels_projection``:
one per shape, ``?`` after the class when the kernel has no FLOPs/bytes) is projected onto the
other trace's GPU with the shipped rates (in sample) and with rates refitted without the pair's
two traces (left out, as ``trace_pairs.py``), and summed per class next to the target trace's
own kernel time of that class (ms per step). Kernel sums, not the GPU part: kernels on two
streams overlap, so the sum is larger than ``steps.gpu_ms``, which scales by its ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_rates import gather, trace_samples
from timings import fit_catalog, trace_workload
from trace_pairs import VENDORS, _left_out

from rightsize.analyzers.sizing.rates import RatesTable, load_rates, project_kernel_s


def _label(k: Any) -> str:
    return k.kind + ("" if k.flops is not None else "?")


def _projected(items: Any, src: Any, dst: Any, table: RatesTable) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for k in items:
        if k.count > 0:
            each = k.dur_ns / k.count / 1e9
            out[_label(k)] += 1e3 * k.count * project_kernel_s(
                each, (src, table.for_gpu(src)), (dst, table.for_gpu(dst)), k.precision,
                k.flops, k.bytes, k.kind, k.kernels)
    return out


def _sums(items: Any) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for k in items:
        out[_label(k)] += k.dur_ns / 1e6
    return out


def breakdown(trace_dir: Path, timings: list[Path], pair: str) -> list[dict[str, Any]]:
    """Per direction, per class: source, in-sample projected, left-out projected, target ms."""
    catalog = fit_catalog()
    shipped = load_rates()
    held = _left_out(gather(timings, None, catalog), trace_samples(trace_dir, catalog),
                     catalog, pair, shipped)
    (wa, ga), (wb, gb) = (trace_workload(trace_dir / f"tracelens-{v}-{pair}.json.gz", catalog)
                          for v in VENDORS)
    out = []
    for (w, g), (tw, tg) in (((wa, ga), (wb, gb)), ((wb, gb), (wa, ga))):
        src, target = _sums(w.kernels), _sums(tw.kernels)
        inside, left = (_projected(w.kernels, g, tg, t) for t in (shipped, held))
        for cls in sorted(set(src) | set(target), key=lambda c: -src.get(c, 0.0)):
            out.append({"direction": f"{g.name} -> {tg.name}", "class": cls,
                        "source_ms": round(src.get(cls, 0.0), 3),
                        "projected_ms": round(inside.get(cls, 0.0), 3),
                        "left_out_ms": round(left.get(cls, 0.0), 3),
                        "target_ms": round(target.get(cls, 0.0), 3)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", type=Path, help="folder with the tracelens-{h100,mi300} pairs")
    ap.add_argument("--timings", type=Path, nargs="+", required=True)
    ap.add_argument("--pair", default="Qwen_Qwen1.5-0.5B-Chat__1016005")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = breakdown(args.traces, args.timings, args.pair)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| direction | class | source | projected (in sample) | left out | target measured |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['direction']} | {r['class']} | {r['source_ms']:.3f} | {r['projected_ms']:.3f}"
              f" | {r['left_out_ms']:.3f} | {r['target_ms']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
