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
