"""What happens to a finished capture, for ``rightsize run --on-demand`` and ``rightsize trigger``.

A capture is a run directory (``captures/<id>/``): it is analyzed like any run (``analysis.json``
and ``report.html``), checked against the capture before it (step time worse by more than the
regression threshold: flagged with ``compare``'s attribution in the capture's manifest, and in
``compare.json``), said in one line on stderr, and queued for upload when ``--upload`` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rightsize.rundir import (
    ANALYSIS,
    REPORT_HTML,
    capture_dirs,
    read_json_file,
    write_json_atomic,
    write_manifest,
)

REGRESSION_PCT = 10.0  # --regression-pct: a capture this much slower a step than the last is one


@dataclass(frozen=True, slots=True)
class AfterCapture:
    """What to do with each capture."""

    warn: Callable[[str], None]
    say: Callable[[str], None]
    include_consumer: bool = False
    regression_pct: float = REGRESSION_PCT
    upload_url: str | None = None
    labels: dict[str, Any] | None = None
    wake_uploader: Callable[[], None] | None = None
    analyze: bool = True  # --no-report: captures are finished, not analyzed


def handle(run_dir: Path, cap_dir: Path, manifest: dict[str, Any], after: AfterCapture) -> None:
    """Analyze, report, check and queue one finished capture (never raises: the job runs on)."""
    try:
        _handle(run_dir, cap_dir, manifest, after)
    except Exception as exc:  # noqa: BLE001 - a capture must never end the job's run
        after.warn(f"capture {cap_dir.name}: {exc.__class__.__name__}: {exc}")


def _handle(run_dir: Path, cap_dir: Path, manifest: dict[str, Any], after: AfterCapture) -> None:
    from rightsize.cli.run import _analyze

    doc = None
    if not after.analyze:
        manifest["collectors"]["analysis"] = {"status": "skipped", "reason": "--no-report"}
    elif manifest["files"]["traces"]:
        manifest["collectors"]["analysis"] = _analyze(cap_dir, after.warn, after.include_consumer)
        doc = _write_report(cap_dir, manifest, after.warn)
        if doc is not None:
            manifest["capture"]["regression"] = regression(run_dir, cap_dir, doc,
                                                           after.regression_pct)
    else:
        manifest["collectors"]["analysis"] = {"status": "skipped",
                                              "reason": "the capture holds no trace"}
    manifest["status"] = "done"
    write_manifest(cap_dir, manifest)
    after.say(line(cap_dir, manifest, doc))
    if after.upload_url and manifest["files"]["traces"]:
        from rightsize.profiler import upload

        labels = dict(after.labels or {})
        labels |= {"capture": cap_dir.name, "reason": manifest["capture"].get("reason"),
                   "ranks": len(manifest["files"]["traces"]),
                   "job_step_ms": manifest["capture"].get("job_step_ms")}
        upload.enqueue(run_dir, cap_dir, after.upload_url, labels)
        if after.wake_uploader is not None:
            after.wake_uploader()


def _write_report(cap_dir: Path, manifest: dict[str, Any], warn: Callable[[str], None]) -> Any:
    from rightsize.analyzers.document import Document
    from rightsize.errors import RightsizeError
    from rightsize.reports.render import write_report

    if manifest["collectors"]["analysis"]["status"] != "written":
        return None
    try:
        doc = Document.from_json(cap_dir / ANALYSIS)
        write_report(doc, cap_dir / REPORT_HTML, force=True, manifest=manifest)
    except (RightsizeError, OSError, ValueError) as exc:
        warn(f"capture {cap_dir.name}: report not written: {exc}")
        return None
    manifest["files"]["analysis"] = ANALYSIS
    return doc


def regression(run_dir: Path, cap_dir: Path, doc: Any, threshold_pct: float
               ) -> dict[str, Any] | None:
    """This capture against the last one analyzed before it: the step change, and when it is
    worse by more than ``threshold_pct``, ``compare``'s top changes (``compare.json``)."""
    from rightsize.analyzers.compare import Side, compare_sides
    from rightsize.analyzers.document import Document

    before = [d for d in capture_dirs(run_dir) if d.name < cap_dir.name and (d / ANALYSIS).is_file()]
    if not before:
        return None
    previous = before[-1]
    prev_doc = Document.from_json(previous / ANALYSIS)
    # the job's own median step before each capture (unprofiled, tens of steps) when both
    # have it, else the captures' profiled mean step
    job_ms = [_job_step_ms(previous), _job_step_ms(cap_dir)]
    basis, (a_ms, b_ms) = (("job_step_ms", job_ms) if None not in job_ms
                           else ("steps.mean_ms", [prev_doc.steps.mean_ms, doc.steps.mean_ms]))
    if not a_ms or b_ms is None:
        return None
    change_pct = round(100 * (b_ms - a_ms) / a_ms, 1)
    out: dict[str, Any] = {"previous": previous.name, "basis": basis, "step_ms": [a_ms, b_ms],
                           "change_pct": change_pct, "threshold_pct": threshold_pct,
                           "flagged": change_pct > threshold_pct}
    if out["flagged"]:
        result = compare_sides(Side(previous.name, prev_doc), Side(cap_dir.name, doc))
        write_json_atomic(cap_dir / "compare.json", result.to_json())
        out["attribution"] = [c.to_json() | {"kind": c.kind} for c in result.top_changes[:5]]
        out["compare"] = "compare.json"
    return out


def _job_step_ms(cap_dir: Path) -> float | None:
    manifest = read_json_file(cap_dir / "manifest.json") or {}
    value = (manifest.get("capture") or {}).get("job_step_ms")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def line(cap_dir: Path, manifest: dict[str, Any], doc: Any) -> str:
    """One line about a finished capture."""
    cap = manifest["capture"]
    ranks = cap.get("ranks") or []
    recorded = [r for r in ranks if r.get("first_step") is not None]
    first = min((r["first_step"] for r in recorded), default=None)
    where = f"steps {first}-{first + cap['steps'] - 1}" if first is not None else "no steps"
    text = f"capture {cap_dir.name} ({cap.get('reason')}): {where} on {len(recorded)} rank(s)"
    if doc is not None:
        bound = doc.diagnosis.bound if doc.diagnosis else "not diagnosed"
        text += f", {doc.steps.mean_ms:.1f} ms a step, {bound}"
        reg = cap.get("regression")
        if reg and reg.get("flagged"):
            text += f"; REGRESSION {reg['change_pct']:+.1f}% vs {reg['previous']}"
        text += f"; report {cap_dir / REPORT_HTML}"
    else:
        reason = manifest["collectors"]["profiler"].get("reason")
        analysis = manifest["collectors"]["analysis"]
        text += f"; not analyzed: {analysis.get('reason') or reason}"
    return text
