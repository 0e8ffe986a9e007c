"""Continuous-batching queue simulation of one vLLM replica (the V1 scheduler's rules).

Input: :class:`Requests` (arrival times, prompt and output tokens), the replica's
:class:`Limits` (``max_num_seqs``, ``max_num_batched_tokens``, the KV cache in tokens and its
block size, chunked prefill) and step times (:class:`StepMs`: arrays like
``StepModel.step_ms_vec`` of prefill tokens, their cached context, decode sequences and the sum
of their KV lengths, and one step at a time; milliseconds; in practice
:class:`~rightsize.analyzers.serving.tabulated.Tabulated`). Output: a :class:`Trace`, every
request's first-token and finish times, the inter-token gaps, the KV cache peak and the
preemptions. Pure and deterministic: no randomness inside (the arrivals carry the seed).

The rules, as vLLM V1's ``Scheduler.schedule`` applies them each step:

- a request needs ``prompt + generated - computed`` tokens computed before it emits its next
  token (a decode needs 1; a prefill, or a recompute after preemption, needs the rest);
- running requests are served first, in admission order, each taking what it needs from the
  step's token budget (``max_num_batched_tokens``); a prefill takes a chunk of what is left;
- each allocates the KV blocks its new tokens need; when the cache has too few free blocks the
  latest-admitted request is preempted (its blocks freed, ``computed`` reset to 0, put at the
  head of the queue: recompute), until the allocation fits or the request preempted itself;
- only in a step without preemptions are waiting requests admitted, in arrival order, while
  fewer than ``max_num_seqs`` run, budget is left and their first chunk's blocks are free;
- a prefill that completes emits the first token at the end of its step; every decode emits
  one token per step. Without chunked prefill (vLLM V0), a step is either whole prompts (when
  any waiting request fits) or the decodes of every running request.

Steps where nothing can change but the decodes' KV lengths (every running request decoding,
no admission possible before the next arrival) are taken many at a time: their step times come
from one vectorized call, which is what makes a simulation of thousands of requests cost tens
of milliseconds (the result is the same step by step; ``tests/serving/test_simulate.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class StepMs(Protocol):
    """Step times in ms: arrays like ``StepModel.step_ms_vec``, and one step as floats."""

    def __call__(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                 decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray: ...

    def one(self, p_tok: int, p_ctx: int, d_seqs: int, d_kv: int) -> float: ...

    def decodes(self, seqs: int, kv_sums: np.ndarray) -> np.ndarray:
        """Decode-only steps of ``seqs`` sequences, one per KV sum."""
        ...


class Vectorized:
    """A plain ``step_ms_vec`` function as a :class:`StepMs` (one step = arrays of one)."""

    def __init__(self, fn: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                                    np.ndarray]) -> None:
        self.fn = fn

    def __call__(self, prefill_tokens: np.ndarray, prefill_ctx: np.ndarray,
                 decode_seqs: np.ndarray, decode_kv_sum: np.ndarray) -> np.ndarray:
        return np.asarray(self.fn(prefill_tokens, prefill_ctx, decode_seqs, decode_kv_sum))

    def one(self, p_tok: int, p_ctx: int, d_seqs: int, d_kv: int) -> float:
        return float(self.fn(np.array([p_tok]), np.array([p_ctx]), np.array([d_seqs]),
                             np.array([d_kv]))[0])

    def decodes(self, seqs: int, kv_sums: np.ndarray) -> np.ndarray:
        zeros = np.zeros(len(kv_sums), np.int64)
        return self(zeros, zeros, np.full(len(kv_sums), seqs, np.int64), kv_sums)

BULK_STEPS_MAX = 4096  # decode steps taken in one vectorized call (bounds the arrays)
_NEVER = ("a request can never be scheduled: its prompt and output need more KV blocks than the "
          "cache holds (or, without chunked prefill, its prompt is over max_num_batched_tokens)")


@dataclass(frozen=True, slots=True)
class Requests:
    """Requests in arrival order: seconds from the start, tokens (output >= 1)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True, slots=True)
