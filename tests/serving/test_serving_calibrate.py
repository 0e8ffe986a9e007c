"""Calibration fits interpretable factors, not points: a stack that is uniformly slower than
the tables is recovered from its measured steps, and other points of it are then predicted."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.serving.calibrate import Observation, calibrate
from rightsize.analyzers.serving.factors import ANY_GPU, Factors
from rightsize.analyzers.serving.step import Deployment, ServingError, step_model
from rightsize.analyzers.serving.tables import Tables
from rightsize.analyzers.sizing.hf_config import from_hf_config
from tests.serving.test_serving_ops import LLAMA

NO_TABLES = Tables()
# a user's stack: 77% of the tables' compute throughput, 87% of their bandwidth, 3 ms more per
# prefill and 1.2 ms per decode step
STACK = Factors(compute=1.3, memory=1.15, comm=1.0, prefill_overhead_ms=3.0,
                decode_overhead_ms=1.2)
GRID = [(b, i) for b in (1, 8, 32) for i in (128, 1024, 4096)]


def _measured(model, batch, isl, osl=128):
    """(TTFT, TPOT) of ``model`` run with the STACK factors."""
    saved = model.factors
    model.factors = STACK
    try:
        return model.prefill([isl] * batch).ms, model.decode([isl + osl // 2] * batch).ms
    finally:
        model.factors = saved


def _obs(dep, batch, isl, ttft, tpot, osl=128):
    return [Observation(dep, ttft, prefill_seqs=batch, prefill_tokens=isl),
            Observation(dep, tpot, decode_seqs=batch, kv_mean=isl + osl // 2)]


@pytest.fixture(scope="module")
def llama():
    return from_hf_config(LLAMA)


def test_recovers_the_stack_factors_from_many_points(llama):
    dep = Deployment("H100 SXM", 1)
    model = step_model(llama, dep, tables=NO_TABLES)
    obs = [o for b, i in GRID for o in _obs(dep, b, i, *_measured(model, b, i))]
    cal = calibrate(obs, llama, tables=NO_TABLES, described="synthetic: 9 points")
    f = cal.factors["H100 SXM"]
    assert f.compute == pytest.approx(1.3, rel=0.03)
    assert f.memory == pytest.approx(1.15, rel=0.03)
    assert f.prefill_overhead_ms == pytest.approx(3.0, abs=0.5)
    # decode steps of an 8B model are nearly all weight streaming: its overhead and the
    # memory factor trade off, and the prior keeps the overhead near its default
    assert f.decode_overhead_ms == pytest.approx(1.2, abs=0.4)
    tuned = step_model(llama, dep, calibration=cal, tables=NO_TABLES)
    for b, i in ((4, 512), (64, 2048)):
        ttft, tpot = _measured(model, b, i)
        assert tuned.prefill([i] * b).ms == pytest.approx(ttft, rel=0.01)
        assert tuned.decode([i + 64] * b).ms == pytest.approx(tpot, rel=0.01)
    # nine prefill and nine decode points: leave-one-out ranges, tight on a noiseless stack
    assert cal.spread["decode"].source == "leave-one-out residuals of 9 decode points"
    assert -0.05 <= cal.spread["decode"].low <= 0 <= cal.spread["decode"].high <= 0.05


def test_one_point_moves_predictions_of_other_batches_toward_the_stack(llama):
    dep = Deployment("H100 SXM", 1)
    model = step_model(llama, dep, tables=NO_TABLES)
    cal = calibrate(_obs(dep, 8, 1024, *_measured(model, 8, 1024)), llama, tables=NO_TABLES,
                    described="one point")
    tuned = step_model(llama, dep, calibration=cal, tables=NO_TABLES)
    before, after = [], []
    for b, i in GRID:
        ttft, tpot = _measured(model, b, i)
        before += [abs(model.prefill([i] * b).ms / ttft - 1),
                   abs(model.decode([i + 64] * b).ms / tpot - 1)]
        after += [abs(tuned.prefill([i] * b).ms / ttft - 1),
                  abs(tuned.decode([i + 64] * b).ms / tpot - 1)]
    assert np.median(after) < 0.5 * np.median(before)
    assert tuned.calibrated_by == "one point"
    # another GPU gets the pooled factors, and says so
    other = step_model(llama, Deployment("A100 80GB SXM"), calibration=cal, tables=NO_TABLES)
    assert other.calibrated_by == "one point (no point on A100 80GB SXM: the pooled factors)"
    assert other.factors == cal.factors[ANY_GPU]


def test_nothing_to_calibrate_on(llama):
    with pytest.raises(ServingError, match="no measured step to calibrate on"):
        calibrate([Observation(Deployment("H100 SXM"), 0.0, decode_seqs=1, kv_mean=10)], llama,
                  tables=NO_TABLES)


def test_measurements_on_vllm_v0_leave_its_per_sequence_cpu_work_out_of_the_factors(llama):
    """Steps measured on V0 hold 0.0975 ms of CPU work per sequence, which the V0 step model
    adds back: calibrated with engine "vllm-v0", the factors are those of the same steps less
    that work on V1 (exactly: the fit sees the same times), and the tuned V0 model reproduces
    the V0 measurements."""
    dep, v0 = Deployment("H100 SXM", 1), Deployment("H100 SXM", 1, engine="vllm-v0")
    model, model0 = step_model(llama, dep, tables=NO_TABLES), step_model(llama, v0,
                                                                         tables=NO_TABLES)
    pts = [(8, 128), (32, 1024)]
    obs0 = [o for b, i in pts for o in _obs(v0, b, i, *_measured(model0, b, i))]
    # the same steps less 0.0975 ms per sequence: the batch's prompts, or its decodes
    obs1 = [o for b, i in pts for o in _obs(dep, b, i, *(
        t - 0.0975 * b for t in _measured(model0, b, i)))]
    cal0 = calibrate(obs0, llama, tables=NO_TABLES, engine="vllm-v0")
    cal1 = calibrate(obs1, llama, tables=NO_TABLES)
    assert cal0.factors[ANY_GPU] == pytest.approx(cal1.factors[ANY_GPU])
    tuned = step_model(llama, v0, calibration=cal0, tables=NO_TABLES)
    for b, i in pts:
        ttft, tpot = _measured(model0, b, i)
        assert tuned.prefill([i] * b).ms == pytest.approx(ttft, rel=0.01)
        assert tuned.decode([i + 64] * b).ms == pytest.approx(tpot, rel=0.01)
    assert _measured(model0, 8, 128)[1] - _measured(model, 8, 128)[1] == pytest.approx(0.78)
    with pytest.raises(ServingError, match=r"a measured decode step of 15 ms at 200 sequences"
                       r" is not longer than vllm-v0's CPU work alone \(19.5 ms\)"):
        calibrate([Observation(v0, 15.0, decode_seqs=200, kv_mean=700)], llama,
                  tables=NO_TABLES, engine="vllm-v0")
