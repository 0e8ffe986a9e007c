"""The mixed-GPU option (Melange) on a bimodal load: many short requests and some very long
ones, where one small GPU type for the short class and one big type for the long class cost
less than any single type. Every plan is simulated; the step times are stand-ins with hand-set
costs, so the expected answer is worked from the inputs.

The two GPU types (``Affine``: a step costs ``max(floor, per_token x tokens)``, ms):

- **Big**, $3.00/h: floor 6 ms, 0.03 ms a token (33,333 tokens/s);
- **Small**, $0.40/h: floor 15 ms, 0.15 ms a token (6,667 tokens/s).

The load, 3,000 requests at 20 req/s (seeded Poisson), each long with probability 6% (an
8,000-token prompt, 50 output tokens) or else short (100-token prompt, 1,400 output tokens), so
each class arrives as its own Poisson stream; the seed draws 218 long ones (7.3%). SLOs: TTFT
p95 1,000 ms, TPOT p95 100 ms. Token counts below are per second at 1.46 long and 18.6 short
requests a second; 0.03 and 0.15 ms a token are lower bounds on each GPU's time.

Worked out:

1. Small cannot serve the long class: one long prefill alone is 8,000 x 0.15 = 1,200 ms, over
   the TTFT SLO, and with more than 5% of requests long no all-Small plan's TTFT p95 can meet
   it. The long class goes to Big (8,050 x 0.03 = 242 ms).
2. All on Big: a second of traffic computes 1.46 x 8,050 + 18.6 x 1,500 = 39,650 tokens,
   at least 1,190 ms of Big time: one Big is over capacity, so two ($6.00/h).
3. Split at 1,500 tokens (the 25th, 50th and 75th percentile of prompt + output: 92.7% are
   1,500): the long class alone keeps one Big 35% busy (1.46 x 242 ms a second), so one Big
   ($3.00); the short class needs at least 18.6 x 1,500 x 0.15 = 4,185 ms a second of Small
   time, so at least five Smalls, and up to seven ($3.00 / $0.40) keep the pair under the single
   plan's $6.00.
"""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.analyzers.serving.mixed import mixed
from rightsize.analyzers.serving.plan import Load, Slo
from rightsize.analyzers.serving.search import Candidate, Space, search
from rightsize.analyzers.serving.simulate import Requests
from rightsize.analyzers.serving.step import Deployment
from rightsize.catalog import Price
from tests.serving.standin import Affine

SLO = Slo(ttft_p95_ms=1000.0, tpot_p95_ms=100.0)
SPACE = Space(("Small", "Big"), max_gpus=16, tps=(1,), pps=(1,),
              max_num_seqs=(64, 256), max_batched_tokens=(512, 1024, 16384))


def _gpu(name: str, usd: float, floor: float, per_token: float) -> Candidate:
    model = Affine(ms=floor, per_token=per_token, per_kv=0.0, per_attn=0.0,
                   kv_cache_tokens=2_000_000, deployment=Deployment(name))
    return Candidate(Deployment(name), model,  # type: ignore[arg-type]
                     Price(name, "test", "one", 1, usd))


def bimodal(n: int = 3000) -> Load:
    rng = np.random.default_rng(3)
    gaps = rng.exponential(1 / 20.0, n)
    gaps[0] = 0.0
    long = rng.random(n) < 0.06
    reqs = Requests(np.cumsum(gaps), np.where(long, 8000, 100).astype(np.int64),
                    np.where(long, 50, 1400).astype(np.int64))
    return Load.of_csv(reqs, (n - 1) / float(np.sum(gaps)), "bimodal", 0)


@pytest.fixture(scope="module")
def load() -> Load:
    return bimodal()


def test_a_mixed_plan_is_cheaper_than_any_single_type(load: Load) -> None:
    found = [_gpu("Small", 0.40, 15.0, 0.15), _gpu("Big", 3.00, 6.0, 0.03)]
    single = search(found, load, SLO, SPACE, [])
    met = [o for o in single.options if o.meets]
    assert {o.gpu for o in met} == {"Big"}  # (1): no Small configuration meets the TTFT
    best = min(met, key=lambda o: o.cost_per_hour_usd)
    assert (best.gpu, best.replicas, best.cost_per_hour_usd) == ("Big", 2, 6.0)  # (2)

    got, note = mixed(found, load, SLO, SPACE, best)
    assert note == "" and got is not None
    short = load.csv.prompt_tokens == 100
    assert int(np.sum(~short)) == 218
    assert got.threshold_tokens == 1500
    assert got.short_share_pct == pytest.approx(100 * short.mean())
    # (3): the long class on one Big, the short class on five to seven Smalls
    assert (got.long.gpu, got.long.replicas) == ("Big", 1)
    assert got.short.gpu == "Small" and 5 <= got.short.replicas <= 7
    assert got.cost_per_hour_usd == pytest.approx(3.0 + 0.4 * got.short.replicas)
    assert got.saving_pct == pytest.approx(100 * (1 - got.cost_per_hour_usd / 6.0))
    for side in (got.short, got.long):  # both simulated, both within the SLOs
        assert side.source == "simulated" and side.meets
        assert side.ttft_p95_ms <= SLO.ttft_p95_ms and side.tpot_p95_ms <= SLO.tpot_p95_ms


def test_no_mixed_option_when_one_big_gpu_serves_everything(load: Load) -> None:
    # a quarter of the traffic: one Big ($3.00) holds it all (at least 298 ms a second), and a
    # pair costs at least $3.40
    quarter = Load.of_csv(Requests(load.csv.arrival_s * 4, load.csv.prompt_tokens,
                                   load.csv.output_tokens), load.rate_per_s / 4, "quarter", 0)
    found = [_gpu("Small", 0.40, 15.0, 0.15), _gpu("Big", 3.00, 6.0, 0.03)]
    met = [o for o in search(found, quarter, SLO, SPACE, []).options if o.meets]
    best = min(met, key=lambda o: o.cost_per_hour_usd)
    assert (best.gpu, best.replicas) == ("Big", 1)
    got, note = mixed(found, quarter, SLO, SPACE, best)
    assert got is None
    assert note.startswith("no mixed-GPU option: no split of short and long requests")
