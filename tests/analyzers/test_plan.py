"""``rightsize.analyzers.plan`` on hand-built analyses: exact replicas, costs, SLO outcomes,
MIG slices and time-slicing, the KV cache bound, demand CSV parsing, and the manifests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rightsize.analyzers.document import Document
from rightsize.analyzers.plan import demand as dm
from rightsize.analyzers.plan.capacity import SloStatus
from rightsize.analyzers.plan.partitions import slice_step_ms
from rightsize.analyzers.plan.plan import Plan, PlanError, PlanInputs, build
from rightsize.analyzers.plan.serving import KvBudget, max_concurrent
from rightsize.analyzers.plan.workload import HostUsage, from_document
from rightsize.catalog import load_catalog
from rightsize.catalog.mig import mig_profiles, profiles_for
from rightsize.reports.plan_manifests import check, manifests
from rightsize.reports.plan_text import render
from rightsize.reports.yaml_emit import plain
from tests.conftest import SAMPLES

CATALOG = load_catalog()
GIB = 2**30
DAY = "t,rate\n00:00,100\n06:00,300\n12:00,900\n18:00,400\n"


def _candidate(gpu: str, step: float, low: float | None = None, high: float | None = None,
               usd: float | None = 2.0) -> dict[str, Any]:
    return {"gpu": gpu, "gpus": 1, "fits_memory": True, "projected_step_ms": step,
            "usd_per_hour": usd, "usd_per_1k_steps": None, "energy_j_per_step": None,
            "price_provider": "P" if usd else None, "price_instance": "i" if usd else None,
            "price_date_seen": "2026" if usd else None, "meets_constraints": True,
            "precision_used": "bf16", "parallelism": "single GPU", "interconnect": "none",
            "projected_step_ms_low": low, "projected_step_ms_high": high, "warnings": []}


def make_doc(candidates: list[dict[str, Any]], step_ms: float = 50.0,
             util: float | None = 50.0, peak: int | None = 2_000_000_000,
             current: str | None = "H100 SXM", bound: str = "compute") -> Document:
    data = json.loads((SAMPLES / "runs/infer-cpu/analysis.json").read_text())
    data["steps"].update(count=10, mean_ms=step_ms, names=[])
    data["metrics"].update(device=0, peak_memory_bytes=peak)
    data["diagnosis"]["bound"] = bound
    data["diagnosis"]["utilization"] = {"trace": None if util is None else {
        "gpu_busy_pct_mean": util, "gpu_busy_pct_peak_step": util}, "nvml": None}
    data["sizing"].update(current=current, candidates=candidates)
    return Document.from_json(data)


def plan_for(doc: Document, rate: str | float = 500, slo: float | None = 100.0,
             batch: int = 10, headroom: float = 0.2, kv: KvBudget | None = None,
             host: HostUsage | None = None) -> Plan:
    curve = dm.constant(rate) if isinstance(rate, float | int) else dm.from_csv(rate, "day.csv")
    return build(doc, from_document(doc, host), PlanInputs(batch, "samples", slo, curve,
                                                           headroom, kv), CATALOG)


def test_constant_demand_replicas_and_cost() -> None:
    p = plan_for(make_doc([_candidate("H100 SXM", 50.0, 45.0, 55.0)]))
    c = p.capacity("H100 SXM")
    assert c is not None and c.replicas is not None
    assert (c.per_replica_per_s, c.per_replica_per_s_low, c.slo) == (200.0, 181.818,
                                                                     SloStatus.MEETS)
    # 500/s over 200/s x 0.8 = 3.125 -> 4 replicas all day
    assert (c.replicas.series, c.replicas.peak, c.replicas.p95, c.replicas.mean) == \
        ((4,), 4, 4, 4.0)
    assert (c.replicas.gpu_hours_per_day, c.usd_per_day, c.static_usd_per_day,
            c.savings_pct) == (96.0, 192.0, 192.0, 0.0)
    assert p.recommended == "H100 SXM"
    assert p.reason == "H100 SXM: the lowest autoscaled cost, $192.00/day for 96 GPU-hours " \
                       "(peak 4 replicas)"
    # busy 50% of the measured step; HPA target 50 x (1 - 0.2) = 40; KEDA 200 x 0.8 per replica
    assert (p.util_on_recommended_pct, p.hpa_target_pct, p.keda_threshold_per_s) == \
        (50.0, 40, 160.0)


def test_daily_curve_autoscaling_saves_half() -> None:
    p = plan_for(make_doc([_candidate("H100 SXM", 50.0, 45.0, 55.0)]), rate=DAY)
    c = p.capacity("H100 SXM")
    assert c is not None and c.replicas is not None
    assert (c.replicas.series, c.replicas.peak, c.replicas.p95, c.replicas.mean) == \
        ((1, 2, 6, 3), 6, 6, 3.0)
    assert (c.replicas.gpu_hours_per_day, c.replicas.static_gpu_hours_per_day) == (72.0, 144.0)
    assert (c.usd_per_day, c.static_usd_per_day, c.savings_pct) == (144.0, 288.0, 50.0)


def test_short_peak_p95_below_peak() -> None:
    p = plan_for(make_doc([_candidate("H100 SXM", 50.0)]), rate="t,rate\n0,100\n82800,900\n")
    r = p.capacity("H100 SXM").replicas  # type: ignore[union-attr]
    assert r is not None
    # 23 h at 1 replica, 1 h at 6: p95 covers 23/24 = 95.8% of the day with 1
    assert (r.series, r.peak, r.p95, r.mean, r.gpu_hours_per_day) == ((1, 6), 6, 1, 1.208, 29.0)


def test_slo_no_candidate_meets() -> None:
    doc = make_doc([_candidate("H100 SXM", 50.0, 45.0, 55.0), _candidate("L4", 80.0)])
    p = plan_for(doc, slo=10.0)
    assert p.recommended is None
    assert p.reason == ("no candidate meets the 10 ms SLO: the fastest, H100 SXM, projects 50 ms"
                        " per step; relax the SLO or shrink the batch (--samples-per-step)")
    assert all(c.slo is SloStatus.MISSES and c.replicas is None for c in p.capacities)
    assert manifests(p, "svc", "img", "q", "http://p") == ()
    assert "No recommendation: no candidate meets" in render(p)


def test_slo_at_risk_is_second_choice() -> None:
    doc = make_doc([_candidate("H100 SXM", 50.0, 45.0, 60.0, usd=1.0),
                    _candidate("H200 SXM", 40.0, 35.0, 45.0, usd=3.0)])
    p = plan_for(doc, slo=55.0)
    assert p.capacity("H100 SXM").slo is SloStatus.AT_RISK  # type: ignore[union-attr]
    assert p.recommended == "H200 SXM"


def test_job_fits_a_1g_mig_slice() -> None:
    doc = make_doc([_candidate("A100 80GB SXM", 10.0)], step_ms=10.0, util=10.0,
                   current="A100 80GB SXM")
    p = plan_for(doc, rate=50, slo=20.0)
    part = p.partition("A100 80GB SXM")
    assert part is not None
    # 1g.10gb: min(1/7, 1/8) = 12.5% of the GPU; 10 ms x (0.9 + 0.1 / 0.125) = 17 ms <= 20
    assert (part.kind, part.profile, part.resource, part.per_gpu, part.step_ms) == \
        ("mig", "1g.10gb", "nvidia.com/mig-1g.10gb", 7, 17.0)
    assert (part.rejected, part.gpus_at_peak) == ((), 1)
    # one replica on the slice serves the peak: 10 / 17 ms x 0.8 = 470.588/s >= 50/s
    assert p.deploy_on == part
    assert (p.hpa_target_pct, p.keda_threshold_per_s) == (None, 470.588)
    assert p.notes[-1].startswith("no HPA on GPU utilization: DCGM_FI_DEV_GPU_UTIL is not "
                                  "reported per MIG instance")
    items = manifests(p, "svc", "img", "q", "http://p")
    assert [m.filename for m in items] == ["deployment.yaml", "keda-scaledobject.yaml"]
    deploy = plain(items[0].obj)
    res = deploy["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"nvidia.com/mig-1g.10gb": "1"}


def test_slice_does_not_fit_says_why() -> None:
    doc = make_doc([_candidate("A100 80GB SXM", 10.0)], step_ms=10.0, util=10.0,
                   peak=50_000_000_000, current="A100 80GB SXM")
    part = plan_for(doc, rate=50, slo=20.0).partition("A100 80GB SXM")
    assert part is not None and part.kind == "whole-gpu"
    assert part.rejected == tuple(f"{n}: needs 60.00 GB, has {g} GB" for n, g in (
        ("1g.10gb", 10), ("1g.20gb", 20), ("2g.20gb", 20), ("3g.40gb", 40), ("4g.40gb", 40)))
    assert part.reason == ("a whole GPU: busy 10% of the step, 60.00 GB with headroom; no slice"
                           " or time share fits")


def test_time_slicing_without_mig() -> None:
    doc = make_doc([_candidate("L4", 10.0)], step_ms=10.0, util=10.0, current="L4")
    part = plan_for(doc, rate=50, slo=20.0).partition("L4")
    assert part is not None
    # floor(0.8 / 0.1) = 8 by utilization; floor(24 GiB / 2.4 GB) = 10 by memory
    assert (part.kind, part.per_gpu, part.resource, part.rejected) == \
        ("time-slicing", 8, "nvidia.com/gpu", ("L4 has no MIG profiles",))


def test_unknown_utilization_no_hpa_and_says_what_is_missing() -> None:
    doc = make_doc([_candidate("L4", 10.0)], util=None, peak=None, bound="inconclusive")
    p = plan_for(doc)
    part = p.partition("L4")
    assert part is not None and part.kind == "unknown"
    assert part.reason == "unknown utilization and peak memory: cannot tell whether a slice fits"
    assert p.hpa_target_pct is None
    assert [m.filename for m in manifests(p, "svc", "img", "q", "http://p")] == \
        ["deployment.yaml", "keda-scaledobject.yaml"]
    assert any(n.startswith("inconclusive diagnosis") for n in p.notes)
    assert any(n.startswith("no HPA on GPU utilization") for n in p.notes)


def test_kv_cache_bounds_the_batch() -> None:
    kv = KvBudget("m", 4096, "bf16", 13 * GIB, GIB, "2 x kv_heads ...")
    # (24 GiB x 0.8 - 13 GiB) / 1 GiB = 6.2 -> 6 requests
    assert max_concurrent(kv, 24 * GIB, 0.2) == 6
    assert max_concurrent(kv, 12 * GIB, 0.2) == 0
    doc = make_doc([_candidate("L4", 50.0), _candidate("T4", 50.0)])
    p = plan_for(doc, batch=16, kv=kv)
    c = p.capacity("L4")
    assert c is not None and (c.batch, c.per_replica_per_s) == (6, 120.0)
    assert p.excluded == (("T4: m does not fit (13.00 GiB before any KV cache, with 20% "
                          "headroom)"),)


def test_no_steps_is_an_error() -> None:
    doc = make_doc([_candidate("L4", 10.0)])
    data = doc.to_json()
    data["steps"]["mean_ms"] = None
    with pytest.raises(PlanError, match="no step time"):
        plan_for(Document.from_json(data))


@pytest.mark.parametrize(("text", "message"), [
    ("t,rate\n", "day.csv: a demand CSV needs a header and at least one row"),
    ("t,rate\n10,1\n5,2\n", "day.csv: row 3: times must increase ('5')"),
    ("t,rate\n25:61,1\n", "day.csv row 2: time '25:61' has minutes or seconds over 59"),
    ("t,rate\n0,-1\n", "day.csv row 2: rate '-1' must be a finite number >= 0"),
    ("t,rate\n0,nan\n", "day.csv row 2: rate 'nan' must be a finite number >= 0"),
    ("t,rate\n0,0\n", "day.csv: every rate is 0; nothing to serve"),
    ("t,rate\nnoon,1\n", "day.csv row 2: time 'noon' is not seconds or HH:MM"),
])
def test_demand_csv_errors(text: str, message: str) -> None:
    with pytest.raises(dm.DemandError) as err:
        dm.from_csv(text, "day.csv")
    assert str(err.value) == message


def test_demand_curve_shape() -> None:
    d = dm.from_csv("\ufefftime,rate\n00:00,100\n12:00:00,300\n", "d.csv")
    assert (d.t_s, d.durations_s, d.end_s, d.peak_per_s, d.mean_per_s) == \
        ((0.0, 43200.0), (43200.0, 43200.0), 86400.0, 300.0, 200.0)
    week = dm.from_csv("t,rate\n0,1\n86400,2\n172800,4\n", "w.csv")  # longer than a day
    assert (week.end_s, week.durations_s) == (259200.0, (86400.0, 86400.0, 86400.0))
    with pytest.raises(dm.DemandError, match="above 0"):
        dm.constant(0)


# Every profile, as NVIDIA's mig-parted default configuration names it with its instances per
# GPU (deployments/systemd/config-default.yaml @5ffc59f); compute slices of 7 and memory slices
# of 8 as the MIG User Guide's tables give them (1g: 1/8, the wider 1g and 2g: 2/8, 3g/4g: 4/8).
MIG_TABLES = {
    ("A100 40GB SXM", "A100 40GB PCIe"): ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb",
                                          "4g.20gb", "7g.40gb"),
    ("A100 80GB SXM", "A100 80GB PCIe", "H100 SXM", "H100 PCIe"): (
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ("H100 NVL",): ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb",
                    "7g.94gb"),
    ("H200 SXM", "H200 NVL"): ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb",
                               "4g.71gb", "7g.141gb"),
    ("B200",): ("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    ("GB200 (per GPU)",): ("1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb",
                           "7g.186gb"),
}
# the same geometry on every one: (compute slices, memory slices, instances per GPU)
MIG_GEOMETRY = [(1, 1, 7), (1, 1, 1), (1, 2, 4), (2, 2, 3), (3, 4, 2), (4, 4, 1), (7, 8, 1)]


def test_mig_profiles_data() -> None:
    rows = mig_profiles()
    assert len(rows) == 7 * 11
    for gpus, names in MIG_TABLES.items():
        for gpu in gpus:
            mine = [p for p in rows if p.gpu == gpu]
            assert [p.profile for p in mine] == list(names), gpu
            assert [(p.compute_slices, p.memory_slices, p.max_instances) for p in mine] == \
                MIG_GEOMETRY, gpu
            # the memory in the name is the 7g's x memory slices / 8, rounded as NVIDIA names it
            assert [p.memory_gb for p in mine] == \
                [float(n.split(".")[1].removesuffix("+me").removesuffix("gb")) for n in names]
            assert all(p.source.startswith("NVIDIA mig-parted deployments/systemd/config-default"
                                           ".yaml @5ffc59f (") for p in mine)
    assert all(CATALOG.gpu(p.gpu).mig_max_instances == 7 for p in rows)
    assert [p.profile for p in profiles_for("B200")] == ["1g.23gb", "1g.45gb", "2g.45gb",
                                                        "3g.90gb", "4g.90gb", "7g.180gb"]
    assert [p.profile for p in profiles_for("B200", media_extensions=True)][:2] == \
        ["1g.23gb", "1g.23gb+me"]
    assert profiles_for("L4") == ()
    assert slice_step_ms(10.0, 100.0, 0.5) == 20.0


def test_b200_and_gb200_get_slices() -> None:
    """The B200 and GB200 were 'no MIG profiles'; a small job now fits their 1g slice."""
    for gpu, profile, gb in (("B200", "1g.23gb", 23), ("GB200 (per GPU)", "1g.23gb", 23)):
        doc = make_doc([_candidate(gpu, 10.0)], step_ms=10.0, util=10.0, current=gpu)
        part = plan_for(doc, rate=50, slo=20.0).partition(gpu)
        assert part is not None
        # min(1/7, 1/8) = 12.5%: 10 ms x (0.9 + 0.1 / 0.125) = 17 ms <= 20; 2.4 GB <= 23 GB
        assert (part.kind, part.profile, part.per_gpu, part.step_ms) == ("mig", profile, 7, 17.0)
        assert f"fits {gb} GB" in part.reason


def test_manifests_structure_and_yaml_roundtrip() -> None:
    yaml = pytest.importorskip("yaml")
    doc = make_doc([_candidate("H100 SXM", 50.0, 45.0, 55.0)])
    p = plan_for(doc, rate=DAY, host=HostUsage(1.5, 1.0, 3 * GIB, 40))
    items = manifests(p, "svc", "img:1", 'sum(rate(x{app="svc"}[2m]))', "http://prom:9090")
    assert [m.filename for m in items] == ["deployment.yaml", "hpa.yaml",
                                           "keda-scaledobject.yaml"]
    for m in items:
        assert yaml.safe_load(m.text) == plain(m.obj)
        assert check(m) == []
    # 3g.40gb (3/7 of an H100): 50 x (0.5 + 0.5 x 7/3) = 83.3 ms -> 120/s x 0.8 = 96/s per
    # slice; 900/s at the peak -> 10 slices, 2 per GPU -> 5 GPUs vs 6 whole ones. Not one
    # replica, so the manifests keep whole GPUs.
    part = p.partition("H100 SXM")
    assert part is not None
    assert (part.profile, part.step_ms, part.gpus_at_peak) == ("3g.40gb", 83.3333, 5)
    assert part.reason.endswith("; 10 replicas at the peak, 2 a GPU: 5 GPUs of capacity against"
                                " 6 whole GPUs")
    assert p.deploy_on is None
    deploy, hpa, keda = (plain(m.obj) for m in items)
    res = deploy["spec"]["template"]["spec"]["containers"][0]["resources"]
    # 1.5 cores x 1.2 = 1800m; 3 GiB x 1.2 = 3687 MiB (rounded up)
    assert res == {"requests": {"cpu": "1800m", "memory": "3687Mi", "nvidia.com/gpu": "1"},
                   "limits": {"nvidia.com/gpu": "1", "memory": "3687Mi"}}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 6)
    assert hpa["spec"]["metrics"][0]["pods"] == {
        "metric": {"name": "DCGM_FI_DEV_GPU_UTIL"},
        "target": {"type": "AverageValue", "averageValue": "40"}}
    assert keda["spec"]["triggers"][0]["metadata"] == {
        "serverAddress": "http://prom:9090", "query": 'sum(rate(x{app="svc"}[2m]))',
        "threshold": "160"}
    assert "# peak job CPU 1.50 cores over 40 host samples, +20%" in items[0].text


def test_manifests_validate_against_kubernetes_openapi() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    yaml = pytest.importorskip("yaml")
    p = plan_for(make_doc([_candidate("H100 SXM", 50.0)]), rate=DAY,
                 host=HostUsage(1.5, 1.0, 3 * GIB, 40))
    items = {m.filename: yaml.safe_load(m.text)
             for m in manifests(p, "svc", "img", "q", "http://p")}
    for name in ("deployment.yaml", "hpa.yaml"):
        kv.validate(items[name], "1.30.0", strict=True)
    broken = {**items["hpa.yaml"], "spec": {**items["hpa.yaml"]["spec"], "maxReplicas": "six"}}
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, "1.30.0", strict=True)


def test_plan_json_is_strict() -> None:
    p = plan_for(make_doc([_candidate("H100 SXM", 50.0)]), rate=DAY)
    data = json.loads(json.dumps(p.to_json(), allow_nan=False))
    assert list(data) == ["schema_version", "workload", "inputs", "demand", "candidates",
                          "excluded", "partitions", "recommended", "reason", "deploy_on", "autoscaling",
                          "notes"]
    assert data["candidates"][0]["replicas"]["series"] == [1, 2, 6, 3]


def test_text_escapes_control_characters_from_data() -> None:
    from rightsize.analyzers.plan.plan import PlanInputs as Inputs

    doc = make_doc([_candidate("H100 SXM", 50.0)])
    curve = dm.from_csv(DAY, "evil\x1b[31m.csv")
    p = build(doc, from_document(doc), Inputs(10, "samples", None, curve, 0.2), CATALOG)
    text = render(p)
    assert "\x1b" not in text and "evil\\x1b[31m.csv (4 rows)" in text
