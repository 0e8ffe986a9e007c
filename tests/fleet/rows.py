"""A hand-made fleet table whose report is worked out by hand (tests/fleet/test_report.py).

Jobs (recorded days in November 2026; ``until`` is the 20th, so "this week" is 14-20 and the
week before 7-13):

====  =====  ======  ================  ======  ======  =====  ======  =======  ==========
job   team   day     sizing            $/GPUh  saves   $/1k   rec/1k  run GPUh rules
====  =====  ======  ================  ======  ======  =====  ======  =======  ==========
a     vision 19      over-provisioned  3.0     50%     0.04   0.02    2.0      dataloader-stall 10->4
b     nlp    18      right-sized       2.0     -       -      -       -        -
c     vision 12      over-provisioned  4.0     25%     0.08   0.06    1.0      host-bound 20->15
c     vision 19      right-sized       4.0     0%      -      -       1.5      host-bound 20->15
d     -      19      (bad input)
e     nlp    20      over-provisioned  2.0     60%     0.05   0.02    -        dataloader-stall 10->8
====  =====  ======  ================  ======  ======  =====  ======  =======  ==========

``c`` is recorded twice at the same path: the second recording (compute-bound, right-sized)
supersedes the first everywhere but in the week before; ``e``'s project is ``p1``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rightsize.fleet.schema import COLUMNS

SCANNED = datetime(2026, 11, 21, tzinfo=UTC)


def row(key: str, job: str, day: int, **kw: Any) -> dict[str, Any]:
    r: dict[str, Any] = dict.fromkeys(COLUMNS)
    r.update(key=key, job=job, kind="file", source="trace", paths=[f"/data/{job}.json"], files=1,
             bytes=1,
             recorded_at=datetime(2026, 11, day, 12, tzinfo=UTC), recorded_at_source="trace",
             scanned_at=SCANNED, rightsize_version="0", schema_version=1, status="ok",
             rules=[], gpus=1, nodes=1, steps=10, document=f"documents/{key}.json.gz")
    r.update(kw)
    return r


def rule(rid: str, what_if: float) -> dict[str, Any]:
    return {"id": rid, "title": f"fix {rid}", "step_ms": what_if, "step_ms_low": what_if,
            "step_ms_high": what_if}


ROWS = [
    row("ka", "a", 19, team="vision", gpu="H100 SXM", bound="dataloader",
        sizing_verdict="over-provisioned", recommended_gpu="L4", recommended_gpus=1,
        usd_per_gpu_hour=3.0, savings_pct=50.0, usd_per_1k_steps=0.04,
        recommended_usd_per_1k_steps=0.02, run_gpu_hours=2.0, step_ms=10.0,
        rules=[rule("dataloader-stall", 4.0)]),
    row("kb", "b", 18, team="nlp", gpu="A100 80GB SXM", bound="compute",
        sizing_verdict="right-sized", usd_per_gpu_hour=2.0, step_ms=5.0),
    row("kc1", "c", 12, team="vision", gpu="H100 SXM", bound="host",
        sizing_verdict="over-provisioned", recommended_gpu="L40S", recommended_gpus=1,
        usd_per_gpu_hour=4.0, savings_pct=25.0, usd_per_1k_steps=0.08,
        recommended_usd_per_1k_steps=0.06, run_gpu_hours=1.0, step_ms=20.0,
        rules=[rule("host-bound", 15.0)]),
    row("kc2", "c", 19, team="vision", gpu="H100 SXM", bound="compute",
        sizing_verdict="right-sized", usd_per_gpu_hour=4.0, savings_pct=0.0,
        run_gpu_hours=1.5, step_ms=20.0, rules=[rule("host-bound", 15.0)]),
    row("kd", "d.json", 19, status="bad-input", reason="/data/d.json: the file is empty",
        document=None, gpus=None, nodes=None, steps=None),
    row("ke", "e", 20, team="nlp", project="p1", gpu="A100 80GB SXM", bound="dataloader",
        sizing_verdict="over-provisioned", recommended_gpu="L4", recommended_gpus=1,
        usd_per_gpu_hour=2.0, savings_pct=60.0, usd_per_1k_steps=0.05,
        recommended_usd_per_1k_steps=0.02, step_ms=10.0,
        rules=[rule("dataloader-stall", 8.0)]),
]

USAGE = "label,gpu_hours\na,100\np1,10\nzzz,5\n"


# Workloads of cluster metrics (source ``metrics``, as fleet metrics --table writes them):
#
# ========  ======  ==========  =====  ======  =======  =========  ===========  ==========
# workload  day     window      GPUs   $/GPUh  $/month  rec/month  outcome      confidence
# ========  ======  ==========  =====  ======  =======  =========  ===========  ==========
# ml/web    20      7 d (168h)  4      2.0     5840     1460       1 x A100     high
# ml/small  19      1 d         1      3.5     2555     365        MIG 1g.10gb  medium
# ml/nosm   18      1 d         1      2.0     1460     -          inconclusive -
# ========  ======  ==========  =====  ======  =======  =========  ===========  ==========
#
# GPU-hours over the window (run_gpu_hours): web 4 x 168 = 672, small 24, nosm 24; a month's:
# web 4 x 730 = 2,920, small 730, nosm 730. Savings per month: web 4,380, small 2,190.


def metrics_row(key: str, workload: str, day: int, window_h: float, gpus: float,
                **kw: Any) -> dict[str, Any]:
    end = datetime(2026, 11, day, 12, tzinfo=UTC)
    ns, owner = workload.split("/")
    r: dict[str, Any] = dict.fromkeys(COLUMNS)
    r.update(key=key, job=workload, kind="workload", source="metrics",
             paths=["http://127.0.0.1:9090"], recorded_at=end, recorded_at_source="metrics",
             window_start=end - timedelta(hours=window_h), scanned_at=SCANNED,
             rightsize_version="0", schema_version=2, status="ok", team=ns, project=owner,
             labels_source="metrics", device="gpu", gpu="A100 80GB SXM",
             gpu_reported="NVIDIA A100-SXM4-80GB", gpus=int(gpus), nodes=int(gpus),
             run_gpu_hours=gpus * window_h, rules=[])
    r.update(kw)
    return r


METRICS = [
    metrics_row("mw", "ml/web", 20, 168, 4, sizing_verdict="over-provisioned",
                confidence_level="high", recommended_gpu="A100 80GB SXM", recommended_gpus=1,
                recommended="1 x A100 80GB SXM", savings_pct=75.0, usd_per_gpu_hour=2.0,
                usd_per_month=5840.0, recommended_usd_per_month=1460.0,
                sizing_reason="summed activity p95 60.0% needs 1 GPU(s) at 80% busy"),
    metrics_row("ms", "ml/small", 19, 24, 1, sizing_verdict="over-provisioned",
                confidence_level="medium", recommended_gpu="A100 80GB SXM",
                recommended="1 x MIG 1g.10gb on A100 80GB SXM", savings_pct=600 / 7,
                usd_per_gpu_hour=3.5, usd_per_month=2555.0, recommended_usd_per_month=365.0,
                sizing_reason="1g.10gb: 10 GB for 9.02 GB; 1/7 of the SMs for summed p95 8.0%"),
    metrics_row("mn", "ml/nosm", 18, 24, 1, usd_per_gpu_hour=2.0, usd_per_month=1460.0,
                sizing_reason="the duty cycle alone cannot decide"),
]
