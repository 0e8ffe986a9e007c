"""Measured online serving runs: a vLLM ``benchmark_serving.py`` result JSON, or the short form
``{"gpu", "tp", "rate", "tpot_ms_p50", "ttft_ms_p50"}``.

Input: the parsed JSON (a mapping) and the file's name. Output: a frozen :class:`MeasuredRun`
(rate in requests/s, ``inf`` when every request was sent at once; medians in ms; the prompt and
output lengths when the file has them). ``benchmark_serving.py`` writes ``request_rate``,
``median_tpot_ms``, ``median_ttft_ms``, ``num_prompts``, ``total_input_tokens``,
``total_output_tokens`` and, with ``--save-detailed``, ``input_lens``/``output_lens``; it names
neither the GPU nor the tensor-parallel degree, so those may be added to the file (``gpu``,
``tp``) or are taken from the deployment being simulated. One-line :class:`InputError` on
anything else. Pure (the CLI reads the file).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rightsize.errors import InputError


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    rate_per_s: float  # inf: all requests at once
    tpot_ms_p50: float
    ttft_ms_p50: float | None
    gpu: str | None
    tp: int | None
    num_prompts: int | None
    isl_mean: float | None
    osl_mean: float | None
    input_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    max_concurrency: int | None
    source: str


def _number(data: Mapping[str, Any], keys: tuple[str, ...], name: str,
            required: bool) -> float | None:
    for k in keys:
        v = data.get(k)
        if v is None:
            continue
        if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
            return math.inf
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(name, f"{k} is {v!r}, not a number")
        return float(v)
    if required:
        raise InputError(name, f"no {' or '.join(keys)}: expected a benchmark_serving.py result"
                               " or {\"gpu\", \"tp\", \"rate\", \"tpot_ms_p50\", \"ttft_ms_p50\"}")
    return None


def _lens(data: Mapping[str, Any], key: str, name: str) -> tuple[int, ...]:
    v = data.get(key)
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, int) and x >= 0 for x in v):
        raise InputError(name, f"{key} is not a list of token counts")
    return tuple(v)


def read(data: object, name: str) -> MeasuredRun:
    if not isinstance(data, Mapping):
        raise InputError(name, "a measured run is a JSON object")
    rate = _number(data, ("request_rate", "rate"), name, True)
    tpot = _number(data, ("median_tpot_ms", "tpot_ms_p50"), name, True)
    ttft = _number(data, ("median_ttft_ms", "ttft_ms_p50"), name, False)
    assert rate is not None and tpot is not None
    if not rate > 0 or not tpot > 0 or (ttft is not None and not ttft > 0):
        raise InputError(name, "the rate and the medians must be positive")
    n = _number(data, ("num_prompts", "completed"), name, False)
    total_in = _number(data, ("total_input_tokens",), name, False)
    total_out = _number(data, ("total_output_tokens",), name, False)
    tp = data.get("tp")
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise InputError(name, f"tp is {tp!r}, not a whole number of at least 1")
    gpu = data.get("gpu")
    if gpu is not None and not isinstance(gpu, str):
        raise InputError(name, f"gpu is {gpu!r}, not a catalog GPU name")
    conc = data.get("max_concurrency")
    return MeasuredRun(
        rate, tpot, ttft, gpu, tp, int(n) if n else None,
        total_in / n if total_in and n else None, total_out / n if total_out and n else None,
        _lens(data, "input_lens", name), _lens(data, "output_lens", name),
        conc if isinstance(conc, int) and not isinstance(conc, bool) and conc > 0 else None,
        name)
