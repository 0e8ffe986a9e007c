"""AIConfigurator's own static estimates beside ours, on the same tables and points.

Run through ``benchmarks/serving_accuracy.py --aic`` (or alone). AIConfigurator 0.12.0 is
installed in its own venv, never the project's::

    python -m venv /tmp/aic-venv && /tmp/aic-venv/bin/pip install aiconfigurator==0.12.0

and asked ``aiconfigurator cli estimate --estimate-mode static --backend vllm --systems-paths
<shared tables>`` per point (CPU only). Its answers are kept in serving_aic.result.json so the
table prints without it; our predictions are recomputed (uncalibrated, from the tables).
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_accuracy import LLAMA8, LLAMA70
from serving_common import ROOT, catalog, systems

from rightsize.analyzers.serving.predict import Point, predict_points
from rightsize.analyzers.serving.tables import Tables
from rightsize.analyzers.sizing.hf_config import from_hf_config

AIC = Path("/tmp/aic-venv/bin/aiconfigurator")
RESULT = Path(__file__).with_name("serving_aic.result.json")
POINTS = [("Llama-3.1-8B", 1, b, isl) for b in (1, 16) for isl in (128, 2048)] + [
    ("Llama-3.1-70B", 4, 8, 1024)]
OSL = 128
CONFIGS = {"Llama-3.1-8B": LLAMA8, "Llama-3.1-70B": LLAMA70}


def _aic(system: str, model_dir: Path, tp: int, batch: int, isl: int) -> dict[str, float] | None:
    cmd = [str(AIC), "cli", "estimate", "--model-path", str(model_dir), "--estimate-mode",
           "static", "--system", system, "--backend", "vllm", "--isl", str(isl), "--osl",
           str(OSL), "--batch-size", str(batch), "--tp-size", str(tp), "--systems-paths",
           str(ROOT)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    got = {k: re.search(rf"{k.upper()}:\s+([\d.,]+) ms", out.stdout) for k in ("ttft", "tpot")}
    if not all(got.values()):
        return None
    return {k: float(m.group(1).replace(",", "")) for k, m in got.items() if m}


def run_aic() -> dict[str, dict[str, float] | None]:
    results: dict[str, dict[str, float] | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in CONFIGS.items():
            (Path(tmp) / name).mkdir()
            (Path(tmp) / name / "config.json").write_text(json.dumps(cfg))
        for system in systems():
            for model, tp, b, isl in POINTS:
                key = f"{system} {model} tp{tp} b{b} isl{isl} osl{OSL}"
                results[key] = _aic(system, Path(tmp) / model, tp, b, isl)
                print(key, results[key], flush=True)
    RESULT.write_text(json.dumps({"aiconfigurator": "0.12.0 (aiconfigurator cli estimate "
                                  "--estimate-mode static --backend vllm)",
                                  "results": results}, indent=1) + "\n")
    return results


def compare(cat=None, tables=None) -> None:  # type: ignore[no-untyped-def]
    cat = cat or catalog()
    tables = tables or Tables(ROOT)
    if AIC.exists() and (not RESULT.exists() or "--rerun" in sys.argv):
        results = run_aic()
    else:
        results = json.loads(RESULT.read_text())["results"]
    diffs: dict[str, list[float]] = {"ttft": [], "tpot": []}
    print(f"\n{'point':<52} {'AIC TTFT':>9} {'ours':>8} {'AIC TPOT':>9} {'ours':>7}")
    for system, name in systems().items():
        for model, tp, b, isl in POINTS:
            key = f"{system} {model} tp{tp} b{b} isl{isl} osl{OSL}"
            aic = results.get(key)
            if not aic:
                continue
            shape = from_hf_config(CONFIGS[model], model)
            ours = predict_points(shape, [Point(name, tp, 1, b, isl, OSL)], catalog=cat,
                                  tables=tables)[0]
            diffs["ttft"].append(abs(ours.ttft_ms / aic["ttft"] - 1) * 100)
            diffs["tpot"].append(abs(ours.tpot_ms / aic["tpot"] - 1) * 100)
            print(f"{key:<52} {aic['ttft']:9.2f} {ours.ttft_ms:8.2f} {aic['tpot']:9.3f}"
                  f" {ours.tpot_ms:7.3f}")
    for k, v in diffs.items():
        if v:
            print(f"{k.upper()}: ours vs AIConfigurator, median |difference| "
                  f"{statistics.median(v):.1f}%, max {max(v):.1f}% ({len(v)} points)")


if __name__ == "__main__":
    compare()
