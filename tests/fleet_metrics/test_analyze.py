"""The analyzer on small generated series: exact outcomes, costs and evidence (gen.py)."""

from __future__ import annotations

import pytest

from rightsize.analyzers.fleet_metrics import Confidence, Outcome, Thresholds, analyze
from rightsize.analyzers.fleet_metrics.workloads import owner, owner_kind
from rightsize.catalog import load_catalog
from tests.fleet_metrics.gen import scenarios, series_set, short

A100_MONTH = 1.79 * 730  # the catalog's cheapest A100 80GB SXM price (Lambda), 730 h a month


@pytest.fixture(scope="module")
def rows():
    res = analyze(series_set(scenarios() + short()), load_catalog())
    return {r.workload: r for r in res.rows}, res


def test_a_pod_that_fits_1g_10gb(rows) -> None:
    r = rows[0]["ml/small"]
    assert (r.outcome, r.confidence, r.recommended) == (
        Outcome.MIG, Confidence.HIGH, "1 x MIG 1g.10gb on A100 80GB SXM")
    assert (r.recommended_resource, r.share_of_gpu) == ("nvidia.com/mig-1g.10gb", 1 / 7)
    assert r.mem_used_peak_bytes == 7168 * 2**20
    assert (r.sm_active_p95_pct, r.sm_active_p99_pct) == (8.0, 8.0)
    assert r.sm_active_mean_pct == pytest.approx((1815 * 5 + 202 * 8) / 2017)
    assert r.cost_per_month_now_usd == pytest.approx(A100_MONTH)
    assert r.cost_per_month_recommended_usd == pytest.approx(A100_MONTH / 7)
    assert r.why == "1g.10gb: 10 GB for 9.02 GB; 1/7 of the SMs for summed p95 8.0%"
    assert r.evidence[0] == "peak memory 7.00 GiB over 2,017 samples (9.02 GB with 20% headroom)"
    assert (r.window_s, r.step_s, r.coverage_pct) == (7 * 86400, 300, 100.0)
    assert r.metrics == ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED")
    assert r.metrics_missing == ("tensor_active_pct", "dram_active_pct")
    assert (r.gpu, r.gpu_reported, r.nodes, r.owner_kind, r.containers) == (
        "A100 80GB SXM", "NVIDIA A100-SXM4-80GB", 1, "Deployment", ("server",))


def test_a_pod_that_needs_a_whole_gpu(rows) -> None:
    r = rows[0]["ml/big"]
    assert (r.outcome, r.confidence, r.recommended) == (
        Outcome.KEEP, Confidence.HIGH, "1 x A100 80GB SXM")
    assert r.savings_per_month_usd == 0
    assert r.why.startswith("nothing cheaper fits: no MIG slice below the whole GPU holds "
                            "77.31 GB (largest: 4g.40gb)")


def test_duty_cycle_alone_cannot_decide_a_slice(rows) -> None:
    r = rows[0]["ml/nosm"]
    assert r.outcome is Outcome.INCONCLUSIVE and r.confidence is None
    assert r.why.startswith("1 x MIG 1g.10gb on A100 80GB SXM holds the memory and would cost "
                            "$187/month, but the duty cycle (p95 40.0%) exceeds its compute "
                            "share")
    assert r.needs is not None and r.needs.startswith("record DCGM_FI_PROF_SM_ACTIVE")
    assert r.activity_metric == "gpu_util_pct" and r.sm_active_p95_pct is None


def test_a_short_window_is_inconclusive(rows) -> None:
    r = rows[0]["ml/brief"]
    assert r.outcome is Outcome.INCONCLUSIVE
    assert r.why == ("window 3.0 h is under 6.0 h: it cannot show a daily peak (a longer "
                     "--since)")
    assert r.cost_per_month_recommended_usd is None


