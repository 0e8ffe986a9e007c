"""``rightsize serving plan`` and ``serving simulate`` through the real CLI: plans that respect
head divisibility and memory, the impossible-SLO line, manifests, the JSON contracts, the
online calibration, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, cli

LLAMA3 = REPO / "samples" / "configs" / "Meta-Llama-3-8B.json"
# 40 query heads, 10 KV heads, ~13B parameters (26 GB in bf16): one 24 GiB L4 cannot hold it,
# tensor parallel 2 splits both head counts, 4 and 8 split neither the KV heads
ODD = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 5120,
       "intermediate_size": 13824, "num_hidden_layers": 40, "num_attention_heads": 40,
       "num_key_value_heads": 10, "vocab_size": 32000, "max_position_embeddings": 4096,
       "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
SMALL = ("--num-requests", "300")


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(ODD))
    return p


def test_plan_respects_head_divisibility_and_memory(odd: Path) -> None:
    r = cli("serving", "plan", "--hf-config", odd, "--rate", "1", "--isl", "256", "--osl", "64",
            "--ttft-p95-ms", "5000", "--tpot-p95-ms", "400", "--gpus", "L4", "--max-gpus",
            "8", "--format", "json", *SMALL)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    rec = plan["recommended"]
    assert (rec["gpu"], rec["tp"], rec["pp"]) == ("L4", 2, 1)
    why = {x["config"]: x["why"] for x in plan["rejected"]}
    assert why["L4 TP 1"].startswith("weights and activations need")
    assert "more than 90% of the L4's 24 GiB" in why["L4 TP 1"]
    for tp in (4, 8):
        assert why[f"L4 TP {tp}"] == (f"tensor parallel {tp} does not split 40 query heads and "
                                      "10 KV heads evenly")
    assert all(o["tp"] == 2 for o in plan["frontier"])
    assert rec["ttft_p95_ms"] <= 5000 and rec["tpot_p95_ms"] <= 400
    assert rec["ttft_p95_ms_low"] <= rec["ttft_p95_ms"] <= rec["ttft_p95_ms_high"]
    for key in ("gpu", "tp", "pp", "replicas", "max_num_seqs", "cost_per_hour_usd",
                "ttft_p95_ms", "tpot_p95_ms", "tokens_per_s"):
        assert key in rec
    # cost: replicas x 2 GPUs x the catalog's cheapest L4 price (RunPod 0.44 $/GPU-hour)
    assert rec["cost_per_hour_usd"] == pytest.approx(rec["replicas"] * 2 * 0.44)
    assert "--tensor-parallel-size 2" in plan["vllm_args"]


def test_an_impossible_slo_is_one_line() -> None:
    r = cli("serving", "plan", "--hf-config", LLAMA3, "--rate", "2", "--isl", "256", "--osl",
            "64", "--ttft-p95-ms", "2000", "--tpot-p95-ms", "0.5", "--gpus", "L4,H100 SXM",
            "--max-gpus", "8", *SMALL)
    assert r.returncode == 1 and r.stdout == ""
    line = r.stderr.strip()
    assert "\n" not in line
    assert re.fullmatch(r"rightsize: error: no configuration of the listed GPUs meets TPOT p95 "
                        r"<= 0\.5 ms at 2 req/s; the fastest reaches [\d.]+ ms \(\d+ x "
                        r"(L4|H100 SXM) TP \d.*\)", line), line


def test_manifests_are_written_checked_and_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "m"
    args = ("serving", "plan", "--hf-config", LLAMA3, "--rate", "4", "--isl", "512", "--osl",
            "128", "--ttft-p95-ms", "1000", "--tpot-p95-ms", "100", "--gpus", "H100 SXM",
            "--max-gpus", "4", "--manifests", out, *SMALL)
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    dep = yaml.safe_load((out / "deployment.yaml").read_text())
    keda = yaml.safe_load((out / "keda-scaledobject.yaml").read_text())
    pod = dep["spec"]["template"]["spec"]
    # GPU feature discovery labels an H100 SXM node by its NVML name, "NVIDIA H100 80GB HBM3"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    args_ = pod["containers"][0]["args"]
    assert args_[args_.index("--tensor-parallel-size") + 1] == "1"
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    trigger = keda["spec"]["triggers"][0]["metadata"]
    assert "vllm:num_requests_waiting" in trigger["query"]
    assert keda["spec"]["minReplicaCount"] == dep["spec"]["replicas"]
    assert "Manifests:" in r.stdout
    again = cli(*args)
    assert again.returncode == 1 and "already exists; pass --force" in again.stderr


def test_simulate_json_has_every_time_with_its_range() -> None:
    r = cli("serving", "simulate", "--hf-config", LLAMA3, "--gpu", "H100 SXM", "--rate", "5",
            "--isl", "512", "--osl", "64", "--num-requests", "200", "--format", "json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        for q in ("mean", "p50", "p90", "p99"):
            t = s[metric]
            assert t[f"{q}_low"] <= t[q] <= t[f"{q}_high"], (metric, q)
    for key in ("throughput_rps", "output_tokens_per_s", "kv_cache_peak_pct", "preemptions"):
        assert key in s
    assert (s["max_num_seqs"], s["max_num_batched_tokens"]) == (1024, 8192)  # vLLM on H100
    v0 = cli("serving", "simulate", "--hf-config", LLAMA3, "--gpu", "H100 SXM", "--rate", "5",
             "--isl", "512", "--osl", "64", "--num-requests", "200", "--format", "json",
             "--engine", "vllm-v0")
    assert v0.returncode == 0, v0.stderr
    old = json.loads(v0.stdout)
    # vLLM V0's CPU work per sequence (0.0975 ms) slows each step by a fraction of a ms at the
    # few sequences this load keeps running, and says so
    assert s["tpot_ms"]["p50"] < old["tpot_ms"]["p50"] < s["tpot_ms"]["p50"] + 1.0
    assert old["assumes"][-1] == ("vllm-v0: 0.0975 ms of engine CPU work per scheduled"
                                  " sequence a step (vLLM issue #6801's figure)")


def test_plan_on_vllm_v0_pays_its_cpu_work_per_sequence_in_every_step(tmp_path: Path) -> None:
    """Groups of 4 equal requests arriving together, 10 s apart, on one H100: every decode step
    runs the 4 alone, so each is longer by 4 x 0.0975 = 0.39 ms under vllm-v0 and so is the
    TPOT p95 (JSON p95s rounded to 0.001 ms). The 4 prompts (4 x 64 tokens) prefill in one
    step, which the vectorized simulation times as one chunk: one sequence, 0.0975 ms more."""
    reqs = tmp_path / "groups.csv"
    reqs.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(
        f"{10 * g},64,33\n" for g in range(40) for _ in range(4)))
    base = ("serving", "plan", "--hf-config", LLAMA3, "--requests", reqs, "--ttft-p95-ms",
            "1000", "--tpot-p95-ms", "100", "--gpus", "H100 SXM", "--max-gpus", "1",
            "--format", "json")
    r1, r0 = cli(*base), cli(*base, "--engine", "vllm-v0")
    assert r1.returncode == 0 and r0.returncode == 0, (r1.stderr, r0.stderr)
    v1, v0 = json.loads(r1.stdout), json.loads(r0.stdout)
    assert (v1["engine"], v0["engine"]) == ("vllm", "vllm-v0")
    a, b = v1["recommended"], v0["recommended"]
    assert (a["gpu"], a["tp"], a["replicas"]) == (b["gpu"], b["tp"], b["replicas"]) == (
        "H100 SXM", 1, 1)
    assert abs(b["tpot_p95_ms"] - a["tpot_p95_ms"] - 0.39) <= 0.0011
    assert abs(b["ttft_p95_ms"] - a["ttft_p95_ms"] - 0.0975) <= 0.0011
    assert v0["assumes"][-1] == ("vllm-v0: 0.0975 ms of engine CPU work per scheduled"
                                 " sequence a step (vLLM issue #6801's figure)")
    # V0 turns chunked prefill on by itself only past 32K-token contexts; the plan assumes it
    assert "--enable-chunked-prefill" in v0["vllm_args"]
    assert "--enable-chunked-prefill" not in v1["vllm_args"]
    text = cli(*base[:-2], "--engine", "vllm-v0")
    assert text.returncode == 0 and "vllm-v0: 0.0975 ms of engine CPU work" in text.stdout


def test_measured_rate_calibrates_every_step(tmp_path: Path) -> None:
    base = ("serving", "simulate", "--hf-config", LLAMA3, "--gpu", "H100 SXM", "--rate", "5",
            "--isl", "512", "--osl", "64", "--num-requests", "200", "--format", "json")
    plain = json.loads(cli(*base).stdout)
    measured = tmp_path / "bench.json"
    # a benchmark_serving.py result: its keys; this stack runs 30% slower than the model
    measured.write_text(json.dumps({
        "request_rate": 5, "num_prompts": 200, "total_input_tokens": 512 * 200,
        "total_output_tokens": 64 * 200, "median_tpot_ms": 1.3 * plain["tpot_ms"]["p50"],
        "median_ttft_ms": 1.3 * plain["ttft_ms"]["p50"]}))
    r = cli(*base, "--measured-rate", measured)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    cal = s["calibration"]
    assert cal["tpot_ms_p50_simulated"] == pytest.approx(cal["tpot_ms_p50_measured"], rel=4e-3)
    assert 1.2 < cal["factor"] < 1.45
    assert s["tpot_ms"]["p50"] == pytest.approx(1.3 * plain["tpot_ms"]["p50"], rel=0.02)
    assert s["calibrated_by"].startswith(f"{measured}: online run at 5 req/s")


@pytest.mark.parametrize(("args", "message"), [
    (("--rate", "5", "--isl", "512"), "missing --osl (or give --requests CSV)"),
    (("--rate", "-1", "--isl", "5", "--osl", "5"), "--rate: the request rate must be"),
    (("--requests", "REQ", "--rate", "5"), "give either --requests CSV or --rate"),
    (("--requests", "REQ"), "no column output_tokens in the header"),
    (("--rate", "5", "--isl", "5", "--osl", "5", "--measured-rate", "REQ"),
     "no request_rate or rate"),
    (("--rate", "5", "--isl", "5", "--osl", "5", "--max-num-seqs", "64",
      "--max-num-batched-tokens", "32"), "must be at least --max-num-seqs"),
])
def test_simulate_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...],
                                        message: str) -> None:
    req = tmp_path / "req.csv"
    req.write_text("arrival_s,prompt_tokens\n0,5\n")
    if "--measured-rate" in args:
        req.write_text(json.dumps({"median_tpot_ms": 5}))
    r = cli("serving", "simulate", "--hf-config", LLAMA3, "--gpu", "H100 SXM",
            *(str(req) if a == "REQ" else a for a in args))
    assert r.returncode == 1
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_measured_static_points_calibrate_the_simulation(tmp_path: Path) -> None:
    base = ("serving", "simulate", "--hf-config", LLAMA3, "--gpu", "H100 SXM", "--rate", "2",
            "--isl", "512", "--osl", "64", "--num-requests", "100", "--format", "json")
    pred = json.loads(cli("serving", "predict", "--hf-config", LLAMA3, "--gpu", "H100 SXM",
                          "--batch", "8", "--isl", "512", "--osl", "64", "--format",
                          "json").stdout)["predictions"][0]
    points = tmp_path / "m.csv"
    # a stack twice as slow as the model on this point
    points.write_text("gpu,tp,batch,isl,osl,ttft_ms,tpot_ms\n"
                      f"H100 SXM,1,8,512,64,{2 * pred['ttft_ms']},{2 * pred['tpot_ms']}\n")
    plain = json.loads(cli(*base).stdout)
    r = cli(*base, "--measured", points)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["calibrated_by"] and s["calibrated_by"] != plain["calibrated_by"]
    assert s["tpot_ms"]["p50"] > 1.5 * plain["tpot_ms"]["p50"]
    both = cli(*base, "--measured", points, "--measured-rate", points)
    assert both.returncode == 1
    assert both.stderr == "rightsize: error: give --measured or --measured-rate, not both\n"


def test_plan_from_a_requests_csv(tmp_path: Path) -> None:
    # 121 requests 0.5 s apart: (121 - 1) / 60 s = 2 req/s; one length, so no mixed option
    req = tmp_path / "req.csv"
    req.write_text("arrival_s,prompt_tokens,output_tokens\n"
                   + "".join(f"{100 + 0.5 * i},256,64\n" for i in range(121)))
    r = cli("serving", "plan", "--hf-config", LLAMA3, "--requests", req, "--ttft-p95-ms",
            "2000", "--tpot-p95-ms", "100", "--gpus", "L4", "--max-gpus", "4", "--format",
            "json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert (p["rate_per_s"], p["isl_mean"], p["osl_mean"]) == (2.0, 256.0, 64.0)
    assert p["load"] == "req.csv: 121 requests" and p["requests_simulated"] == 121
    assert p["mixed"] is None
    assert p["mixed_note"] == "no mixed-GPU option: every request has the same length"
