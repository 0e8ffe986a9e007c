"""The plan search's fast path: p95 TTFT and TPOT of a continuous-batching replica from a
fluid fixed point and queueing formulas, vectorized over configurations.

Input: a step-time function (``StepModel.step_ms_vec``) and arrays, one element per
configuration, of the per-replica arrival rate, ``max_num_seqs``, ``max_num_batched_tokens``
and KV cache tokens, with the load's mean prompt and output lengths (and a long prompt for the
TTFT tail). Output: :class:`Estimate` arrays. Pure.

The model (every symbol per replica; tau the mean step time):

- decoding requests ``B = lam (O - 1) tau`` (Little), KV ``K = B (I + O / 2)``;
- a decode step takes ``S_d = S(0, 0, B, K)``; a prompt adds ``E = S(I, 0, B, K) - S_d`` once
  (its chunks' extra time, to first order independent of chunking);
- per second ``1 / tau`` steps and ``lam`` prompts fill the time: ``tau = S_d / (1 - lam E)``,
  solved by fixed-point iteration from below (it converges to the least fixed point, or
  diverges when the load is over capacity);
- TPOT: a request's mean gap over its ``O - 1`` decodes, ``S_d`` plus the prompts that arrive
  during its life (Poisson, ``lam (O - 1) tau`` of them, ``E`` each) spread over its tokens,
  plus the decode batch's own fluctuation (Poisson count, time-averaged over a life:
  variance ``2 B / 3``); p95 = mean + 1.645 sd;
- TTFT: the rest of the step under way (``tau / 2``), its own prefill (chunks of
  ``max_num_batched_tokens - B`` tokens, each a decode step, plus ``E``), the wait for a seat
  when the running requests are bounded by ``max_num_seqs`` or the KV cache (Erlang C with
  ``c`` seats and a seat held for prefill plus ``(O - 1) tau``: p95 of the exponential tail)
  and the wait for the token budget (M/D/1 on prompt tokens, Kingman's exponential tail).

It is a screen: the plan re-checks the configurations it keeps with the full simulation
(:mod:`rightsize.analyzers.serving.simulate`); ``benchmarks/serving_plan.py`` measures how far
apart the two are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

StepVec = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
Z95 = 1.6448536269514722  # standard normal 95th percentile
ITERATIONS = 80  # fixed-point iterations (converged well before at loads under 95%)
CONVERGED = 1e-3  # relative change under which the fixed point is taken as found


@dataclass(frozen=True, slots=True)
class Estimate:
    """Arrays over configurations; times in ms, ``stable`` False when over capacity."""

    stable: np.ndarray
    step_ms: np.ndarray
    batch: np.ndarray
    tpot_p95_ms: np.ndarray
    ttft_p95_ms: np.ndarray
    utilization: np.ndarray  # the tightest of prefill time, seats and KV, 0-1


def erlang_c(servers: np.ndarray, offered: np.ndarray) -> np.ndarray:
    """Probability that an arrival waits in an M/M/c queue (``offered`` < ``servers``), by
    the Erlang B recursion (stable for thousands of servers)."""
    c = servers.astype(np.int64)
    b = np.ones_like(offered, dtype=np.float64)
    out = np.zeros_like(b)
    for k in range(1, int(c.max(initial=0)) + 1):
        b = offered * b / (k + offered * b)
        at = c == k
        out[at] = b[at]
    rho = offered / np.maximum(c, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = out / (1.0 - rho * (1.0 - out))
    return np.clip(np.nan_to_num(wait, nan=1.0), 0.0, 1.0)


def _p95_exponential(p_wait: np.ndarray, mean_if_wait_ms: np.ndarray) -> np.ndarray:
    """p95 of a wait that is 0 with probability ``1 - p_wait``, else exponential."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = mean_if_wait_ms * np.log(p_wait / 0.05)
    return np.where(p_wait > 0.05, tail, 0.0)


