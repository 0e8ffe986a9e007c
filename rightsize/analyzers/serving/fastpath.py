"""The plan search's fast path: p95 TTFT and TPOT of a continuous-batching replica from a
fluid fixed point and queueing formulas, vectorized over configurations.

Input: one deployment's :class:`Curves` (its step times at every decode batch for this load,
from ``StepModel.step_ms_vec`` in three vectorized calls) and arrays, one element per
configuration, of the per-replica arrival rate, ``max_num_seqs``, ``max_num_batched_tokens``
and KV cache tokens, with the load's mean prompt and output lengths (and a long prompt for the
TTFT tail). Output: :class:`Estimate` arrays. Pure.

The model (every symbol per replica; tau the mean step time):

- decoding requests ``B = lam (O - 1) tau`` (Little); a running request decodes in a batch of
  itself and those, ``1 + B``, each holding ``I + O / 2`` tokens of KV on average;
- a decode step takes ``S_d = S(0, 0, B, K)``; a prompt adds ``E = S(I, 0, B, K) - S_d`` once
  (its chunks' extra time, to first order independent of chunking);
- per second ``1 / tau`` steps and ``lam`` prompts fill the time: ``tau = S_d / (1 - lam E)``,
  solved by fixed-point iteration from below (it converges to the least fixed point, or
  diverges when the load is over capacity);
- TPOT: a request's mean gap over its ``O - 1`` decodes, ``S_d`` plus the prompts that arrive
  during its life (Poisson, ``lam (O - 1) tau`` of them, ``E`` each) spread over its tokens,
  plus the decode batch's own fluctuation (Poisson count, time-averaged over a life:
  variance ``2 B / 3``); p95 = mean + 1.645 sd;
- TTFT: the rest of the step under way (length-biased: steps carrying prompts are longer), its
  own prefill (chunks of ``max_num_batched_tokens - B`` tokens, each a decode step, plus ``E``,
  plus the prompts that arrived beside it), mean + 1.645 sd of those, and the wait for a seat
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


@dataclass(frozen=True, slots=True)
class Curves:
    """One deployment's step times at every decode batch 0..max, for one load: a decode step
    (KV ``I + O / 2`` per sequence), and the extra of a mean and of a long prompt."""

    decode_ms: np.ndarray
    prompt_ms: np.ndarray  # S(I, 0, B, K) - S(0, 0, B, K)
    long_prompt_ms: np.ndarray  # the same for the long prompt

    @staticmethod
    def of(step: StepVec, max_batch: int, isl: float, osl: float, isl_high: float) -> Curves:
        b = np.arange(max_batch + 1, dtype=np.int64)
        n = b.size
        kv = np.round(b * (isl + osl / 2.0)).astype(np.int64)
        prompts = [0, max(round(isl), 1), max(round(isl_high), 1)]
        # one vectorized call: decode-only, with the mean prompt, with the long prompt
        ms = np.asarray(step(np.repeat(prompts, n), np.zeros(3 * n, np.int64), np.tile(b, 3),
                             np.tile(kv, 3)), np.float64).reshape(3, n)
        return Curves(ms[0], np.maximum(ms[1] - ms[0], 0.0), np.maximum(ms[2] - ms[0], 0.0))

    def at(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(decode step, prompt extra, long prompt extra, d(decode step)/d(batch)) at
        fractional batches, interpolated between whole ones."""
        x = np.arange(self.decode_ms.size, dtype=np.float64)
        sd = np.interp(batch, x, self.decode_ms)
        slope = np.interp(batch, x[:-1] + 0.5, np.diff(self.decode_ms)) \
            if self.decode_ms.size > 1 else np.zeros_like(batch)
        return (sd, np.interp(batch, x, self.prompt_ms), np.interp(batch, x,
                                                                   self.long_prompt_ms), slope)


