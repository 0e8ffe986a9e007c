"""vLLM's Prometheus metrics as one calibration point: the mean decode step of a replica over a
window, from ``vllm:time_per_output_token_seconds`` with the batch it ran at
(``vllm:num_requests_running``), the prompt tokens prefilled between decode steps and the mean
KV length (prompt and generation token counters), through the Prometheus client ``fleet
metrics`` uses (:mod:`rightsize.traces.prometheus`). TTFT is not used: under load it includes
queueing, which is not a step's time."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rightsize.analyzers.serving.calibrate import Observation
    from rightsize.analyzers.serving.step import ModelConfig
    from rightsize.analyzers.serving.tables import Tables
    from rightsize.catalog import Catalog

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def window_s(text: str) -> int:
    """'30m' -> 1800; one-line error for anything else."""
    from rightsize.errors import RightsizeError

    m = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text or "")
    if not m or int(m.group(1)) == 0:
        raise RightsizeError(f"--measured-window: {text!r} is not a duration such as 30m, 2h"
                             " or 1d")
    return int(m.group(1)) * _UNITS[m.group(2)]


def queries(w: int) -> dict[str, str]:
    r = f"[{w}s]"
    return {
        "tpot_s": f"sum(rate(vllm:time_per_output_token_seconds_sum{r}))"
                  f" / sum(rate(vllm:time_per_output_token_seconds_count{r}))",
        "running": f"avg(avg_over_time(vllm:num_requests_running{r}))",
        "replicas": "count(vllm:num_requests_running)",
        "prompt_per_s": f"sum(rate(vllm:prompt_tokens_total{r}))",
        "generated_per_s": f"sum(rate(vllm:generation_tokens_total{r}))",
        "requests_per_s": f"sum(rate(vllm:time_to_first_token_seconds_count{r}))",
    }


def prometheus_observations(url: str, config: ModelConfig, precision: str, catalog: Catalog,
                            tables: Tables, gpu: str | None, tp: int | None,
                            window: str) -> list[Observation]:
    """The mean decode step over ``window`` as one observation (a step of ``running``
    sequences at the mean KV length with the prompt tokens prefilled per step)."""
    from rightsize.analyzers.serving.calibrate import Observation
    from rightsize.analyzers.serving.step import Deployment
    from rightsize.errors import RightsizeError
    from rightsize.traces.prometheus import Query, check_url, instant_value

    if not gpu or not tp:
        raise RightsizeError("a Prometheus --measured needs --measured-gpu and --measured-tp:"
                             " vLLM's metrics do not say which GPU served them")
    w = window_s(window)
    now = time.time()
    q = Query(check_url(url), now - w, now, float(w))
    answers = {k: instant_value(q, v) for k, v in queries(w).items()}
    missing = [k for k in ("tpot_s", "running", "generated_per_s", "requests_per_s")
               if not answers[k]]
    got = {k: v or 0.0 for k, v in answers.items()}
    if missing:
        raise RightsizeError(f"{url}: no vLLM serving in the last {window} ({', '.join(missing)}"
                             " missing: are vllm:* metrics scraped?)")
    replicas = max(1.0, got["replicas"])
    running = max(1.0, got["running"])
    steps_per_s = got["generated_per_s"] / replicas / running  # one token per sequence a step
    prompt = got["prompt_per_s"] / got["requests_per_s"]
    output = got["generated_per_s"] / got["requests_per_s"]
    chunk = got["prompt_per_s"] / replicas / steps_per_s
    dep = Deployment(catalog.gpu(gpu).name, tp, 1, precision)
    del config, tables
    return [Observation(dep, got["tpot_s"] * 1e3, decode_seqs=round(running),
                        kv_mean=prompt + output / 2, mixed_prefill_tokens=chunk,
                        source=f"{url}: vLLM metrics over {window}")]
