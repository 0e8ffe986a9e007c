"""What an on-demand run's own manifest says about its captures, and its closing lines.

An on-demand run directory holds no trace of its own: each capture is a run directory under
``captures/<id>/`` (:mod:`.capture`). The run's ``collectors.profiler`` lists them, with the
processes that listened; its ``collectors.analysis`` says each capture was analyzed on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.rundir import CAPTURES_DIR, capture_dirs, read_json_file

if TYPE_CHECKING:
    from rightsize.profiler.controller import Controller


def on_demand_collector(run_dir: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """``collectors.profiler`` of an on-demand run: its captures and its listening processes."""
    captures = []
    for cap_dir in capture_dirs(run_dir):
        manifest = read_json_file(cap_dir / "manifest.json") or {}
        entry = manifest.get("capture") or {}
        captures.append({"id": cap_dir.name, "reason": entry.get("reason"),
                         "status": manifest.get("status"),
                         "traces": len((manifest.get("files") or {}).get("traces") or [])})
    with_traces = [c for c in captures if c["traces"]]
    listening = [r for r in records if r.get("on_demand")]
    if with_traces:
        status, reason = "collected", None
    elif not listening:
        status = "missing"
        reason = "on-demand: no process of the job listened (none imported torch)"
    else:
        status = "missing"
        reason = (f"on-demand: {len(captures)} capture(s), none recorded a trace" if captures
                  else "on-demand: no capture was asked for (rightsize trigger RUN_DIR)")
    processes = [{k: r.get(k) for k in ("pid", "rank", "state", "on_demand", "skipped", "notes")}
                 for r in records if "pid" in r]
    return {"status": status, "reason": reason, "mode": "on-demand",
            "step_detection": None, "traces": 0, "captures": captures, "processes": processes}


def on_demand_analysis(controllers: list[Controller]) -> dict[str, Any]:
    """``collectors.analysis`` of an on-demand run: each capture has its own."""
    held = next((c.held_back for c in controllers if c.held_back), None)
    return {"status": "skipped", "reason": f"on-demand: each capture is analyzed in "
                                           f"{CAPTURES_DIR}/<id>/", "auto_held_back": held}


def describe_captures(run_dir: Path, manifest: dict[str, Any]) -> list[str]:
    """The closing lines of an on-demand run."""
    prof = manifest["collectors"]["profiler"]
    captures = prof.get("captures") or []
    lines = [f"run directory: {run_dir}/",
             f"  captures: {len(captures)} in {run_dir / CAPTURES_DIR}/"]
    for cap in captures[-5:]:
        lines.append(f"    {cap['id']}  ({cap['reason']}, {cap['traces']} trace(s), "
                     f"{cap['status']})")
    if not captures:
        lines.append(f"  note:     {prof.get('reason')}")
    exit_ = manifest["exit"]
    ended = f"signal {exit_['signal']}" if exit_["signal"] else f"exit code {exit_['code']}"
    lines.append(f"job ended with {ended} after {manifest['duration_s']} s")
    latest = next((c for c in reversed(captures) if c["traces"]), None)
    if latest is not None:
        lines.append(f"next: rightsize report {run_dir / CAPTURES_DIR / latest['id']}")
    return lines
