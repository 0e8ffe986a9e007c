"""Validation of the serving step model on AIConfigurator's measured tables: leave one GPU out.

    PYTHONPATH=. RIGHTSIZE_SHARED=../shared python benchmarks/serving_accuracy.py [--aic]

For each of the six GPUs with tables, the model of a GPU WITHOUT a table (the rate curves of
the other five, pooled, on its datasheet peaks; and, beside it, the trace analysis's per-kernel
projection) predicts the operators and whole steps that its own tables give, on a grid of
served configurations (5 models, TP 1-8, batch 1-128, prompt 128-4096, 128 output tokens;
every point that fits memory). Errors are |predicted / table - 1| per operator class (summed
over a step's layers: GEMMs, prefill attention, decode attention, all-reduces) and per whole
step (kernel time), median and max. The calibrated rows: the per-kernel projection (what a GPU without tables
gets) after calibrating on ONE point of the held-out GPU (Llama-3.1-8B, TP 1, batch 8, 1024 in, 128 out: its TTFT
and TPOT from the tables), for the other points of that GPU (same model; other models), and
across GPUs (calibrated on one GPU, predicting another). ``--aic`` also runs AIConfigurator's
own static estimate (``aiconfigurator cli estimate --estimate-mode static``, from
/tmp/aic-venv) on a subset and compares it with ours from the same tables
(benchmarks/serving_aic.result.json keeps its answers).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_common import SHARED, catalog, systems

from rightsize.analyzers.serving.calibrate import (
    Observation,
    fit_calibration,
    observation_parts,
)
from rightsize.analyzers.serving.curves import CurveTimer, load_curves, pooled
from rightsize.analyzers.serving.forward import Parts, context_us
from rightsize.analyzers.serving.predict import mean_kv
from rightsize.analyzers.serving.step import Deployment, build_step, fits
from rightsize.analyzers.serving.tables import Tables
from rightsize.analyzers.serving.timer import ProjectionTimer
from rightsize.analyzers.sizing.hf_config import from_hf_config

CONFIGS = SHARED / "configs"
LLAMA8 = json.loads((CONFIGS / "dotnet-meta-llama-3.1-8B-Instruct.json").read_text())
LLAMA70 = {**LLAMA8, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
           "num_hidden_layers": 80}  # Llama-3.1-70B's published config differs only here
MODELS = {"Llama-3.1-8B": LLAMA8, "Llama-3.1-70B": LLAMA70,
          "Mixtral-8x7B": json.loads((CONFIGS / "mlc-Mixtral-8x7B-v0.1.json").read_text()),
          "Qwen3-1.7B": json.loads((CONFIGS / "mlc-qwen3_1.7b.json").read_text()),
          "phi-2": json.loads((CONFIGS / "dotnet-phi-2-config.json").read_text())}
GRID = [(tp, b, isl) for tp in (1, 2, 4, 8) for b in (1, 8, 32, 128) for isl in (128, 1024, 4096)]
OSL = 128
ANCHOR = ("Llama-3.1-8B", 1, 8, 1024)


def step_parts(model, batch: int, isl: int) -> tuple[Parts, Parts]:
    seqs, new = np.array([float(batch)]), np.array([float(isl)])
    att = context_us(model.ops, model.timer, seqs, new, np.zeros(1))
    pre = model.parts(seqs * new, seqs, att, np.zeros(1), np.zeros(1))
    dec = model.parts(np.zeros(1), np.zeros(1), np.zeros(1), seqs, seqs * mean_kv(isl, OSL))
    return pre, dec


def points(cat, gpu_name: str):
    gpu = cat.gpu(gpu_name)
    for name, cfg in MODELS.items():
        shape = from_hf_config(cfg, name)
        for tp, b, isl in GRID:
            dep = Deployment(gpu.name, tp)
            if fits(shape, dep, catalog=cat, batch=b, seq=isl + OSL) is None:
                yield name, shape, dep, b, isl


SIGNED: dict[str, list[float]] = {}  # truth / predicted - 1, per row label: the ranges


def err(pred: float, truth: float, label: str = "") -> float:
    if label:
        SIGNED.setdefault(label, []).append(truth / pred - 1)
    return abs(pred / truth - 1) * 100


def summary(values: list[float]) -> str:
    """median / p90 / max of |error| (%)."""
    if not values:
        return "-"
    return (f"{statistics.median(values):5.1f}% / {np.percentile(values, 90):5.1f}% /"
            f" {max(values):6.1f}%")


def main() -> None:
    cat = catalog()
    tables = Tables(SHARED / "serving" / "aiconfigurator")
    curves = load_curves()["gpus"]
    classes = ("GEMM", "context attention", "generation attention", "all-reduce",
               "prefill step", "decode step")
    rows: dict[str, dict[str, list[float]]] = {k: {c: [] for c in classes}
                                               for k in ("curves", "projection")}
    cal_rows: dict[str, list[float]] = {k: [] for k in ("prefill, same model",
                                                        "decode, same model",
                                                        "prefill, other models",
                                                        "decode, other models",
                                                        "prefill, other GPU",
                                                        "decode, other GPU")}
    per_gpu: dict[str, list[float]] = {}
    anchors = {}
    for name in systems().values():
        gpu = cat.gpu(name)
        table = tables.timer_for(gpu)
        held_out = CurveTimer(gpu, pooled(curves, exclude=name), "pooled")
        timers = {"curves": held_out, "projection": ProjectionTimer(gpu)}
        cache = {}
        for mname, shape, dep, b, isl in points(cat, name):
            truth = build_step(shape, dep, gpu, table)
            tp, td = step_parts(truth, b, isl)
            preds = {}
            for k, timer in timers.items():
                model = build_step(shape, dep, gpu, timer)
                pp, pd = step_parts(model, b, isl)
                preds[k] = (model, pp, pd)
                r = rows[k]
                r["GEMM"] += [err(pp.gemm[0], tp.gemm[0]), err(pd.gemm[0], td.gemm[0])]
                r["context attention"].append(err(pp.attention[0], tp.attention[0]))
                r["generation attention"].append(err(pd.attention[0], td.attention[0]))
                if dep.tp > 1:
                    r["all-reduce"] += [err(pp.comm[0], tp.comm[0]), err(pd.comm[0], td.comm[0])]
                r["prefill step"].append(err(pp.total[0], tp.total[0], f"{k} prefill"))
                r["decode step"].append(err(pd.total[0], td.total[0], f"{k} decode"))
            per_gpu.setdefault(name, []).append(err(preds["curves"][1].total[0], tp.total[0]))
            # calibrated rows: what a GPU without tables gets (step.timer_for: the projection)
            cache[(mname, dep.tp, b, isl)] = (truth, preds["projection"][0], tp, td)
        anchors[name] = cache
    # calibrated: one point per GPU
    for name, cache in anchors.items():
        truth, model, tp, td = cache[ANCHOR]
        dep = model.deployment
        obs = [Observation(dep, float(truth.factors.step_ms(tp, np.array([True]))[0]),
                           prefill_seqs=ANCHOR[2], prefill_tokens=ANCHOR[3]),
               Observation(dep, float(truth.factors.step_ms(td, np.array([False]))[0]),
                           decode_seqs=ANCHOR[2], kv_mean=mean_kv(ANCHOR[3], OSL))]
        cal = fit_calibration(obs, lambda o, m=model: observation_parts(m, o), "one point")
        for key, (t_model, m_model, t_pre, t_dec) in cache.items():
            if key == ANCHOR:
                continue
            f, _ = cal.for_gpu(name)
            _, (p_pre, p_dec) = m_model, step_parts(m_model, key[2], key[3])
            same = "same model" if key[0] == ANCHOR[0] else "other models"
            ttft = t_model.factors.step_ms(t_pre, np.array([True]))[0]
            tpot = t_model.factors.step_ms(t_dec, np.array([False]))[0]
            cal_rows[f"prefill, {same}"].append(err(f.step_ms(p_pre, np.array([True]))[0], ttft,
                                                    "calibrated prefill"))
            cal_rows[f"decode, {same}"].append(err(f.step_ms(p_dec, np.array([False]))[0], tpot,
                                                   "calibrated decode"))
            for other, ocache in anchors.items():
                if other == name or key not in ocache:
                    continue
                o_truth, o_model, o_pre, o_dec = ocache[key]
                fa = cal.factors["any"]
                q_pre, q_dec = step_parts(o_model, key[2], key[3])
                cal_rows["prefill, other GPU"].append(err(
                    fa.step_ms(q_pre, np.array([True]))[0],
                    o_truth.factors.step_ms(o_pre, np.array([True]))[0]))
                cal_rows["decode, other GPU"].append(err(
                    fa.step_ms(q_dec, np.array([False]))[0],
                    o_truth.factors.step_ms(o_dec, np.array([False]))[0]))
    print("Leave one GPU out, uncalibrated (median / p90 / max |error| vs the held-out GPU's"
          " tables)")
    print(f"{'class':<22} {'rate curves of the others':>28} {'per-kernel projection':>28}")
    for c in classes:
        print(f"{c:<22} {summary(rows['curves'][c]):>28} {summary(rows['projection'][c]):>28}")
    print("\nWhole-step kernel time, per held-out GPU (rate curves; median / p90 / max)")
    for name, v in per_gpu.items():
        print(f"  {name:<22} {summary(v)}  ({len(v)} steps)")
    print("\nPer-kernel projection calibrated on one point of the held-out GPU (Llama-3.1-8B TP1"
          " b8 1024/128)")
    for k, v in cal_rows.items():
        print(f"  {k:<24} {summary(v)}  ({len(v)} points)")
    print("\nRanges (p10 / p90 of measured / predicted - 1), the defaults of factors.py and"
          " calibrate.py")
    for k, v in SIGNED.items():
        lo, hi = np.percentile(v, [10, 90])
        print(f"  {k:<22} {lo:+.2f} / {hi:+.2f}")
    if "--aic" in sys.argv:
        from serving_aic import compare
        compare(cat, tables)


if __name__ == "__main__":
    main()