class Limits:
    """One replica's scheduler limits and KV cache (vLLM's names)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    chunked_prefill: bool = True
    block_size: int = 16  # vLLM's default KV block, in tokens


@dataclass(frozen=True, slots=True)
class Trace:
    """What one simulation measured; times in seconds from the start, NaN when unfinished."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    output_tokens: np.ndarray
    itl_s: np.ndarray  # inter-token gaps (every token after the first), as values...
    itl_weight: np.ndarray  # ...and how many tokens had each gap
    kv_blocks: int
    kv_peak_blocks: int
    preemptions: int
    steps: int


class _State:
    """The mutable state of one simulation, per request (index = arrival order)."""

    def __init__(self, reqs: Requests, limits: Limits) -> None:
        n = len(reqs)
        self.prompt = reqs.prompt_tokens.astype(np.int64)
        self.out = reqs.output_tokens.astype(np.int64)
        self.arr = reqs.arrival_s.astype(np.float64)
        self.computed = np.zeros(n, np.int64)
        self.generated = np.zeros(n, np.int64)
        self.held = np.zeros(n, np.int64)  # KV blocks held
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.last = np.zeros(n)  # when the request emitted its latest token
        self.run = np.zeros(0, np.int64)  # running requests, in admission order
        self.waiting: deque[int] = deque()
        self.next_arrival = 0
        self.bs = limits.block_size
        self.total_blocks = limits.kv_cache_tokens // limits.block_size
        self.free = self.total_blocks
        self.peak = 0
        self.preemptions = 0
        self.steps = 0
        self.itl: list[np.ndarray] = []
        self.itl_w: list[np.ndarray] = []

    def blocks(self, tokens: np.ndarray) -> np.ndarray:
        return -(-tokens // self.bs)

    def arrive(self, t: float) -> None:
        n = len(self.arr)
        while self.next_arrival < n and self.arr[self.next_arrival] <= t:
            self.waiting.append(self.next_arrival)
            self.next_arrival += 1

    def emit(self, rows: np.ndarray, t_end: float) -> None:
        """``rows`` computed all they needed this step: each emits one token at ``t_end``."""
        if rows.size == 0:
            return
        self.generated[rows] += 1
        firsts = self.generated[rows] == 1
        self.first[rows[firsts]] = t_end
        later = rows[~firsts]
        if later.size:
            self.itl.append(t_end - self.last[later])
            self.itl_w.append(np.ones(later.size, np.int64))
        self.last[rows] = t_end

    def retire(self, t_end: float) -> None:
        done = self.generated[self.run] >= self.out[self.run]
        if done.any():
            rows = self.run[done]
            self.finish[rows] = t_end
            self.free += int(self.held[rows].sum())
            self.held[rows] = 0
            self.run = self.run[~done]

    def note_usage(self) -> None:
        self.peak = max(self.peak, self.total_blocks - self.free)


def simulate(reqs: Requests, limits: Limits, step_ms: StepMs, *, bulk: bool = True) -> Trace:
    """Run every request to completion; see the module docstring for the rules.
    ``bulk=False`` takes every step one at a time (the reference the bulk path is tested
    against)."""
    if limits.max_num_seqs < 1 or limits.max_num_batched_tokens < 1:
        raise ValueError("max_num_seqs and max_num_batched_tokens must be at least 1")
    s = _State(reqs, limits)
    t = 0.0
    n = len(reqs)
    while s.next_arrival < n or s.run.size or s.waiting:
        s.arrive(t)
        if not s.run.size and not s.waiting:
            t = max(t, float(s.arr[s.next_arrival]))
            continue
        if bulk and _bulk_ok(s, limits):
            t = _bulk_decode(s, limits, step_ms, t)
            continue
        if limits.chunked_prefill:
            t = _step_chunked(s, limits, step_ms, t)
        else:
            t = _step_v0(s, limits, step_ms, t)
    itl = np.concatenate(s.itl) if s.itl else np.zeros(0)
    itl_w = np.concatenate(s.itl_w) if s.itl_w else np.zeros(0, np.int64)
    return Trace(s.arr, s.first, s.finish, s.out, itl, itl_w, s.total_blocks, s.peak,
                 s.preemptions, s.steps)


def _step_time(step_ms: StepMs, p_tok: int, p_ctx: int, d_seqs: int, d_kv: int) -> float:
    return step_ms.one(p_tok, p_ctx, d_seqs, d_kv) / 1000.0


def _admit(s: _State, limits: Limits, budget: int, seats: int) -> tuple[list[int], list[int]]:
    """Waiting requests admitted this step (arrival order) and their first chunks."""
    rows: list[int] = []
    takes: list[int] = []
    while s.waiting and budget > 0 and seats > 0:
        r = s.waiting[0]
        need = int(s.prompt[r] + s.generated[r] - s.computed[r])
        if not limits.chunked_prefill and need > budget:
            break
        take = min(need, budget)
        blocks = -(-take // s.bs)
        if blocks > s.free:
            break
        s.waiting.popleft()
        s.free -= blocks
        s.held[r] = blocks
        rows.append(r)
        takes.append(take)
        budget -= take
        seats -= 1
    return rows, takes


def _schedule_running(s: _State, budget: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Tokens given to each running request (in order) and whether any was preempted."""
    run = s.run
    need = s.prompt[run] + s.generated[run] - s.computed[run]
    before = np.cumsum(need) - need
    alloc = np.minimum(np.maximum(budget - before, 0), need)
    new_blocks = np.where(alloc > 0, s.blocks(s.computed[run] + alloc) - s.held[run], 0)
    cum = np.cumsum(new_blocks)
    if run.size == 0 or int(cum[-1]) <= s.free:
        s.free -= int(cum[-1]) if run.size else 0
        s.held[run] += new_blocks
        return run, alloc, False
    # Too few blocks. vLLM walks the requests in order and, while one's blocks do not fit,
    # preempts the latest-admitted; the tail cut for request i is the longest tail whose
    # blocks cover what the first i+1 need beyond the free ones (it only moves down).
    n = run.size
    tail_held = np.concatenate([np.cumsum(s.held[run][::-1])[::-1], [0]])
    short = np.maximum(cum - s.free, 0)
    cut_i = np.searchsorted(-tail_held, -short, side="right") - 1
    ok = (alloc > 0) & (cut_i > np.arange(n))
    m = int(np.argmin(ok)) if not ok.all() else n
    if m < n and alloc[m] > 0:
        cut = m  # request m would preempt itself: it and every later one go back
    else:
        cut = int(cut_i[m - 1]) if m else n
    victims = run[cut:]
    s.free += int(s.held[victims].sum()) - int(cum[m - 1] if m else 0)
    s.held[victims] = 0
    s.computed[victims] = 0
    s.waiting.extendleft(victims[::-1].tolist())
    s.preemptions += victims.size
    s.held[run[:m]] += new_blocks[:m]
    s.run = run[:cut]
    return run[:m], alloc[:m], victims.size > 0


def _step_chunked(s: _State, limits: Limits, step_ms: StepMs, t: float) -> float:
    budget = limits.max_num_batched_tokens
    rows, alloc, preempted = _schedule_running(s, budget)
    sched = alloc > 0
    rows, alloc = rows[sched], alloc[sched]
    if not preempted:
        seats = limits.max_num_seqs - s.run.size
        new, takes = _admit(s, limits, budget - int(alloc.sum()), seats)
        if new:
            s.run = np.concatenate([s.run, np.array(new, np.int64)])
            rows = np.concatenate([rows, np.array(new, np.int64)])
            alloc = np.concatenate([alloc, np.array(takes, np.int64)])
    if rows.size == 0:  # the head alone needs more blocks than the whole cache
        raise ValueError(_NEVER)
    return _run_step(s, step_ms, t, rows, alloc)


def _step_v0(s: _State, limits: Limits, step_ms: StepMs, t: float) -> float:
    """vLLM V0 without chunked prefill: a prefill-only step when a waiting prompt fits."""
    seats = limits.max_num_seqs - s.run.size
    new, takes = _admit(s, limits, limits.max_num_batched_tokens, seats)
    if new:
        rows = np.array(new, np.int64)
        s.run = np.concatenate([s.run, rows])
        return _run_step(s, step_ms, t, rows, np.array(takes, np.int64))
    if not s.run.size:
        raise ValueError(_NEVER)
    rows, alloc, _ = _schedule_running(s, max(limits.max_num_batched_tokens, s.run.size))
    sched = alloc > 0
    return _run_step(s, step_ms, t, rows[sched], alloc[sched])


def _run_step(s: _State, step_ms: StepMs, t: float, rows: np.ndarray,
              alloc: np.ndarray) -> float:
    computed = s.computed[rows]
    decode = (alloc == 1) & (s.generated[rows] > 0) & \
        (s.prompt[rows] + s.generated[rows] - computed == 1)
    pre = ~decode
    dur = _step_time(step_ms, int(alloc[pre].sum()), int(computed[pre].sum()),
                     int(decode.sum()), int((computed[decode] + 1).sum()))
    t_end = t + dur
    s.computed[rows] = computed + alloc
    s.note_usage()
    s.steps += 1
    s.emit(rows[s.computed[rows] == s.prompt[rows] + s.generated[rows]], t_end)
    s.retire(t_end)
    return t_end


def _bulk_ok(s: _State, limits: Limits) -> bool:
    """Every running request decodes, all fit the budget, and no waiting one can join."""
    run = s.run
    if run.size == 0 or run.size > limits.max_num_batched_tokens:
        return False
    if not np.all((s.prompt[run] + s.generated[run] - s.computed[run] == 1)
                  & (s.generated[run] > 0)):
        return False
    if not s.waiting:
        return True  # the next arrival bounds the run of steps
    if run.size >= limits.max_num_seqs:
        return True  # no seat until a request finishes
    if not limits.chunked_prefill:
        return False  # V0 would run a prefill step now if the head fits
    head = s.waiting[0]
    first_chunk = min(int(s.prompt[head] + s.generated[head]), limits.max_num_batched_tokens
                      - run.size)
    return first_chunk <= 0 or -(-first_chunk // s.bs) > s.free  # blocked on the KV cache


def _bulk_decode(s: _State, limits: Limits, step_ms: StepMs, t: float) -> float:
    """Take the decode steps up to the next event (a finish, a full cache, an arrival that
    could be admitted) in one go."""
    run = s.run
    b = run.size
    k_done = int((s.out[run] - s.generated[run]).min())
    # KV: step j allocates floor((q + j) / bs) new blocks per request, q = (computed-1) % bs.
    q = (s.computed[run] - 1) % s.bs
    counts = np.bincount(q, minlength=s.bs)
    j = np.arange(1, min(k_done, BULK_STEPS_MAX) + 1)
    new_blocks = ((np.arange(s.bs)[None, :] + j[:, None]) // s.bs) @ counts
    k = int(np.searchsorted(new_blocks, s.free, side="right"))
    if k == 0:  # the next step preempts: take it the slow way
        return _step_chunked(s, limits, step_ms, t) if limits.chunked_prefill \
            else _step_v0(s, limits, step_ms, t)
    kv0 = int((s.computed[run] + 1).sum())
    kv = kv0 + b * np.arange(k, dtype=np.int64)
    dur = step_ms.decodes(b, kv) / 1000.0
    ends = t + np.cumsum(dur)
    admissible = not s.waiting and run.size < limits.max_num_seqs
    if admissible and s.next_arrival < len(s.arr):
        # steps that start before the next arrival; the one starting at or after it admits it
        k = min(k, 1 + int(np.searchsorted(ends, s.arr[s.next_arrival], side="left")))
    ends, dur = ends[:k], dur[:k]
    s.itl.append(ends[0] - s.last[run])
    s.itl_w.append(np.ones(b, np.int64))
    if k > 1:
        s.itl.append(dur[1:])
        s.itl_w.append(np.full(k - 1, b, np.int64))
    s.computed[run] += k
    s.generated[run] += k
    s.last[run] = ends[-1]
    s.free -= int(new_blocks[k - 1])
    s.held[run] = s.blocks(s.computed[run])
    s.steps += k
    s.note_usage()
    s.retire(float(ends[-1]))
    return float(ends[-1])
