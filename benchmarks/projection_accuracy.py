"""How well rightsize's per-kernel projection predicts a workload's time on another GPU.

    python benchmarks/projection_accuracy.py [--json] [--cv] DIR...
    python benchmarks/projection_accuracy.py [--json] --pair TRACE_A TRACE_B

``DIR`` is laid out like ``shared/timings`` (``neusight/label/<GPU>/<model>-*.csv|json``,
``vidur/<gpu>/<model>-mlp.csv``). For every model configuration and every (source, target) pair
of catalog GPUs that both measured it, the source's per-op times are projected onto the target
with the product's own code (``rightsize.analyzers.sizing.rates.project_kernel_s``; host-side
ops stay as measured) and compared with the target's measured end-to-end time (NeuSight
``e2e_latency``; Vidur: the sum of one layer's ops at one token count, 1..4096 in powers of 2).

``--cv`` adds leave-one-model-out and leave-one-GPU-out errors: the rates are refitted
(``fit_rates.fit``) without that model's (GPU's) data and only its pairs are scored. ``--pair``
projects trace A's step onto trace B's GPU through the sizing code and compares with B's step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_rates import PROCEDURE, fit, gather
from timings import HOST, Workload, fit_catalog, model_of, read_all

from rightsize.analyzers.sizing.rates import (
    Rates,
    RatesTable,
    load_rates,
    parse_rates,
    project_kernel_s,
)
from rightsize.catalog import Catalog


def _rates(table: RatesTable, catalog: Catalog, gpu: str, dataset: str) -> Rates:
    r = table.for_gpu(catalog.gpu(gpu))
    floor = r.dataset_floor_us.get(dataset)
    return replace(r, floor_us=floor) if floor else r


def project(w: Workload, target: str, table: RatesTable, catalog: Catalog) -> float:
    """Projected end-to-end ms of ``w`` on ``target``: the measured end-to-end time scaled by
    projected / measured sum of its ops (host-side ops held as measured), so per-op timing
    overhead that the end-to-end run does not pay cancels out."""
    dataset = w.key.split("/")[0]
    src = (catalog.gpu(w.gpu), _rates(table, catalog, w.gpu, dataset))
    dst = (catalog.gpu(target), _rates(table, catalog, target, dataset))
    measured = projected = 0.0
    for op in w.ops:
        if op.measured_ms <= 0:
            continue
        t = op.measured_ms
        if op.kind != HOST:
            t = project_kernel_s(op.measured_ms * 1e-3, src, dst, op.precision, op.flops,
                                 op.bytes, op.kind) * 1e3
        measured += op.count * op.measured_ms
        projected += op.count * t
    return w.e2e_ms * projected / measured if measured else w.e2e_ms


def pairs(workloads: list[Workload], table: RatesTable, catalog: Catalog,
          only: Any = None) -> list[dict[str, Any]]:
    by_key: dict[str, list[Workload]] = {}
    for w in workloads:
        by_key.setdefault(w.key, []).append(w)
    out = []
    for key, ws in sorted(by_key.items()):
        for s in ws:
            for t in ws:
                if s.gpu == t.gpu or (only is not None and not only(key, s.gpu, t.gpu)):
                    continue
                got = project(s, t.gpu, table, catalog)
                out.append({"workload": key, "source": s.gpu, "target": t.gpu,
                            "source_ms": round(s.e2e_ms, 4), "measured_ms": round(t.e2e_ms, 4),
                            "projected_ms": round(got, 4),
                            "error_pct": round(100.0 * (got - t.e2e_ms) / t.e2e_ms, 2)})
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [abs(r["error_pct"]) for r in rows]
    return {"pairs_count": len(rows),
            "mean_abs_error_pct": round(statistics.fmean(errs), 2) if errs else None,
            "median_abs_error_pct": round(statistics.median(errs), 2) if errs else None,
            "p90_abs_error_pct": round(sorted(errs)[int(0.9 * (len(errs) - 1))], 2)
            if errs else None,
            "max_abs_error_pct": round(max(errs), 2) if errs else None}


def cross_validate(roots: list[Path], traces: Path | None, catalog: Catalog,
                   workloads: list[Workload]) -> dict[str, Any]:
    samples = gather(roots, traces, catalog)
    base = load_rates()
    lomo: list[dict[str, Any]] = []
    for model in sorted({model_of(w.key) for w in workloads}):
        table = parse_rates({**fit(samples, catalog, exclude_models=(model,)),
                             "error_pct": base.error_pct, "procedure": PROCEDURE})
        lomo += pairs(workloads, table, catalog, lambda k, s, t, m=model: model_of(k) == m)
    logo: list[dict[str, Any]] = []
    for gpu in sorted({w.gpu for w in workloads}):
        table = parse_rates({**fit(samples, catalog, exclude_gpus=(gpu,)),
                             "error_pct": base.error_pct, "procedure": PROCEDURE})
        logo += pairs(workloads, table, catalog, lambda k, s, t, g=gpu: g in (s, t))
    return {"leave_one_model_out": summary(lomo), "leave_one_gpu_out": summary(logo)}


def pair_traces(a: Path, b: Path, catalog: Catalog) -> list[dict[str, Any]]:
    """Trace A's step projected onto B's GPU by the sizing code, and the reverse."""
    from timings import trace_workload

    from rightsize.analyzers.sizing.projection import project_step_ms

    out = []
    for src, dst in ((a, b), (b, a)):
        (wl, gpu_s), (wl_t, gpu_t) = trace_workload(src, catalog), trace_workload(dst, catalog)
        got = project_step_ms(wl, gpu_s, gpu_t)
        if got is None:
            continue
        out.append({"workload": src.name, "source": gpu_s.name, "target": gpu_t.name,
                    "source_ms": round(wl.step_ms, 4), "measured_ms": round(wl_t.step_ms, 4),
                    "projected_ms": round(got, 4),
                    "error_pct": round(100.0 * (got - wl_t.step_ms) / wl_t.step_ms, 2)})
    return out


def _table(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [(f"{'workload':<44} {'source':<15} {'target':<15} {'measured':>10}"
             f" {'projected':>10} {'error':>8}")]
    for r in rows:
        lines.append(f"{r['workload'][:44]:<44} {r['source'][:15]:<15} {r['target'][:15]:<15}"
                     f" {r['measured_ms']:>10.3f} {r['projected_ms']:>10.3f}"
                     f" {r['error_pct']:>+7.1f}%")
    lines.append(json.dumps(head))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--json", action="store_true", help="print the JSON document")
    ap.add_argument("--pair", nargs=2, type=Path, metavar=("A", "B"),
                    help="two traces of one workload on two GPUs")
    ap.add_argument("--cv", action="store_true",
                    help="also leave-one-model-out and leave-one-GPU-out (refits the rates)")
    ap.add_argument("--traces", type=Path, help="trace-pair folder, for --cv refits")
    args = ap.parse_args(argv)
    catalog = fit_catalog()
    if args.pair:
        rows = pair_traces(args.pair[0], args.pair[1], catalog)
    elif args.dirs:
        workloads = read_all(args.dirs, catalog)
        rows = pairs(workloads, load_rates(), catalog)
    else:
        ap.error("give timing folders or --pair A B")
    doc: dict[str, Any] = {"pairs": rows, **summary(rows)}
    if args.cv and args.dirs:
        doc.update(cross_validate(args.dirs, args.traces, catalog, workloads))
    head = {k: v for k, v in doc.items() if k != "pairs"}
    print(json.dumps(doc, indent=1) if args.json else _table(rows, head))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
