"""The job index and its checks on a real run index (rightsize/serve/following.py), without a
server: captures whose runs finish out of order are checked against the right previous one."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rightsize.serve.following import Follower
from rightsize.serve.store import Store


def capture(store: Store, runs_dir: Path, name: str, job_step_ms: float,
            follower: Follower) -> tuple[str, str]:
    files = [{"name": f"{name}.json", "sha256": name * 8, "bytes": 1}]
    upload_id, run_id, _ = store.record(files, name * 8)
    follower.index.add(upload_id, {"job": "j", "capture": name, "reason": "trigger",
                                   "ranks": 1, "job_step_ms": job_step_ms, "namespace": None,
                                   "workload": None, "pod": None})
    (runs_dir / run_id).mkdir(parents=True)
    (runs_dir / run_id / "analysis.json").write_text(json.dumps({"steps": {"mean_ms": 5.0}}))
    time.sleep(0.01)  # upload times apart
    return upload_id, run_id


def checks(follower: Follower) -> list[tuple[Any, ...]]:
    return [(c["capture"], c["previous"], c["change_pct"], c["flagged"])
            for c in follower.index.history("j")]


def test_a_capture_finished_before_the_one_before_it_is_checked_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    follower = Follower(tmp_path / "runs.sqlite", tmp_path / "runs", threshold_pct=10.0)
    (u1, r1), (u2, r2) = (capture(store, tmp_path / "runs", n, ms, follower)
                          for n, ms in (("c1", 100.0), ("c2", 130.0)))
    store.finish(r2, {"verdict": "compute", "step_ms": 5.0})
    follower.finished(r2)  # c1 not done yet: c2 is checked as the first
    assert checks(follower) == [("c1", None, None, None), ("c2", None, None, False)]
    store.finish(r1, {"verdict": "compute", "step_ms": 5.0})
    follower.finished(r1)  # now c2 is checked against c1: 100 -> 130 ms, +30% > 10%
    assert checks(follower) == [("c1", None, None, False), ("c2", u1, 30.0, True)]
    (item,) = [c for c in follower.captures("j") if c["id"] == u2]
    # the stored documents are no analysis documents: the check stands, without attribution
    assert item["basis"] == "job_step_ms" and item["attribution"] is None
    assert item["summary"]["step_ms"] == 5.0 and item["url"] == f"/r/{u2}"
    follower.close()


def test_a_captures_summary_by_hand() -> None:
    from rightsize.serve.regression import capture_summary

    doc = {"steps": {"mean_ms": 50.0, "count": 10},
           "diagnosis": {"bound": "compute", "confidence": 0.8, "shares_pct": {"compute": 70.0}},
           "sizing": {"current": "H100 SXM", "recommended": "L4", "recommended_gpus": 2,
                      "verdict": "over-provisioned",
                      "candidates": [{"gpu": "H100 SXM", "usd_per_hour": 3.0},
                                     {"gpu": "L4", "usd_per_1k_steps": 0.02}]}}
    # the current GPU all month: 3.0 $/h x 730 h; the recommended for the same steps: 730 h of
    # 50 ms steps (52,560,000) at $0.02 per 1,000
    assert capture_summary(doc) == {
        "step_ms": 50.0, "steps": 10, "verdict": "compute", "confidence": 0.8,
        "shares_pct": {"compute": 70.0}, "current": "H100 SXM", "sizing": "over-provisioned",
        "recommended": "L4", "recommended_gpus": 2, "usd_per_month": 2190.0,
        "recommended_usd_per_month": 1051.2}
    assert capture_summary({})["usd_per_month"] is None
