"""Online validation of the continuous-batching simulation on measured serving runs the project
never fitted on (../shared/serving/measured, SOURCES.md there):

1. dstack's vLLM 0.6.3 runs of Llama-3.1-405B-FP8 on 8x H100 SXM (TP 8), ShareGPT, 1000
   prompts at 16, 32 and 1000 req/s, per scheduler setting (chunked prefill on/off,
   max_num_seqs, max_num_batched_tokens, num-scheduler-steps);
2. MLPerf Inference v4.1 Llama-2-70B Server results (TensorRT-LLM on H100 SXM/NVL and H200, vLLM
   on MI300X), Poisson arrivals at the scheduled rate, per instance (rate / instances).

For each: the median TPOT (and TTFT) the simulation predicts uncalibrated, and calibrated on one
rate of the same deployment (``online_fit``: every step x one factor from that rate's median
TPOT) for the other rates. Prints the tables of docs/serving.md (``--markdown``).

Inputs from each run's published facts: the rate (scheduled samples/s over the instances), TP x
instances, the output tokens per request (tokens/s over samples/s), TensorRT-LLM's max batch per
system (NVIDIA's v4.1 configs, ``MLPERF``) and its KV sizing (``TRT_KV_FRACTION``), the MLPerf
set's bounds (prompts and outputs under 1,024 tokens). Assumed, said in the output: per-request
lengths are not published (ShareGPT's and OpenOrca's), so they are drawn from a log-normal
(sigma 0.9 / 0.8, seeded) scaled to the runs' means; the OpenOrca prompts' mean (300 tokens,
``MLPERF_ISL``); vLLM V0's multi-step scheduling is not modelled (a step is one decode);
TensorRT-LLM's in-flight batching is simulated with vLLM V1's rules (docs/serving.md says what
differs).

The vLLM V0 runs (dstack's 0.6.3, the MI300X's 0.4.3) carry V0's CPU work per scheduled
sequence (``V0``; vLLM's published figure, docs/serving.md); ``--no-engine-overhead`` runs
without it (the figures before it).

    RIGHTSIZE_SHARED=../shared python benchmarks/serving_online.py [--markdown]
        [--no-engine-overhead] [--operating-points] [--mlperf-isl N]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rightsize.analyzers.serving.latency import summarize
from rightsize.analyzers.serving.online_fit import fit
from rightsize.analyzers.serving.simulate import Limits, Requests, simulate
from rightsize.analyzers.serving.step import Deployment, memory_bytes, step_model
from rightsize.analyzers.serving.tabulated import Tabulated
from rightsize.analyzers.sizing.hf_config import from_hf_config
from rightsize.catalog import load_catalog

SHARED = Path(os.environ.get("RIGHTSIZE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
MEASURED = SHARED / "serving" / "measured"
# The published config.json fields that shape the model (Hugging Face model cards).
LLAMA31_405B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
                "num_attention_heads": 128, "num_key_value_heads": 8, "vocab_size": 128256,
                "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
                "tie_word_embeddings": False}
LLAMA2_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
              "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
              "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
# The MLPerf Llama-2-70B set (mlcommons/inference language/llama2-70b: processorca.py keeps
# OpenOrca GPT-4 samples with fewer than 1,024 prompt and 1,024 reference-output tokens and at
# least 3 output tokens, 6,144 from each of cot, flan, niv and t0; the inference rules give 294.45
# reference output tokens a sample). No source reached states the prompts' mean; it is bounded:
# the H200 x1 run keeps 14.43 req/s x 39.9 s mean latency = 576 requests in flight, and TRT-LLM's
# KV (0.9 of the free memory, 416,526 fp8 tokens) holds that only if a request in flight averages
# under 723 tokens, its prompt + the ~276 it has generated on average (duration-weighted
# log-normal outputs of mean 291) + half a 32-token block: prompts under ~430 tokens. 300 is
# assumed; the output mean comes from each run (tokens/s over samples/s).
MLPERF_ISL = 300
MLPERF_MAX_TOKENS = 1024  # inputs and outputs under 1,024 tokens (processorca.py)
MLPERF = {  # file prefix -> (catalog GPU, TP, instances, max batch)
    # max batch: NVIDIA's v4.1 Server configs (closed/NVIDIA/configs/llama2-70b/Server:
    # gpu_batch_size, which the harness passes to TensorRT-LLM as its max batch): H100 SXM TP2
    # 1024 (the classes Juniper, Supermicro and Dell submit from), H200 SXM x1 896 (Dell's x8
    # inherits it), H200 CTS x1 850, H100 NVL TP2 640 (ASUSTeK's); Lenovo's and the MI300X
    # systems' are not published: vLLM's default there
    "NVIDIA__H200-SXM-141GB-CTSx1": ("H200 SXM", 1, 1, 850),
    "Dell__XE9680_H200_SXM_141GBx8": ("H200 SXM", 1, 8, 896),
    "Dell__XE9640_H100_SXM_80GBx4": ("H100 SXM", 2, 2, 1024),
    "Supermicro__AS_8125GS_TNHR_H100_SXM_80GBx8": ("H100 SXM", 2, 4, 1024),
    "JuniperNetworks__DGX-H100_H100-SXM-80GBx16": ("H100 SXM", 2, 8, 1024),
    "JuniperNetworks__DGX-H100_H100-SXM-80GBx32": ("H100 SXM", 2, 16, 1024),
    "Lenovo__SR675_V3_8xH100_NVL": ("H100 NVL", 1, 8, 1024),
    "ASUSTeK__ESC4000A_E12_4XH100": ("H100 NVL", 2, 2, 640),
    "Dell__XE9680_MI300X_192GBx8": ("MI300X", 1, 8, 1024),
    "AMD__8xMI300X_2xEPYC-TURIN": ("MI300X", 1, 8, 1024),
}
# TensorRT-LLM sizes its KV cache as kvcache_free_gpu_mem_frac (0.90 in those configs) of the
# memory left after the engine; vLLM as gpu_memory_utilization (0.9) of all of it, less the rest
TRT_KV_FRACTION = 0.9
# The vLLM V0 runs (dstack's 0.6.3, the MI300X's 0.4.3) carry V0's CPU work per scheduled
# sequence (factors.ENGINE_SEQ_OVERHEAD_MS, from vLLM's own published figure, never fitted
# here); --no-engine-overhead times them as V1 ("vllm"), the figures before that term.
V0 = "vllm-v0"
SKIP = 0.2  # drop the warm-up and the drain of each simulated MLPerf run
# Each MLPerf run is simulated for as long as it ran (its log's min_duration: 600 s or 2,400 s of
# Poisson arrivals): near capacity the batch relaxes to its steady state over many request
# lifetimes (about E2E / (1 - rate x O x S'(B))), so a short simulation stops while the batch
# still grows (Supermicro's H100 run: TPOT p50 79 ms over 2,500 requests, 176 over 10,000).


@dataclass
class Case:
    name: str
    config: dict[str, object]
    dep: Deployment
    limits: tuple[int, int, bool]  # max_num_seqs, max_num_batched_tokens, chunked prefill
    rate: float
    n: int
    isl: float
    osl: float
    tpot_p50: float
    ttft_p50: float
    skip: float
    group: str  # cases calibrated together (one deployment and scheduler)
    note: str = ""
    engine: str = "vllm"  # "trtllm": TensorRT-LLM's KV rule (TRT_KV_FRACTION of the free memory)
    max_tokens: int = 4097  # one more than the longest prompt or output the set holds
    # the measured operating point (per instance): output and prompt tokens/s, the TPOT they
    # ran at; decoding sequences = output tokens/s x TPOT (each makes one token per TPOT)
    out_tok_s: float = 0.0
    in_tok_s: float = 0.0
    tpot_ms: float = 0.0
    across: str = ""  # MLPerf: the GPU and TP whose other systems are calibrated across


def lengths(n: int, mean: float, sigma: float, lo: int, hi: int, seed: int) -> np.ndarray:
    raw = np.random.default_rng(seed).lognormal(0.0, sigma, n)
    x = np.clip(np.round(raw / raw.mean() * mean), lo, hi)
    for _ in range(20):  # rescale after clipping until the mean holds
        x = np.clip(np.round(x * mean / x.mean()), lo, hi)
    return x.astype(np.int64)


def requests(c: Case, seed: int = 1) -> Requests:
    top = c.max_tokens - 1
    prompts = lengths(c.n, c.isl, 0.9, 4, top, seed)
    outs = lengths(c.n, c.osl, 0.8, 3 if c.max_tokens == MLPERF_MAX_TOKENS else 2, top, seed + 1)
    gaps = np.random.default_rng(seed + 2).exponential(1.0 / c.rate, c.n)
    gaps[0] = 0.0
    return Requests(np.cumsum(gaps), prompts, outs)


def dstack_cases(v0: str = V0) -> list[Case]:
    rows = list(csv.DictReader((MEASURED / "dstack__llama31-405b-fp8_8xH100_qps_output.csv")
                               .open()))
    out = []
    for i, r in enumerate(rows):
        steps = int(r["num-scheduler-step"])
        chunked = r["enable-chunked-prefill"].upper() == "TRUE"
        mns, mnbt = int(r["max-num-seqs"]), int(r["max-num-batched-tokens"])
        n = int(r["completed"])
        group = f"chunked {'on' if chunked else 'off'}, seqs {mns}, tokens {mnbt}, steps {steps}"
        out.append(Case(f"405B #{i // 3 + 1} {group}, {r['request_rate']} req/s", LLAMA31_405B,
                        # vllm serve with no --kv-cache-dtype: "auto", the 16-bit KV cache
                        # vLLM 0.6.3: the V0 engine (its CPU work per sequence, ``V0``)
                        Deployment("H100 SXM", 8, 1, "fp8", kv_cache="bf16", engine=v0),
                        # without chunked prefill vLLM V0 needs a whole prompt per step
                        (mns, mnbt if chunked else max(mnbt, 8192), chunked),
                        float(r["request_rate"]), n, int(r["total_input_tokens"]) / n,
                        int(r["total_output_tokens"]) / n, float(r["median_tpot_ms"]),
                        float(r["median_ttft_ms"]), 0.0, f"dstack #{i // 3 + 1}",
                        "multi-step scheduling not modelled" if steps > 1 else "",
                        out_tok_s=float(r["output_throughput"]),
                        in_tok_s=int(r["total_input_tokens"]) / float(r["duration"]),
                        tpot_ms=float(r["mean_tpot_ms"])))
    return out


def _ns(text: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*:\s*([\d.]+)", text)
    assert m, label
    return float(m.group(1))


def mlperf_cases(isl: float = MLPERF_ISL, v0: str = V0) -> list[Case]:
    out = []
    for f in sorted((MEASURED / "mlperf_v4.1_llama2-70b-99_server").iterdir()):
        key = next((k for k in MLPERF if f.name.startswith(k)), None)
        if key is None:
            continue
        gpu, tp, inst, batch = MLPERF[key]
        text = f.read_text()
        qps = _ns(text, "Scheduled samples per second")
        n = math.ceil(qps / inst * _ns(text, "min_duration (ms)") / 1e3)
        osl = _ns(text, "Completed tokens per second") / _ns(text, "Completed samples per second")
        out.append(Case(f"70B {key.split('__')[0]} {gpu} TP{tp} x{inst}", LLAMA2_70B,
                        # fp8 KV: TensorRT-LLM's kv_cache_dtype fp8 (NVIDIA's Hopper configs),
                        # AMD's quark w_fp8_a_fp8_o_fp8 (fp8 K and V outputs)
                        # MI300X: vLLM 0.4.3, the V0 engine; TensorRT-LLM's C++ batch manager
                        # gets no per-sequence engine term (as vLLM V1: "vllm")
                        Deployment(gpu, tp, 1, "fp8", kv_cache="fp8",
                                   engine=v0 if gpu == "MI300X" else "vllm"),
                        (batch, 8192, True),
                        qps / inst,
                        n, isl, osl,
                        _ns(text, "50.00 percentile time to output token (ns)") / 1e6,
                        _ns(text, "50.00 percentile first token latency (ns)") / 1e6, SKIP,
                        # one deployment: one submitter's system at one GPU and TP (Juniper's
                        # DGX-H100 at 2 and 4 nodes, the same TensorRT 9.3 / CUDA 12.2);
                        # ``across``: other submitters' systems of the same GPU and TP
                        f"70B {key.split('__')[0]} {gpu} TP{tp}",
                        engine="vllm" if gpu == "MI300X" else "trtllm",
                        across=f"70B {gpu} TP{tp}",
                        max_tokens=MLPERF_MAX_TOKENS,
                        out_tok_s=_ns(text, "Completed tokens per second") / inst,
                        in_tok_s=qps / inst * isl,
                        tpot_ms=_ns(text, "50.00 percentile time to output token (ns)") / 1e6))
    return out


class Runner:
    def __init__(self) -> None:
        self.tables: dict[tuple[str, str, int, int], tuple[Tabulated, int]] = {}

    def table(self, c: Case) -> tuple[Tabulated, int]:
        key = (str(c.config["hidden_size"]), c.dep.gpu, c.dep.tp, c.limits[0], c.engine,
               c.dep.kv_cache, c.dep.engine)
        if key not in self.tables:
            config = from_hf_config(c.config, "m")
            model = step_model(config, c.dep)
            kv = model.kv_cache_tokens
            if c.engine == "trtllm":
                gpu = load_catalog().gpu(c.dep.gpu)
                fixed, per_token = memory_bytes(config, c.dep, gpu)
                kv = int(TRT_KV_FRACTION * (gpu.memory_bytes - fixed) // per_token)
            self.tables[key] = (Tabulated(model.step_ms_vec, c.limits[0], 16384, 8192), kv)
        return self.tables[key]

    def run(self, c: Case, factor: float = 1.0) -> tuple[float, float, float]:
        t, kv = self.table(c)
        lim = Limits(c.limits[0], c.limits[1], kv, c.limits[2])
        s = summarize((simulate(requests(c), lim, t.scaled(factor, factor)),), c.skip)
        return s.tpot_ms.p50, s.ttft_ms.p50, s.throughput_rps

    def at_operating_point(self, c: Case) -> tuple[float, float, float, float]:
        """At the run's own measured operating point, the step model alone (no queue): the
        decoding sequences ``B`` (output tokens/s x TPOT), prompt tokens a step (prompt tokens/s
        x TPOT), the step's ms there, and ``rate x O x S'(B)`` at the served rate (output tokens/s
        over ``O``): how much the queue amplifies a step error (``1 / (1 - that)``), with
        ``S(B)`` the step holding its own prompt tokens (prompt tokens/s x S) solved at ``B``
        -5% and +5%."""
        b = c.out_tok_s * c.tpot_ms / 1e3
        p = c.in_tok_s * c.tpot_ms / 1e3
        t, _ = self.table(c)

        def step(seqs: float, prompt: float) -> float:
            return float(t.step(np.array([round(prompt)]), np.array([0]),
                                np.array([round(seqs)]),
                                np.array([round(seqs * (c.isl + c.osl / 2))]))[0])

        def settled(seqs: float) -> float:
            ms = c.tpot_ms
            for _ in range(60):
                ms = step(seqs, c.in_tok_s * ms / 1e3)
            return ms

        slope = (settled(1.05 * b) - settled(0.95 * b)) / (0.1 * b)
        return b, p, step(b, p), c.out_tok_s * slope / 1e3

    def calibrate(self, c: Case) -> float:
        t, kv = self.table(c)
        lim = Limits(c.limits[0], c.limits[1], kv, c.limits[2])
        # the medians over the same requests as the predictions (MLPerf: without the warm-up
        # and the drain; the first pass fitted over every request and predicted without them)
        return fit(t, lim, requests(c), c.rate, c.tpot_p50, c.ttft_p50, c.name,
                   skip=c.skip).factor


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred / meas - 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--mlperf-isl", type=float, default=MLPERF_ISL,
                    help="mean prompt tokens assumed for MLPerf's OpenOrca set (the sensitivity)")
    ap.add_argument("--operating-points", action="store_true",
                    help="only the step model at each run's measured operating point (seconds)")
    ap.add_argument("--no-engine-overhead", action="store_true",
                    help="time the vLLM V0 runs without V0's per-sequence engine work")
    args = ap.parse_args()
    runner = Runner()
    v0 = "vllm" if args.no_engine_overhead else V0
    if args.operating_points:
        cases = [c for c in dstack_cases(v0) + mlperf_cases(args.mlperf_isl, v0) if not c.note]
        operating_points(runner, cases, args.markdown)
        return
    t0 = time.perf_counter()
    rows = [(c, *runner.run(c)) for c in dstack_cases(v0) + mlperf_cases(args.mlperf_isl, v0)]
    unc = {c.name: err(tpot, c.tpot_p50) for c, tpot, *_ in rows}
    calibrated = calibrate_within(runner, rows, lambda c: c.group)
    across = calibrate_within(runner, [r for r in rows if r[0].across],
                              lambda c: c.across, lambda a, c: a.group != c.group)
    show(rows, calibrated, args.markdown)
    print("\nMLPerf, calibrated on one submitter's system, predicting other systems of the same "
          "GPU and TP (not other rates of one deployment):")
    show([], across, args.markdown)
    operating_points(runner, [r[0] for r in rows if not r[0].note], args.markdown)
    summary(rows, unc, calibrated, across)
    print(f"({time.perf_counter() - t0:.0f} s)")


Row = tuple[Case, float, float, float]
Calibrated = tuple[str, Case, Case, float, float, float]


def calibrate_within(runner: Runner, rows: list[Row], group_of: Callable[[Case], str],
                     other: Callable[[Case, Case], bool] = lambda a, c: True
                     ) -> list[Calibrated]:
    """Per group (in order), calibrate on its first run and predict its other runs (those
    ``other`` admits); groups of one run, or a scheduler the simulation does not model, skip."""
    groups: dict[str, list[Case]] = {}
    for c, *_ in rows:
        groups.setdefault(group_of(c), []).append(c)
    out = []
    for g, members in groups.items():
        anchor, rest = members[0], [c for c in members[1:] if other(members[0], c)]
        if not rest or anchor.note:
            continue
        k = runner.calibrate(anchor)
        for c in rest:
            tpot, ttft, _ = runner.run(c, k)
            out.append((g, anchor, c, k, tpot, ttft))
    return out


def _median(label: str, errs: list[float]) -> str:
    return (f"{label}: median |TPOT error| {statistics.median(errs):.1f}% (max {max(errs):.1f}%,"
            f" {len(errs)} runs)" if errs else f"{label}: no runs")


def summary(rows: list[Row], unc: dict[str, float], calibrated: list[Calibrated],
            across: list[Calibrated]) -> None:
    """The goals' figures: uncalibrated on the vLLM runs (the goal's rows: dstack's single-step
    runs and the MI300X's vLLM 0.4.3) and on the TensorRT-LLM runs; calibrated on one rate of
    one deployment (dstack's settings, Juniper's DGX-H100 at 2 and 4 nodes), and, apart,
    calibrated across MLPerf systems."""
    single = [c for c, *_ in rows if not c.note]
    vllm = [c for c in single if c.engine != "trtllm"]
    print()
    for label, cases in (("uncalibrated, vLLM runs (dstack single-step, MI300X)", vllm),
                         ("uncalibrated, dstack single-step",
                          [c for c in single if c.name.startswith("405B")]),
                         ("uncalibrated, MLPerf (TensorRT-LLM and MI300X vLLM)",
                          [c for c in single if c.name.startswith("70B")]),
                         ("uncalibrated, TensorRT-LLM runs",
                          [c for c in single if c.engine == "trtllm"]),
                         ("uncalibrated, all single-step runs", single)):
        print(_median(label, [abs(unc[c.name]) for c in cases]))
    print(_median("uncalibrated, all runs (multi-step included)", [abs(v) for v in unc.values()]))
    for label, got in (("calibrated on one rate, other rates of the same deployment", calibrated),
                       ("  of which dstack", [x for x in calibrated if x[2].name.startswith("4")]),
                       ("  of which MLPerf (Juniper)",
                        [x for x in calibrated if x[2].name.startswith("7")]),
                       ("calibrated across MLPerf systems (not the goal's setting)", across)):
        print(_median(label, [abs(err(x[4], x[2].tpot_p50)) for x in got]))
        if got:
            ttft = [abs(err(x[5], x[2].ttft_p50)) for x in got]
            print(f"    median |TTFT error| {statistics.median(ttft):.1f}%")


def operating_points(runner: Runner, cases: list[Case], md: bool) -> None:
    """The step model alone at each run's measured operating point (decoding sequences and
    prompt tokens per step from its token rates and TPOT): what the queue then amplifies."""
    sep = " | " if md else "  "
    head = ["run", "decoding seqs", "prompt tokens/step", "TPOT meas", "step model", "err",
            "rate x O x S'(B)"]
    print()
    print(("| " + sep.join(head) + " |") if md else sep.join(head))
    if md:
        print("|" + "---|" * len(head))
    errs: dict[str, list[float]] = {}
    for c in cases:
        b, p, ms, gain = runner.at_operating_point(c)
        e = err(ms, c.tpot_ms)
        errs.setdefault(c.dep.gpu if c.name.startswith("70B") else "dstack", []).append(abs(e))
        cells = [c.name, f"{b:,.0f}", f"{p:,.0f}", f"{c.tpot_ms:.1f}", f"{ms:.1f}", f"{e:+.0f}%",
                 f"{gain:.2f}"]
        print(("| " + sep.join(cells) + " |") if md else sep.join(cells))
    for k, v in errs.items():
        print(f"step model at the measured operating point, {k}: median |error| "
              f"{statistics.median(v):.1f}% ({len(v)} runs)")


def show(rows: list[tuple[Case, float, float, float]],
         calibrated: list[tuple[str, Case, Case, float, float, float]], md: bool) -> None:
    sep = " | " if md else "  "

    def line(cells: list[str]) -> None:
        print(("| " + sep.join(cells) + " |") if md else sep.join(cells))

    head = ["run", "req/s", "TPOT p50 meas", "sim", "err", "TTFT p50 meas", "sim", "err",
            "note"]
    if rows:
        line(head)
    if md and rows:
        print("|" + "---|" * len(head))
    for c, tpot, ttft, _ in rows:
        rate = "inf" if c.rate >= 1000 else f"{c.rate:g}"
        line([c.name, rate, f"{c.tpot_p50:.1f}", f"{tpot:.1f}", f"{err(tpot, c.tpot_p50):+.0f}%",
              f"{c.ttft_p50:,.0f}", f"{ttft:,.0f}", f"{err(ttft, c.ttft_p50):+.0f}%", c.note])
    print()
    head = ["calibrated on", "factor", "predicted run", "TPOT meas", "sim", "err", "TTFT meas",
            "sim", "err"]
    line(head)
    if md:
        print("|" + "---|" * len(head))
    for _, anchor, c, k, tpot, ttft in calibrated:
        rate = f"{c.rate:g} req/s" if c.rate < 1000 else "inf"
        line([f"{anchor.name}", f"x{k:.3f}", f"{c.name}, {rate}" if c.across else rate,
              f"{c.tpot_p50:.1f}", f"{tpot:.1f}", f"{err(tpot, c.tpot_p50):+.1f}%",
              f"{c.ttft_p50:,.0f}", f"{ttft:,.0f}", f"{err(ttft, c.ttft_p50):+.1f}%"])


if __name__ == "__main__":
    if not math.isfinite(1.0):
        raise SystemExit(1)
    main()
