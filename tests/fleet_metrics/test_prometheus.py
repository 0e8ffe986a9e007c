"""Against a real Prometheus (Debian's, on 127.0.0.1), backfilled with promtool: the CLI's
--prometheus path, the same result from --from, paging under the 11,000-point limit."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from rightsize.analyzers.fleet_metrics import analyze
from rightsize.catalog import load_catalog
from rightsize.traces import prometheus
from tests.conftest import cli
from tests.fleet_metrics.gen import POINTS, STEP_S, T0, on_a_slice, scenarios, series_set, short
from tests.fleet_metrics.promserver import backfill, openmetrics, serve

END = T0 + (POINTS - 1) * STEP_S
WINDOW = ("--start", str(T0), "--end", str(END), "--step", f"{STEP_S}s")


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("prom")
    backfill(openmetrics(scenarios() + short() + on_a_slice(), d / "dcgm.om"), d / "data")
    with serve(d / "data", d / "prometheus.log") as url:
        yield url


def rows_of(out) -> list[dict]:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["rows"]


def test_prometheus_gives_what_the_series_give(prom: str) -> None:
    got = rows_of(cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--format", "json"))
    want = analyze(series_set(scenarios() + short() + on_a_slice()), load_catalog()).to_json()
    assert got == want["rows"]
    by = {r["workload"]: r for r in got}
    assert by["ml/small"]["recommended"] == "1 x MIG 1g.10gb on A100 80GB SXM"
    assert by["ml/web"]["replicas_recommended"] == 1
    assert by["ml/nosm"]["outcome"] == by["ml/brief"]["outcome"] == "inconclusive"
    sliced = by["ml/sliced"]
    assert (sliced["mig_profile_now"], sliced["recommended"], sliced["outcome"]) == (
        "3g.40gb", "1 x MIG 1g.10gb on A100 80GB SXM", "mig")
    # on the slice the ratio is of the slice's SMs: 10% of 3/7 is 4.29% of the GPU
    assert sliced["cost_per_month_now_usd"] == round(1.79 * 730 / 2, 2)
    assert (sliced["gpus_now"], sliced["usd_per_gpu_hour"]) == (0.5, 1.79)  # 3g.40gb: 2 a GPU


def _raw(url: str, metric: str) -> bytes:
    form = urllib.parse.urlencode({"query": metric, "start": T0, "end": END,
                                   "step": STEP_S}).encode()
    with urllib.request.urlopen(url + "/api/v1/query_range", data=form, timeout=60) as r:
        return r.read()


def test_from_saved_query_range_json_is_the_same(prom: str, tmp_path: Path) -> None:
    """What curl saves of the documented queries (docs/fleet-metrics.md) reads back the same;
    a raw selector's response reads too (Prometheus repeats a series' last value for up to
    its 5-minute lookback, so its ends can differ by a step)."""
    bodies = [_raw(prom, prometheus.promql(m, "", STEP_S))
              for m in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE")]
    saved = tmp_path / "saved.json"
    saved.write_bytes(b"[" + b",".join(bodies) + b"]")
    one = tmp_path / "one.json"
    one.write_bytes(_raw(prom, "DCGM_FI_DEV_FB_USED"))
    table = tmp_path / "fleet"
    via_prom = rows_of(cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--format",
                           "json", "--table", table))
    via_file = rows_of(cli("fleet", "metrics", "--from", saved, "--format", "json", "--table",
                           table))
    assert via_file == via_prom
    # the same workloads over the same window are the same fleet-table rows: the file's
    # replaced Prometheus' (one row per workload on disk, pointing at the file now)
    from rightsize.fleet.table import FleetTable

    raw = FleetTable(table).raw().collect()
    assert sorted(raw["job"]) == sorted(r["workload"] for r in via_prom)
    assert raw["paths"].to_list() == [[str(saved)]] * raw.height
    mem_only = rows_of(cli("fleet", "metrics", "--from", one, "--format", "json"))
    assert {r["outcome"] for r in mem_only} == {"inconclusive"}
    assert mem_only[0]["why"].startswith("no activity series")


def test_save_round_trip(prom: str, tmp_path: Path) -> None:
    saved = tmp_path / "fetched.json"
    first = rows_of(cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--format", "json",
                        "--save", saved, "-q"))
    assert rows_of(cli("fleet", "metrics", "--from", saved, "--format", "json")) == first
    again = cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--save", saved)
    assert (again.returncode, again.stderr) == (
        1, f"rightsize: error: {saved} already exists; pass --force to overwrite it\n")


def test_prometheus_refuses_11000_points_and_pages_do_not(prom: str, monkeypatch) -> None:
    form = urllib.parse.urlencode({"query": "DCGM_FI_DEV_FB_USED", "start": T0,
                                   "end": T0 + 11_001 * 30, "step": 30}).encode()
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(prom + "/api/v1/query_range", data=form, timeout=60)
    assert b"exceeded maximum resolution of 11,000 points" in exc.value.read()
    # a week at 30 s: 20,161 evaluations, three pages of at most 10,000
    q = prometheus.Query(prom, T0, END, 30.0, 'namespace="ml",pod=~"small-.*"')
    assert prometheus.pages(T0, END, 30.0) == [(T0, T0 + 9999 * 30),
                                               (T0 + 10000 * 30, T0 + 19999 * 30),
                                               (T0 + 20000 * 30, END)]
    whole = prometheus.fetch(q)
    monkeypatch.setattr(prometheus, "PAGE_POINTS", 777)
    paged = prometheus.fetch(q)
    assert paged.series == whole.series and len(whole.series) == 3
    assert paged.points.sort("series", "t_ns").equals(whole.points.sort("series", "t_ns"))
    # every raw sample (300 s apart) lands in exactly one 30 s step: none lost, none twice
    assert whole.points.height == 3 * POINTS


def test_selector_narrows_the_workloads(prom: str) -> None:
    web = rows_of(cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--format", "json",
                      "--selector", 'pod=~"web-.*"'))
    assert [r["workload"] for r in web] == ["ml/web"]
    none = cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--selector",
               '{namespace="nope"}')
    assert none.returncode == 0 and "0 workloads" in none.stdout


def test_group_by_labels(prom: str) -> None:
    rows = rows_of(cli("fleet", "metrics", "--prometheus", prom, *WINDOW, "--format", "json",
                       "--group-by", "node", "--selector", 'pod=~"web-.*"'))
    assert sorted(r["workload"] for r in rows) == ["node-c", "node-d", "node-e", "node-f"]
    assert all(r["labels"] == {"node": r["workload"]} for r in rows)


def _by_series(data) -> dict[tuple, tuple[list[int], list[float]]]:
    pts = data.points.sort("series", "t_ns")
    out = {}
    for (sid,), g in pts.group_by("series", maintain_order=True):
        info = data.series[sid]
        key = (info.source_metric, tuple(sorted(info.labels.items())))
        out[key] = (g["t_ns"].to_list(), g["value"].to_list())
    assert len(out) == len(data.series)  # no series without points
    return out


@pytest.mark.parametrize(("offset_s", "step_s"), [(0, 300.0), (0, 30.0), (7, 1000.0),
                                                   (-5, 3600.0), (150, 300.0)])
def test_raw_samples_reduced_here_equal_the_range_queries(prom: str, monkeypatch,
                                                          offset_s: int, step_s: float) -> None:
    """The raw-sample path (instant queries of M[Nms], reduced per step with numpy) gives the
    range queries' series, step timestamps and values: maxima exactly, means within float
    rounding (Prometheus' incremental mean against sum/count); small pages change nothing."""
    q = prometheus.Query(prom, T0 + offset_s, END, step_s)
    want = _by_series(prometheus.fetch_range(q))
    got = _by_series(prometheus.fetch_raw(q))
    # many small pages: 5 steps a page, or 50 at the 30 s step (still 403 pages a metric; at 5
    # its 4,032 pages a metric took a minute and crossed no other kind of page boundary)
    monkeypatch.setattr(prometheus, "RAW_PAGE_MAX_S", max(5 * step_s, 1500.0) + 1)
    assert _by_series(prometheus.fetch_raw(q)) == got
    assert got.keys() == want.keys() and len(got) == 25
    for key, (t, v) in want.items():
        assert got[key][0] == t, key
        if key[0] == "DCGM_FI_DEV_FB_USED":
            assert got[key][1] == v, key
        else:
            assert got[key][1] == pytest.approx(v, rel=1e-12, abs=1e-12), key
    assert sum(len(t) for t, _ in got.values()) >= (POINTS if step_s == 3600 else 3 * POINTS)
    assert prometheus.fetch(q).points.height == sum(len(t) for t, _ in got.values())


def test_raw_pages_split_when_prometheus_refuses_their_size(prom: str, tmp_path: Path) -> None:
    """A server whose query.max-samples is below a page's samples (a day: 288 a series) refuses
    it; the page is halved until it fits, and the result is the range queries' (asked of the
    module's server, which holds the same series and allows more)."""
    series = [s for s in scenarios() if s[1]["pod"].startswith("small-")]
    backfill(openmetrics(series, tmp_path / "s.om"), tmp_path / "data")
    with serve(tmp_path / "data", tmp_path / "p.log", ("--query.max-samples=100",)) as url:
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode(
                {"query": "DCGM_FI_DEV_FB_USED[1d]", "time": END}), timeout=60)
        assert b"too many samples" in exc.value.read()
        seen: list[str] = []
        got = _by_series(prometheus.fetch_raw(prometheus.Query(url, T0, END, 300.0),
                                              progress=seen.append))
    # 2,017 steps: 7 day pages (288 steps) and a 1-step one for each of the 7 metrics asked;
    # the 3 present split each day in quarters (72 samples <= 100), the 4 absent answer empty
    assert seen[-1] == f"Prometheus: 56/56 raw pages ({3 * (7 * 4 + 1) + 4 * 8} queries), " \
        "3 series"
    want = _by_series(prometheus.fetch_range(prometheus.Query(prom, T0, END, 300.0,
                                                              'pod=~"small-.*"')))
    assert got.keys() == want.keys() and len(got) == len(series) == 3
    assert all(got[k][0] == want[k][0] for k in want)
    assert all(got[k][1] == pytest.approx(want[k][1], rel=1e-12) for k in want)
    assert sum(len(t) for t, _ in got.values()) == 3 * POINTS