def evaluate(curves: Curves, lam: np.ndarray, mns: np.ndarray, mnbt: np.ndarray,
             kv_tokens: np.ndarray, isl: float, osl: float, isl_high: float) -> Estimate:
    """The fast estimate for every configuration (arrays broadcast to one length)."""
    lam, mns, mnbt, kv_tokens = np.broadcast_arrays(
        np.asarray(lam, np.float64), np.asarray(mns, np.float64),
        np.asarray(mnbt, np.float64), np.asarray(kv_tokens, np.float64))
    lam_ms = lam / 1000.0
    decodes = max(osl - 1.0, 0.0)
    # vLLM admits on the KV the running requests hold now (they grow as they decode), so a
    # seat holds the mean occupancy, I + O / 2
    seats = np.maximum(np.minimum(mns, np.floor(kv_tokens / (isl + osl / 2.0))), 1.0)
    top = float(curves.decode_ms.size - 1)

    def batch(tau: np.ndarray) -> np.ndarray:
        # the batch a running request sees: itself and the time-average others (an arrival
        # sees the time average: Poisson arrivals see time averages)
        return np.minimum(np.minimum(1.0 + lam_ms * decodes * tau, seats), top)

    tau = np.full(lam.shape, curves.decode_ms[min(1, int(top))])
    diverged = np.zeros(lam.shape, bool)
    done = np.zeros(lam.shape, bool)
    for _ in range(ITERATIONS):
        sd, extra, _, _ = curves.at(batch(tau))
        load = lam_ms * extra
        new = np.where(load < 1.0, sd / np.maximum(1.0 - load, 1e-9), np.inf)
        diverged |= ~np.isfinite(new)
        done = diverged | (np.abs(new - tau) <= CONVERGED * tau)
        tau = np.where(diverged, tau, new)
        if done.all():
            break
    b = batch(tau)
    sd, extra, extra_long, slope = curves.at(b)
    converged = ~diverged & done
    return _latencies(lam_ms, tau, b, sd, extra, extra_long, np.maximum(slope, 0.0), seats,
                      mnbt, isl, osl, isl_high, converged)


def _latencies(lam_ms: np.ndarray, tau: np.ndarray, b: np.ndarray, sd: np.ndarray,
               extra: np.ndarray, extra_long: np.ndarray, slope: np.ndarray, seats: np.ndarray, mnbt: np.ndarray, isl: float,
               osl: float, isl_high: float, converged: np.ndarray) -> Estimate:
    decodes = max(osl - 1.0, 1.0)
    # TPOT: prompts arriving during a request's decodes, and the batch's own fluctuation
    life = decodes * tau
    arrivals = lam_ms * life
    var_prompts = arrivals * (extra / decodes) ** 2
    tpot = tau + Z95 * np.sqrt(var_prompts + slope**2 * (2.0 / 3.0) * b)
    # TTFT: the rest of the step under way (length-biased: a step with prompts in it is
    # longer), its own prefill step(s) with the prompts that arrived beside it, a seat, the
    # token budget
    per_step = lam_ms * tau  # prompts arriving during one step
    mean_len = sd + extra * per_step
    biased = (mean_len**2 + extra**2 * per_step) / np.maximum(mean_len, 1e-9)
    room = np.maximum(mnbt - b, 1.0)
    chunks = np.ceil(isl_high / room)
    own = chunks * sd + extra_long + extra * per_step
    spread = np.sqrt(biased**2 / 12.0 + extra**2 * per_step)
    hold = own + life
    offered = lam_ms * hold
    seat_util = offered / seats
    p_wait = erlang_c(seats, np.minimum(offered, seats * 0.999))
    seat_wait = _p95_exponential(p_wait, hold / np.maximum(seats - offered, 1e-9))
    token_rate = room / np.maximum(sd + extra * room / max(isl, 1.0), 1e-9)  # tokens per ms
    rho_tok = lam_ms * isl / token_rate
    service = isl / token_rate
    budget_wait = _p95_exponential(rho_tok, service / np.maximum(2 * (1 - rho_tok), 1e-9))
    ttft = biased / 2 + own + Z95 * spread + seat_wait + budget_wait
    util = np.maximum.reduce([lam_ms * extra, seat_util, rho_tok])
    stable = converged & (seat_util < 1.0) & (rho_tok < 1.0)
    inf = np.full_like(tau, np.inf)
    return Estimate(stable, np.where(stable, tau, inf), b, np.where(stable, tpot, inf),
                    np.where(stable, ttft, inf), util)
