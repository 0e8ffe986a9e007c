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

from datetime import UTC, datetime
from typing import Any

from rightsize.fleet.schema import COLUMNS

SCANNED = datetime(2026, 11, 21, tzinfo=UTC)


def row(key: str, job: str, day: int, **kw: Any) -> dict[str, Any]:
    r: dict[str, Any] = dict.fromkeys(COLUMNS)
    r.update(key=key, job=job, kind="file", paths=[f"/data/{job}.json"], files=1, bytes=1,
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
