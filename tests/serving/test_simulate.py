"""The continuous-batching simulation: hand-worked schedules, the M/D/1 closed form, and the
bulk decode path against step-by-step."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.serving.latency import summarize, weighted_percentile
from rightsize.analyzers.serving.load import poisson
from rightsize.analyzers.serving.simulate import Limits, Requests, Vectorized, simulate
from tests.serving.standin import Affine

TEN_MS = Vectorized(lambda p, c, b, k: np.full(len(p), 10.0))


def reqs(*rows: tuple[float, int, int]) -> Requests:
    a = np.array(rows, dtype=np.float64)
    return Requests(a[:, 0], a[:, 1].astype(np.int64), a[:, 2].astype(np.int64))


def test_decode_joins_the_running_batch_at_the_next_step() -> None:
    # A (t=0, 4 prompt, 3 out): prefill step [0,10] emits token 1; decode [10,20] token 2.
    # B arrives at 15 ms: the step starting at 20 holds A's last decode and B's 4-token prefill
    # (budget 8); both emit at 30 (A done, B's first token); B decodes [30,40] and is done.
    tr = simulate(reqs((0.0, 4, 3), (0.015, 4, 2)), Limits(8, 8, 1 << 20), TEN_MS)
    assert np.allclose(tr.first_token_s, [0.010, 0.030])
    assert np.allclose(tr.finish_s, [0.030, 0.040])
    assert tr.steps == 4 and tr.preemptions == 0
    s = summarize((tr,))
    assert s.ttft_ms.mean == pytest.approx(12.5)  # (10 + 15) / 2
    assert s.tpot_ms.p50 == pytest.approx(10.0)  # A: (30-10)/2, B: (40-30)/1
    assert s.e2e_ms.mean == pytest.approx(27.5)  # (30 + 25) / 2
    assert s.itl_ms.p99 == pytest.approx(10.0) and tr.itl_weight.sum() == 3


def test_chunked_prefill_shares_the_token_budget_in_admission_order() -> None:
    # Budget 4: A's 10-token prompt takes chunks 4, 4, 2; B (3 tokens) gets the 2 left in the
    # third step and its last token in the fourth, beside A's first decode.
    tr = simulate(reqs((0.0, 10, 2), (0.0, 3, 1)), Limits(8, 4, 1 << 20), TEN_MS)
    assert np.allclose(tr.first_token_s, [0.030, 0.040])
    assert np.allclose(tr.finish_s, [0.040, 0.040])
    assert tr.steps == 4


def test_kv_cache_exhaustion_preempts_the_latest_request_by_recompute() -> None:
    # Two blocks of 16 tokens. Both 16-token prompts prefill in step 1 (a block each). In
    # step 2 A's 17th token needs a second block: B (admitted last) is preempted and re-queued
    # with its 17 tokens (16 prompt + 1 generated) to recompute. A finishes at 30 ms, B is
    # re-admitted then, recomputes [30,40] emitting its 2nd token (a 30 ms gap), then its 3rd.
    tr = simulate(reqs((0.0, 16, 3), (0.0, 16, 3)), Limits(8, 64, 32), TEN_MS)
    assert tr.preemptions == 1
    assert np.allclose(tr.first_token_s, [0.010, 0.010])
    assert np.allclose(tr.finish_s, [0.030, 0.050])
    assert tr.kv_blocks == 2 and tr.kv_peak_blocks == 2
    assert sorted(np.round(tr.itl_s * 1000, 6).tolist()) == [10.0, 10.0, 10.0, 30.0]
    assert summarize((tr,)).tpot_ms.p50 == pytest.approx(15.0)  # A 10, B (50-10)/2 = 20


def test_without_chunked_prefill_a_prompt_step_pauses_the_decodes() -> None:
    # vLLM V0: B's prefill at 20 ms runs alone, A's decode waits a step.
    tr = simulate(reqs((0.0, 4, 3), (0.015, 4, 2)),
                  Limits(8, 8, 1 << 20, chunked_prefill=False), TEN_MS)
    assert np.allclose(tr.first_token_s, [0.010, 0.030])
    assert np.allclose(tr.finish_s, [0.040, 0.040])


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_one_seat_one_token_is_an_md1_queue(rho: float) -> None:
    # max_num_seqs 1 and one output token: each request is one 10 ms step, served in arrival
    # order -- an M/D/1 queue. Pollaczek-Khinchine for deterministic service:
    # W_q = rho / (2 mu (1 - rho)); and an arrival waits with probability rho.
    service_s = 0.010
    mu = 1 / service_s
    r = poisson(rho * mu, 100, 1, 20_000, seed=7)
    tr = simulate(r, Limits(1, 4096, 1 << 20), TEN_MS)
    wait = tr.first_token_s - tr.arrival_s - service_s
    exact = rho / (2 * mu * (1 - rho))
    # the sample mean's standard error from 40 batch means is 2-3% of W_q here
    batches = wait.reshape(40, -1).mean(axis=1)
    se = batches.std(ddof=1) / np.sqrt(len(batches))
    assert abs(wait.mean() - exact) < 3 * se
    assert abs(wait.mean() - exact) / exact < 0.06
    assert np.mean(wait > 1e-12) == pytest.approx(rho, abs=0.015)


@pytest.mark.parametrize("limits", [
    Limits(256, 2048, 200_000), Limits(64, 512, 30_000), Limits(256, 2048, 40_000),
    Limits(128, 4096, 60_000, chunked_prefill=False)])
def test_bulk_decode_steps_equal_step_by_step(limits: Limits) -> None:
    rng = np.random.default_rng(3)
    n = 300
    r = Requests(np.cumsum(rng.exponential(1 / 25, n)), rng.integers(1, 3000, n),
                 rng.integers(1, 400, n))
    step = Vectorized(Affine().step_ms_vec)
    fast, slow = simulate(r, limits, step), simulate(r, limits, step, bulk=False)
    assert fast.steps == slow.steps and fast.preemptions == slow.preemptions
    assert fast.kv_peak_blocks == slow.kv_peak_blocks
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=0, atol=1e-9)
    assert summarize((fast,)).itl_ms.p99 == pytest.approx(summarize((slow,)).itl_ms.p99)


def test_a_request_larger_than_the_cache_is_an_error() -> None:
    with pytest.raises(ValueError, match="never be scheduled"):
        simulate(reqs((0.0, 40, 2)), Limits(8, 64, 32), TEN_MS)


def test_weighted_percentile_is_numpys_on_the_expanded_array() -> None:
    v, w = np.array([3.0, 1.0, 2.0]), np.array([2, 1, 4])
    expanded = np.repeat(v, w)
    for p in (0, 10, 50, 90, 95, 99, 100):
        assert weighted_percentile(v, w, p) == pytest.approx(np.percentile(expanded, p))