def evaluate(step: StepVec, lam: np.ndarray, mns: np.ndarray, mnbt: np.ndarray,
             kv_tokens: np.ndarray, isl: float, osl: float, isl_high: float) -> Estimate:
    """The fast estimate for every configuration (arrays broadcast to one length)."""
    lam, mns, mnbt, kv_tokens = np.broadcast_arrays(
        np.asarray(lam, np.float64), np.asarray(mns, np.float64),
        np.asarray(mnbt, np.float64), np.asarray(kv_tokens, np.float64))
    n = lam.size
    zeros = np.zeros(n, np.int64)
    prompt = np.full(n, int(round(isl)), np.int64)
    lam_ms = lam / 1000.0
    decodes = max(osl - 1.0, 0.0)
    kv_per_seq = isl + osl / 2.0
    seats = np.maximum(np.minimum(mns, np.floor(kv_tokens / (isl + osl))), 1.0)

    def at(tau: np.ndarray) -> tuple[np.ndarray, ...]:
        b = np.minimum(lam_ms * decodes * tau, seats)
        bi = np.maximum(np.round(b), 0).astype(np.int64)
        kv = (bi * kv_per_seq).astype(np.int64)
        sd = step(zeros, zeros, bi, kv)
        extra = np.maximum(step(prompt, zeros, bi, kv) - sd, 0.0)
        return b, sd, extra

    tau = step(zeros, zeros, np.ones(n, np.int64), np.full(n, int(kv_per_seq), np.int64))
    tau = np.asarray(tau, np.float64)
    diverged = np.zeros(n, bool)
    for _ in range(ITERATIONS):
        b, sd, extra = at(tau)
        load = lam_ms * extra
        new = np.where(load < 1.0, sd / np.maximum(1.0 - load, 1e-9), np.inf)
        diverged |= ~np.isfinite(new)
        tau = np.where(diverged, tau, new)
    b, sd, extra = at(tau)
    new = sd / np.maximum(1.0 - lam_ms * extra, 1e-9)
    converged = ~diverged & (np.abs(new - tau) <= CONVERGED * tau)
    # d(decode step)/d(batch) at the operating point, over 8 more sequences
    more = np.maximum(np.round(b), 0).astype(np.int64) + 8
    slope = (step(zeros, zeros, more, (more * kv_per_seq).astype(np.int64)) - sd) / 8.0
    return _latencies(lam_ms, tau, b, sd, extra, np.maximum(slope, 0.0), seats, mnbt, isl,
                      osl, isl_high, converged)


def _latencies(lam_ms: np.ndarray, tau: np.ndarray, b: np.ndarray, sd: np.ndarray,
               extra: np.ndarray, slope: np.ndarray, seats: np.ndarray, mnbt: np.ndarray, isl: float,
               osl: float, isl_high: float, converged: np.ndarray) -> Estimate:
    decodes = max(osl - 1.0, 1.0)
    # TPOT: prompts arriving during a request's decodes, and the batch's own fluctuation
    life = decodes * tau
    arrivals = lam_ms * life
    var_prompts = arrivals * (extra / decodes) ** 2
    tpot = tau + Z95 * np.sqrt(var_prompts + slope**2 * (2.0 / 3.0) * b)
    # TTFT: residual step, own prefill chunks, a seat, the token budget
    room = np.maximum(mnbt - b, 1.0)
    chunks = np.ceil(isl_high / room)
    own = chunks * sd + extra * (isl_high / max(isl, 1.0))
    hold = own + life
    offered = lam_ms * hold
    seat_util = offered / seats
    p_wait = erlang_c(seats, np.minimum(offered, seats * 0.999))
    seat_wait = _p95_exponential(p_wait, hold / np.maximum(seats - offered, 1e-9))
    token_rate = room / np.maximum(sd + extra * room / max(isl, 1.0), 1e-9)  # tokens per ms
    rho_tok = lam_ms * isl / token_rate
    service = isl / token_rate
    budget_wait = _p95_exponential(rho_tok, service / np.maximum(2 * (1 - rho_tok), 1e-9))
    ttft = 0.5 * tau + own + seat_wait + budget_wait
    util = np.maximum.reduce([lam_ms * extra, seat_util, rho_tok])
    stable = converged & (seat_util < 1.0) & (rho_tok < 1.0)
    inf = np.full_like(tau, np.inf)
    return Estimate(stable, np.where(stable, tau, inf), b, np.where(stable, tpot, inf),
                    np.where(stable, ttft, inf), util)