def test_replicas_that_can_shrink(rows) -> None:
    r = rows[0]["ml/web"]
    assert (r.outcome, r.recommended, r.replicas_now, r.replicas_recommended) == (
        Outcome.FEWER_REPLICAS, "1 x A100 80GB SXM", 4, 1)
    assert (r.summed_activity_p95_pct, r.pods, r.nodes) == (60.0, 4, 4)
    assert r.savings_per_month_usd == pytest.approx(3 * A100_MONTH)
    assert r.why == "summed activity p95 60.0% needs 1 GPU(s) at 80% busy"


def test_totals_and_order(rows) -> None:
    res = rows[1]
    assert res.outcomes == {"keep": 1, "fewer-replicas": 1, "mig": 1, "time-share": 0,
                            "smaller-gpu": 0, "idle": 0, "inconclusive": 2}
    assert [r.workload for r in res.rows][:2] == ["ml/web", "ml/small"]  # by savings
    assert res.savings_per_month_usd == pytest.approx(3 * A100_MONTH + A100_MONTH * 6 / 7)


def test_headroom_moves_the_answer() -> None:
    """With 40% headroom 7 GiB needs 10.5 GB: 1g.10gb no longer holds it."""
    res = analyze(series_set(scenarios()), load_catalog(), Thresholds(headroom=0.4))
    small = next(r for r in res.rows if r.workload == "ml/small")
    assert small.recommended == "1 x MIG 1g.20gb on A100 80GB SXM"


def test_the_current_gpu_must_be_known() -> None:
    series = [(n, {k: v for k, v in lb.items() if k != "modelName"}, p)
              for n, lb, p in scenarios()[:3]]
    row = analyze(series_set(series), load_catalog()).rows[0]
    assert row.outcome is Outcome.INCONCLUSIVE
    assert row.why == ("the current GPU is unknown: no modelName/model label; pass --gpu NAME")
    again = analyze(series_set(series), load_catalog(), gpu="A100 80GB SXM").rows[0]
    assert again.recommended == "1 x MIG 1g.10gb on A100 80GB SXM"


@pytest.mark.parametrize(("pod", "name", "kind"), [
    ("web-5c8d7f9b6-bd2zc", "web", "Deployment"),
    ("llm-server-7f6b9c5d48-x2x7k", "llm-server", "Deployment"),
    ("etl-28391040-q2w4r", "etl", "CronJob"),
    ("train-job-x7k2p", "train-job", "Job"),
    ("vllm-2", "vllm", "StatefulSet"),
    ("model-server", "model-server", None),  # "server" has vowels: not a suffix
    ("23b8eba99c14e73d454503a55ae96989", "23b8eba99c14e73d454503a55ae96989", None),
])
def test_owner_from_pod_names(pod: str, name: str, kind: str | None) -> None:
    assert owner_kind(pod) == (name, kind) and owner(pod) == name


def test_per_step_sums_by_bincount_equal_a_group_by(monkeypatch) -> None:
    """The dense-bin path (np.bincount) and the hash group-by it falls back to give the same
    replicas, summed activity, coverage and hours, on replicas whose samples jitter off the
    step, with a point missing and two points in one step."""
    import dataclasses

    import polars as pl

    from rightsize.analyzers.fleet_metrics import stats
    from rightsize.analyzers.fleet_metrics.workloads import assign
    from rightsize.traces.fleet_series import SeriesSet

    d = series_set(scenarios())
    jitter = (pl.int_range(pl.len()) % 7 - 3) * 40 * 10**9  # up to 2 minutes off a 5 min step
    pts = d.points.with_columns(pl.col("t_ns") + jitter)
    pts = pl.concat([pts.slice(1), pts.head(3).with_columns(pl.col("t_ns") + 10**9)])
    data = SeriesSet(d.series, pts, "jittered", d.step_s)
    a = assign([s.labels for s in data.series])
    dense = stats.measure(data, a)
    monkeypatch.setattr(stats, "DENSE_BINS_PER_POINT", 0)
    hashed = stats.measure(data, a)
    assert [dataclasses.asdict(x) for x in dense] == [dataclasses.asdict(x) for x in hashed]
    web = next(x for x in dense if a.names[x.index] == "ml/web")
    assert (web.replicas_now, web.pods) == (4, 4)
