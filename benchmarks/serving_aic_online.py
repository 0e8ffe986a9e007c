"""Uncalibrated step time beside AIConfigurator's, on measured serving points neither has seen.

The points are the measured operating points of the online runs in ../shared/serving/measured
(``serving_online.py --operating-points``): from each run's published output tokens/s, prompt
tokens/s and TPOT, ``B`` = output tokens/s x TPOT sequences decode together and ``p`` = prompt
tokens/s x TPOT prompt tokens share each step, whose time is the measured TPOT (dstack: the
mean TPOT of vLLM's benchmark_serving; MLPerf: loadgen's TPOT p50). Our step model there is
``Runner.at_operating_point`` (uncalibrated, the tables of ../shared/serving/aiconfigurator);
AIConfigurator 0.12.0 answers the same step with ``cli estimate --estimate-mode agg
--batch-size B --ctx-tokens p`` (its in-flight-batching step: B sequences, p context tokens a
step), uncalibrated, from its own wheel's tables, with the backend each run used (vLLM for
dstack's, TensorRT-LLM for the MLPerf NVIDIA runs: AIConfigurator's TensorRT-LLM tables are its
best estimate there; ours are vLLM's). Only the runs on a GPU both have tables for (H100 SXM,
H200 SXM) and single-step scheduling (the multi-step rows are not modelled by either).

AIConfigurator is installed in its own venv, never the project's::

    python -m venv /tmp/aic-venv && /tmp/aic-venv/bin/pip install aiconfigurator==0.12.0

Its answers are kept in serving_aic_online.result.json (``--run-aic`` asks it again, about 12 s
a point on a CPU), so the table prints without it; ours are recomputed::

    RIGHTSIZE_SHARED=../shared python benchmarks/serving_aic_online.py [--markdown] [--run-aic]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_online import V0, Case, Runner, dstack_cases, mlperf_cases

AIC = Path("/tmp/aic-venv/bin/aiconfigurator")
RESULT = Path(__file__).with_name("serving_aic_online.result.json")
SYSTEMS = {"H100 SXM": "h100_sxm", "H200 SXM": "h200_sxm"}  # GPUs both tools have tables for


def points() -> list[Case]:
    return [c for c in dstack_cases(V0) + mlperf_cases(v0=V0)
            if not c.note and c.dep.gpu in SYSTEMS]


def key(c: Case, b: int, p: int) -> str:
    return f"{c.name} | B {b} | ctx {p}"


def ask_aic(c: Case, b: int, p: int, model_dir: Path, backend: str) -> float | None:
    """AIConfigurator's agg (in-flight batching) TPOT at B sequences and p context tokens."""
    cmd = [str(AIC), "cli", "estimate", "--model-path", str(model_dir), "--estimate-mode", "agg",
           "--system", SYSTEMS[c.dep.gpu], "--backend", backend,
           "--isl", str(round(c.isl)), "--osl", str(round(c.osl)),
           "--batch-size", str(b), "--ctx-tokens", str(p), "--tp-size", str(c.dep.tp),
           "--gemm-quant-mode", "fp8", "--kvcache-quant-mode",
           "fp8" if c.dep.kv_cache == "fp8" else "bfloat16"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    m = re.search(r"TPOT:\s+([\d.,]+) ms", out.stdout)
    return float(m.group(1).replace(",", "")) if m else None


def engine(c: Case) -> str:
    return "trtllm" if c.engine == "trtllm" else "vllm"


def run_aic(cases: list[tuple[Case, int, int]]) -> dict[str, float | None]:
    got: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for c, b, p in cases:
            model_dir = Path(tmp) / str(c.config["hidden_size"])
            if not model_dir.exists():
                model_dir.mkdir()
                (model_dir / "config.json").write_text(json.dumps(
                    {**c.config, "torch_dtype": "bfloat16"}))
            got[key(c, b, p)] = ask_aic(c, b, p, model_dir, engine(c))
            if c.engine == "trtllm":  # and from the vLLM tables ours use
                got[key(c, b, p) + " | vllm"] = ask_aic(c, b, p, model_dir, "vllm")
            print(f"  {key(c, b, p)}: {got[key(c, b, p)]}", file=sys.stderr)
    return got


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred / meas - 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--run-aic", action="store_true", help="ask AIConfigurator again")
    ap.add_argument("--only-vllm", action="store_true",
                    help="with --run-aic: ask only the TensorRT-LLM runs' points (both backends)")
    args = ap.parse_args()
    runner = Runner()
    rows = []
    for c in points():
        b, p, ms, _ = runner.at_operating_point(c)
        rows.append((c, round(b), round(p), ms))
    if args.run_aic:
        aic = run_aic([(c, b, p) for c, b, p, _ in rows if not args.only_vllm or
                       c.engine == "trtllm"])
        if args.only_vllm:  # keep the earlier answers, add the vLLM-table ones
            aic = {**json.loads(RESULT.read_text())["results"], **aic}
        RESULT.write_text(json.dumps({"aiconfigurator": "0.12.0 (cli estimate --estimate-mode "
                                      "agg, its own tables)", "results": aic}, indent=1) + "\n")
    table(rows, json.loads(RESULT.read_text())["results"], args.markdown)


def table(rows: list[tuple[Case, int, int, float]], aic: dict[str, float | None],
          md: bool) -> None:
    """Per point: measured, ours, AIConfigurator's (its engine's tables; for the TensorRT-LLM
    runs also its vLLM tables, the ones ours read); then the medians of |error| per set."""
    sep = " | " if md else "  "
    head = ["run", "B", "ctx tokens/step", "TPOT meas", "rightsize", "err", "AIConfigurator",
            "err", "AIConfigurator, vLLM tables", "err"]
    print(("| " + sep.join(head) + " |") if md else sep.join(head))
    if md:
        print("|" + "---|" * len(head))
    errs: dict[str, list[float]] = {}

    def cell(x: float | None, meas: float) -> list[str]:
        return ["-", "-"] if x is None else [f"{x:.1f}", f"{err(x, meas):+.0f}%"]

    for c, b, p, ms in rows:
        a, v = aic.get(key(c, b, p)), aic.get(key(c, b, p) + " | vllm")
        group = "dstack" if c.name.startswith("405B") else "MLPerf"
        cells = [c.name, f"{b:,}", f"{p:,}", f"{c.tpot_ms:.1f}", *cell(ms, c.tpot_ms),
                 *cell(a, c.tpot_ms), *cell(v, c.tpot_ms)]
        print(("| " + sep.join(cells) + " |") if md else sep.join(cells))
        if a is None:
            continue
        for g in (group, "all"):
            errs.setdefault(f"{g} ours", []).append(abs(err(ms, c.tpot_ms)))
            errs.setdefault(f"{g} aic", []).append(abs(err(a, c.tpot_ms)))
        if v is not None:
            errs.setdefault("MLPerf aic-vllm", []).append(abs(err(v, c.tpot_ms)))
    for g in ("dstack", "MLPerf", "all"):
        if f"{g} ours" in errs:
            o, t = errs[f"{g} ours"], errs[f"{g} aic"]
            print(f"{g}: median |TPOT error| rightsize {statistics.median(o):.1f}% (max "
                  f"{max(o):.1f}%), AIConfigurator {statistics.median(t):.1f}% "
                  f"(max {max(t):.1f}%), {len(o)} points")
    if "MLPerf aic-vllm" in errs:
        v = errs["MLPerf aic-vllm"]
        print(f"MLPerf, AIConfigurator from its vLLM tables: median |TPOT error| "
              f"{statistics.median(v):.1f}% (max {max(v):.1f}%), {len(v)} points")

if __name__ == "__main__":
    main()
