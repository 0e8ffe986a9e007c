"""Each capture of a job against the one before it, and what the job page shows of a capture.

Runs on a thread once a run of a job upload is done (never on the event loop): the capture's
summary (:func:`capture_summary`, written as ``runs/<id>/capture.json``) and its check against
the previous finished capture of the same job (:func:`check`). A capture whose step is slower
than the previous one's by more than the threshold is a regression, with ``rightsize
compare``'s attribution (its top changes, matched by top ops between the two stored documents).

**Step time** of a capture: the job's own median step before the capture (``job_step_ms``, the
upload's label: unprofiled, tens of steps) when both captures have it, else the analysis'
mean profiled step (``steps.mean_ms``). **Cost per month**: the job running all month on what it
runs now, ``usd_per_hour`` of the current GPU's candidate x 730 h; and the recommended GPU for
the same steps: its ``usd_per_1k_steps`` x the steps the job makes in 730 h at its measured
step time. Null when the sizing has no price (a CPU run, an unpriced GPU).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from rightsize.rundir import write_json_atomic

log = logging.getLogger("rightsize.serve")
HOURS_PER_MONTH = 730.0
MAX_PARSED_BYTES = 8 * 1024 * 1024  # a document parsed for a summary or a comparison
CAPTURE_JSON = "capture.json"
ANALYSIS_JSON = "analysis.json"


def load_document(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / ANALYSIS_JSON
    try:
        if path.stat().st_size > MAX_PARSED_BYTES:
            return None
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def capture_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """What the job page shows of one capture, from its analysis document."""
    steps = doc.get("steps") or {}
    diagnosis = doc.get("diagnosis") or {}
    sizing = doc.get("sizing") or {}
    step_ms = steps.get("mean_ms")
    candidates = {c.get("gpu"): c for c in sizing.get("candidates") or [] if isinstance(c, dict)}
    current = candidates.get(sizing.get("current")) or {}
    recommended = candidates.get(sizing.get("recommended")) or {}
    per_hour = current.get("usd_per_hour")
    per_1k = recommended.get("usd_per_1k_steps")
    steps_a_month = HOURS_PER_MONTH * 3.6e6 / step_ms if step_ms else None
    return {
        "step_ms": step_ms, "steps": steps.get("count"), "verdict": diagnosis.get("bound"),
        "confidence": diagnosis.get("confidence"),
        "shares_pct": diagnosis.get("shares_pct") or {},
        "current": sizing.get("current"), "sizing": sizing.get("verdict"),
        "recommended": sizing.get("recommended"),
        "recommended_gpus": sizing.get("recommended_gpus"),
        "usd_per_month": round(per_hour * HOURS_PER_MONTH, 2) if per_hour else None,
        "recommended_usd_per_month": round(per_1k * steps_a_month / 1000, 2)
        if per_1k and steps_a_month else None,
    }


def write_summary(run_dir: Path) -> dict[str, Any] | None:
    """``capture.json`` beside a done run's document (once); None when it cannot be read."""
    path = run_dir / CAPTURE_JSON
    try:
        return dict(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError):
        pass
    doc = load_document(run_dir)
    if doc is None:
        return None
    summary = capture_summary(doc)
    write_json_atomic(path, summary)
    return summary


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((run_dir / CAPTURE_JSON).read_text("utf-8")))
    except (OSError, ValueError):
        return None


def previous_done(history: list[dict[str, Any]], upload_id: str) -> dict[str, Any] | None:
    """The newest finished-and-done capture uploaded before ``upload_id``."""
    before: list[dict[str, Any]] = []
    for item in history:
        if item["id"] == upload_id:
            break
        if item["status"] == "done":
            before.append(item)
    return before[-1] if before else None


def check(prev: dict[str, Any] | None, this: dict[str, Any], runs_dir: Path,
          threshold_pct: float) -> dict[str, Any]:
    """``this`` capture against ``prev`` (history items, :meth:`JobIndex.history`)."""
    if prev is None:
        return {"previous": None, "flagged": False, "threshold_pct": threshold_pct}
    if prev.get("job_step_ms") and this.get("job_step_ms"):
        basis, a_ms, b_ms = "job_step_ms", prev["job_step_ms"], this["job_step_ms"]
    else:
        basis, a_ms, b_ms = "step_ms", prev.get("step_ms"), this.get("step_ms")
    out: dict[str, Any] = {"previous": prev["id"], "basis": basis, "a_ms": a_ms, "b_ms": b_ms,
                           "threshold_pct": threshold_pct, "flagged": False}
    if not a_ms or b_ms is None:
        return out
    out["change_pct"] = round(100 * (b_ms - a_ms) / a_ms, 1)
    out["flagged"] = out["change_pct"] > threshold_pct
    if out["flagged"]:
        out["attribution"] = attribution(runs_dir / prev["run"], runs_dir / this["run"])
    return out


def attribution(a_dir: Path, b_dir: Path) -> list[dict[str, Any]]:
    """``rightsize compare``'s five top changes between two stored documents (empty when one
    is too large to parse here, or cannot be read as a document)."""
    from rightsize.analyzers.compare import Side, compare_sides
    from rightsize.analyzers.document import Document
    from rightsize.errors import RightsizeError

    docs = [load_document(d) for d in (a_dir, b_dir)]
    if docs[0] is None or docs[1] is None:
        return []
    try:
        result = compare_sides(Side(a_dir.name, Document.from_json(docs[0])),
                               Side(b_dir.name, Document.from_json(docs[1])))
    except (RightsizeError, ValueError, TypeError, KeyError) as exc:
        # the check stands without it (a document of another version, damaged on disk)
        log.warning("no attribution between %s and %s: %s", a_dir.name, b_dir.name, exc)
        return []
    return [c.to_json() | {"kind": c.kind} for c in result.top_changes[:5]]
