"""What vLLM and SGLang publish about their requests, read from Prometheus over a window.

Role: the conversion boundary of ``fleet metrics``' serving rows. For each engine (its metric
prefix ``vllm:`` or ``sglang:``) one instant query per metric at the window's end, summed per
pod (``namespace``, ``pod``, the served ``model_name``): the increase over the window of the
time-to-first-token and time-per-output-token histogram buckets (seconds, ``le`` in seconds),
of the finished requests and of the prompt and generated tokens, and the KV cache's peak use.
``increase`` is Prometheus' own (counter resets handled). Output: :class:`PodServing` per pod
that served any request. Engines renamed metrics across versions; each quantity is the first of
its names that answers (vLLM: ``time_per_output_token_seconds``, later
``request_time_per_output_token_seconds``; ``gpu_cache_usage_perc``, later
``kv_cache_usage_perc``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from rightsize.traces.prometheus import Query, instant_vector, matchers

ENGINES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "ttft": ("vllm:time_to_first_token_seconds",),
        "tpot": ("vllm:time_per_output_token_seconds",
                 "vllm:request_time_per_output_token_seconds"),
        "requests": ("vllm:request_success_total",),
        "prompt": ("vllm:prompt_tokens_total",),
        "generation": ("vllm:generation_tokens_total",),
        "kv": ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
    },
    "sglang": {
        "ttft": ("sglang:time_to_first_token_seconds",),
        "tpot": ("sglang:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"),
        "requests": ("sglang:num_requests_total",),
        "prompt": ("sglang:prompt_tokens_total",),
        "generation": ("sglang:generation_tokens_total",),
        "kv": ("sglang:token_usage",),
    },
}
BY = ("namespace", "pod", "model_name")


@dataclass
class PodServing:
    engine: str
    labels: dict[str, str]  # namespace, pod, model_name (those the series have)
    window_s: float
    ttft_buckets: dict[float, float] = field(default_factory=dict)  # le (s) -> count
    tpot_buckets: dict[float, float] = field(default_factory=dict)
    requests: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    kv_peak_pct: float | None = None
    metrics: list[str] = field(default_factory=list)


def _le(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


def _probe(q: Query, window: int) -> bool:
    """One query: does any engine's TTFT histogram have a series in the window?"""
    names = "|".join(n for e in ENGINES.values() for n in e["ttft"])
    sel = matchers(q.selector)
    inner = f'__name__=~"({names})_bucket"' + ("," + sel[1:-1] if sel else "")
    return bool(instant_vector(q, f"count(last_over_time({{{inner}}}[{window}s]))"))


def fetch(q: Query) -> list[PodServing]:
    """Every pod that served requests in the window, for each engine that answers (one probe
    query first: nothing more is asked of a Prometheus without serving metrics)."""
    window = max(round(q.end_s - q.start_s), 1)
    if not _probe(q, window):
        return []
    sel = matchers(q.selector)
    pods: dict[tuple[str, ...], PodServing] = {}

    def first(names: tuple[str, ...], expr: Callable[[str], str], by: tuple[str, ...]
              ) -> tuple[str, list[tuple[dict[str, str], float]]]:
        for name in names:
            got = instant_vector(q, f"sum by ({', '.join(by)}) ({expr(name)})")
            if got:
                return name, got
        return "", []

    def increase(m: str) -> str:
        return f"increase({m}{sel}[{window}s])"

    for engine, names in ENGINES.items():
        for key in ("ttft", "tpot"):
            name, got = first(tuple(n + "_bucket" for n in names[key]), increase, (*BY, "le"))
            for labels, v in got:
                p = _pod(pods, engine, labels, window)
                getattr(p, f"{key}_buckets")[_le(labels.get("le", "+Inf"))] = v
                _note(p, name)
        for key in ("requests", "prompt", "generation"):
            name, got = first(names[key], increase, BY)
            for labels, v in got:
                p = _pod(pods, engine, labels, window)
                setattr(p, "requests" if key == "requests" else f"{key}_tokens", v)
                _note(p, name)
        name, got = first(names["kv"], lambda m: f"max_over_time({m}{sel}[{window}s])", BY)
        for labels, v in got:
            p = _pod(pods, engine, labels, window)
            p.kv_peak_pct = 100.0 * v
            _note(p, name)
    return [p for p in pods.values() if p.ttft_buckets or p.requests]


def _pod(pods: dict[tuple[str, ...], PodServing], engine: str, labels: dict[str, str],
         window: float) -> PodServing:
    keep = {k: labels[k] for k in BY if labels.get(k)}
    key = (engine, *(keep.get(k, "") for k in BY))
    if key not in pods:
        pods[key] = PodServing(engine, keep, window)
    return pods[key]


def _note(p: PodServing, name: str) -> None:
    if name and name not in p.metrics:
        p.metrics.append(name)
