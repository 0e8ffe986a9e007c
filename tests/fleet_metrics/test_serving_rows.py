"""fleet metrics' serving rows against a real Prometheus (Debian's, on 127.0.0.1, backfilled
with promtool as the other fleet-metrics tests do) holding generated vLLM histogram series and
the dcgm-exporter series of the same pods: the p95s worked by hand from the buckets, the SLO
check, the calibrated plan; histogram_quantile against Prometheus' own."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rightsize.analyzers.fleet_metrics.serving import histogram_quantile
from tests.conftest import SAMPLES, cli
from tests.fleet_metrics.gen import pod as dcgm_pod
from tests.fleet_metrics.promserver import backfill, openmetrics, serve

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
STEP_S = 60
N = 7 * 60 + 1  # seven hours at 60 s (the GPU rows need six)
PODS = ("llm-7d4b9c6f5d-x2x4z", "llm-7d4b9c6f5d-q8m2n")
RATE = 2.0  # requests/s per pod
# cumulative shares of requests at or under each bucket bound (seconds)
TTFT = {0.05: 0.1, 0.1: 0.4, 0.25: 0.8, 0.5: 0.9, 1.0: 0.96, 2.5: 0.99, math.inf: 1.0}
TPOT = {0.01: 0.05, 0.025: 0.3, 0.05: 0.7, 0.075: 0.9, 0.1: 0.97, 0.5: 1.0, math.inf: 1.0}
H100 = "NVIDIA H100 80GB HBM3"


def vllm_series(pod: str) -> list[tuple[str, dict[str, str], list[tuple[float, float]]]]:
    base = {"namespace": "ml", "pod": pod, "model_name": "meta-llama/Meta-Llama-3-8B"}
    times = [T0 + STEP_S * i for i in range(N)]
    done = [RATE * STEP_S * i for i in range(N)]  # counters rising linearly from 0
    out = []
    for name, cdf in (("vllm:time_to_first_token_seconds_bucket", TTFT),
                      ("vllm:time_per_output_token_seconds_bucket", TPOT)):
        for le, share in cdf.items():
            labels = {**base, "le": "+Inf" if le == math.inf else repr(le)}
            out.append((name, labels, [(t, d * share) for t, d in zip(times, done, strict=True)]))
    for name, per in (("vllm:request_success_total", 1.0), ("vllm:prompt_tokens_total", 500.0),
                      ("vllm:generation_tokens_total", 200.0)):
        out.append((name, base, [(t, d * per) for t, d in zip(times, done, strict=True)]))
    out.append(("vllm:gpu_cache_usage_perc", base,
                [(t, 0.25 if i % 10 else 0.4) for i, t in enumerate(times)]))
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("prom-serving")
    series = []
    for i, p in enumerate(PODS):
        series += vllm_series(p)
        for name, labels, points in dcgm_pod(p, f"node-{i}", (70000, 72000), (80, 90), None,
                                             n=N // 5 + 1):
            series.append((name, {**labels, "modelName": H100}, points))
    backfill(openmetrics(series, d / "vllm.om"), d / "data")
    with serve(d / "data", d / "prometheus.log") as url:
        yield url


def test_histogram_quantile_worked_by_hand() -> None:
    # rank 0.95 falls in (0.5, 1.0]: 0.5 + 0.5 x (0.95 - 0.9) / (0.96 - 0.9)
    assert histogram_quantile(0.95, TTFT) == (pytest.approx(0.5 + 0.5 * 0.05 / 0.06), False)
    assert histogram_quantile(0.5, TPOT) == (pytest.approx(0.025 + 0.025 * 0.2 / 0.4), False)
    # in the +Inf bucket: the highest finite bound, flagged
    assert histogram_quantile(0.995, {1.0: 0.9, math.inf: 1.0}) == (1.0, True)
    assert histogram_quantile(0.5, {math.inf: 0.0}) is None


def test_serving_rows_from_prometheus(prom: str, tmp_path: Path) -> None:
    out = cli("fleet", "metrics", "--prometheus", prom, "--start", str(T0),
              "--end", str(T0 + STEP_S * (N - 1)), "--step", "300s", "--format", "json",
              "--slo", "ttft_p95_ms=1000,tpot_p95_ms=100",
              "--hf-config", f"meta-llama/Meta-Llama-3-8B={SAMPLES / 'configs/Meta-Llama-3-8B.json'}",
              "-q", cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [r["workload"] for r in data["rows"]] == ["ml/llm"]
    (row,) = data["serving"]
    assert (row["workload"], row["engine"], row["model_name"], row["pods"]) == \
        ("ml/llm", "vllm", "meta-llama/Meta-Llama-3-8B", 2)
    # both pods summed; every bucket rises in proportion, so the quantiles are the CDF's
    assert row["ttft_p95_ms"] == pytest.approx(1000 * (0.5 + 0.5 * 0.05 / 0.06), abs=0.01)
    assert row["ttft_p50_ms"] == pytest.approx(1000 * (0.1 + 0.15 * 0.1 / 0.4), abs=0.01)
    assert row["tpot_p95_ms"] == pytest.approx(1000 * (0.075 + 0.025 * 0.05 / 0.07), abs=0.01)
    assert row["tpot_p50_ms"] == pytest.approx(37.5, abs=0.01)
    assert row["rate_per_s"] == pytest.approx(2 * RATE, rel=0.01)
    assert (row["isl_mean"], row["osl_mean"]) == (500.0, 200.0)
    assert row["kv_cache_peak_pct"] == 40.0
    assert row["meets_slo"] is True and row["why"].startswith("meets the SLO")
    assert (row["gpu"], row["gpus_per_pod"]) == ("H100 SXM", 1)
    # two H100s at the catalog's cheapest H100 SXM price
    assert row["cost_per_hour_now_usd"] == pytest.approx(2 * 2.99)
    assert row["calibrated_by"].startswith("the workload's vLLM metrics: online run at 2 req/s"
                                           " (TPOT p50 37.5 ms): every step x")
    assert row["recommended"] and row["recommended_tpot_p95_ms"] <= 100
    assert row["recommended_ttft_p95_ms"] <= 1000
    text = cli("fleet", "metrics", "--prometheus", prom, "--start", str(T0),
               "--end", str(T0 + STEP_S * (N - 1)), "--step", "300s", "-q", cwd=tmp_path)
    assert "Serving (vLLM/SGLang metrics):" in text.stdout
    assert "no --slo ttft_p95_ms=..,tpot_p95_ms=..: the measured p95s only" in text.stdout


@pytest.mark.parametrize("slo", ["ttft_p95_ms=1000", "ttft=5,tpot_p95_ms=5",
                                 "ttft_p95_ms=-1,tpot_p95_ms=5"])
def test_a_bad_slo_is_one_line(slo: str, tmp_path: Path) -> None:
    out = cli("fleet", "metrics", "--from", "x.csv", "--slo", slo, cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("rightsize: error: --slo:")
