"""vLLM's Prometheus metrics as a calibration point, against a real Prometheus (Debian's, on
127.0.0.1, backfilled with 40 minutes of a replica serving 32 sequences at a 20 ms TPOT)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rightsize.analyzers.serving.step import Deployment
from rightsize.catalog import load_catalog
from rightsize.cli.serving_prometheus import prometheus_observations, window_s
from rightsize.errors import RightsizeError
from tests.fleet_metrics.promserver import backfill, openmetrics, serve
from tests.serving.test_serving_ops import LLAMA

RUNNING, TPOT_S, PROMPT, OUTPUT = 32, 0.020, 1000, 200
TOKENS_PER_S = RUNNING / TPOT_S  # 1600: one token per running sequence a step
REQUESTS_PER_S = TOKENS_PER_S / OUTPUT  # 8


def _series(now: float):
    ts = [now - 2400 + 15 * i for i in range(157)]  # 40 min at 15 s, ending a minute ago
    t0 = ts[0]
    lab = {"model_name": "llama", "instance": "vllm-0:8000"}

    def counter(name: str, per_s: float):
        return (name, lab, [(t, (t - t0) * per_s) for t in ts])

    return [("vllm:num_requests_running", lab, [(t, float(RUNNING)) for t in ts]),
            counter("vllm:generation_tokens_total", TOKENS_PER_S),
            counter("vllm:prompt_tokens_total", REQUESTS_PER_S * PROMPT),
            counter("vllm:time_per_output_token_seconds_sum", TOKENS_PER_S * TPOT_S),
            counter("vllm:time_per_output_token_seconds_count", TOKENS_PER_S),
            counter("vllm:time_to_first_token_seconds_count", REQUESTS_PER_S)]


def test_the_mean_decode_step_of_a_window(tmp_path: Path) -> None:
    from rightsize.analyzers.sizing.hf_config import from_hf_config

    text = openmetrics(_series(time.time() - 60), tmp_path / "vllm.om")
    backfill(text, tmp_path / "data")
    with serve(tmp_path / "data", tmp_path / "p.log") as url:
        obs = prometheus_observations(url, from_hf_config(LLAMA), "bf16", load_catalog(),
                                      None, "H100 SXM", 2, "30m")  # type: ignore[arg-type]
    [o] = obs
    assert o.deployment == Deployment("H100 SXM", 2, 1, "bf16")
    assert o.ms == pytest.approx(TPOT_S * 1e3, rel=1e-6)
    assert o.decode_seqs == RUNNING
    assert o.kv_mean == pytest.approx(PROMPT + OUTPUT / 2, rel=1e-6)
    # prompt tokens prefilled between decode steps: 8,000/s over 50 steps/s
    assert o.mixed_prefill_tokens == pytest.approx(REQUESTS_PER_S * PROMPT / (TOKENS_PER_S
                                                                              / RUNNING))
    assert o.source == f"{url}: vLLM metrics over 30m"


def test_windows() -> None:
    assert (window_s("30m"), window_s("2h"), window_s(" 1d ")) == (1800, 7200, 86400)
    with pytest.raises(RightsizeError, match="--measured-window: '0m' is not a duration"):
        window_s("0m")
