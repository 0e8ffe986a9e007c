"""``rightsize fleet metrics`` output: a krr-style text table, CSV, JSON and an HTML page.

Input: a :class:`~rightsize.analyzers.fleet_metrics.model.FleetMetrics`. Outputs: text (one
line per workload: current -> recommended, confidence, cost per month now and recommended,
savings; the reason under it), CSV (one row per workload, the scalar keys of the fleet row),
JSON (the result's ``to_json()``: docs/fleet-metrics.md) and a self-contained HTML page (the
report's CSS, no script, no network). Pure.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from rightsize import __version__
from rightsize.analyzers.fleet_metrics.model import FleetMetrics, Outcome, WorkloadRow
from rightsize.reports.fmt import usd
from rightsize.reports.html import environment
from rightsize.reports.renderer import Style

GIB = 1 << 30
# CSV columns: the row's scalar keys, in the row's order (lists and mappings are JSON-only)
CSV_SKIP = ("labels", "samples", "metrics", "metrics_missing", "util_by_hour_pct", "evidence",
            "alternatives")


def current(r: WorkloadRow) -> str:
    if r.gpu is None:
        return r.gpu_reported or "unknown GPU"
    what = f"MIG {r.mig_profile_now} on {r.gpu}" if r.mig_profile_now else r.gpu
    gpus = f"{r.gpus_per_replica} x " if r.gpus_per_replica > 1 else ""
    return f"{r.replicas_now} x {gpus}{what}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_text(res: FleetMetrics, next_command: str = "") -> str:
    out = [f"rightsize fleet metrics: {res.source}",
           f"window {res.window_start} to {res.window_end}"
           + (f", step {res.step_s:g} s" if res.step_s else "")
           + f"; headroom {res.headroom:.0%}; {len(res.rows)} workloads", ""]
    head = f"{'WORKLOAD':<34} {'NOW':<24}    {'RECOMMENDED':<36} {'CONF':<6} " \
           f"{'$/MO NOW':>9} {'$/MO REC':>9} {'SAVES':>9}"
    out.append(head)
    for r in res.rows:
        rec = ("inconclusive" if r.outcome is Outcome.INCONCLUSIVE else
               "keep" if r.outcome is Outcome.KEEP else r.recommended)
        out.append(f"{_cut(r.workload, 34):<34} {_cut(current(r), 24):<24} -> "
                   f"{_cut(rec or '-', 36):<36} {(r.confidence or '-'):<6} "
                   f"{usd(r.cost_per_month_now_usd):>9} "
                   f"{usd(r.cost_per_month_recommended_usd):>9} "
                   f"{usd(r.savings_per_month_usd):>9}")
        out.append(f"    {r.outcome}: {_cut(r.why, 150)}")
    out.append("")
    out.append("Outcomes: " + ", ".join(f"{k} {v}" for k, v in res.outcomes.items()))
    if res.cost_per_month_now_usd is not None:
        out.append(f"Conclusive rows: {usd(res.cost_per_month_now_usd)}/month now, "
                   f"{usd(res.cost_per_month_recommended_usd)}/month recommended, saves "
                   f"{usd(res.savings_per_month_usd)}/month "
                   f"({res.hours_per_month:g} h a month)")
    out.extend(f"note: {n}" for n in res.notes)
    if next_command:
        out.append(f"next: {next_command}")
    return "\n".join(out) + "\n"


def render_csv(res: FleetMetrics) -> str:
    buf = io.StringIO()
    rows = [r.to_json() for r in res.rows]
    fields = [k for k in (rows[0] if rows else WorkloadRow.__dataclass_fields__)
              if k not in CSV_SKIP]
    fields += ["namespace", "owner", "metrics", "metrics_missing", "evidence"]
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        flat: dict[str, Any] = dict(r)
        flat["namespace"] = r["labels"].get("namespace", "")
        flat["owner"] = r["labels"].get("owner", "")
        for k in ("metrics", "metrics_missing", "evidence"):
            flat[k] = " | ".join(r[k])
        w.writerow(flat)
    return buf.getvalue()


def hour_bars(values: tuple[float | None, ...]) -> list[dict[str, Any]]:
    """The 24 hourly means as bars for the page (height in percent of 100, None: no data)."""
    return [{"h": h, "v": v, "height": max(1.0, min(100.0, v)) if v is not None else None}
            for h, v in enumerate(values)]


def render_html(res: FleetMetrics, next_command: str = "") -> str:
    rows = [{"r": r, "now": current(r), "hours": hour_bars(r.util_by_hour_pct),
             "peak_gib": (r.mem_used_peak_bytes / GIB
                          if r.mem_used_peak_bytes is not None else None)} for r in res.rows]
    return environment().get_template("fleet_metrics.html.j2").render(
        res=res, rows=rows, version=__version__, next_command=next_command)


class FleetMetricsRenderer:
    """``rightsize fleet metrics`` (:mod:`rightsize.reports.renderer`'s protocol): the
    workloads as text, JSON (docs/fleet-metrics.md), the page, or CSV (its own format), each
    ending with ``next_command`` where it has words."""

    extra_formats = ("csv",)

    def __init__(self, next_command: str = "") -> None:
        self.next_command = next_command

    def text(self, model: FleetMetrics, style: Style) -> str:
        from rightsize.reports.fleet_serving_text import serving_text

        return render_text(model, self.next_command) + serving_text(model.serving)

    def json(self, model: FleetMetrics) -> Any:
        return model.to_json()

    def html(self, model: FleetMetrics) -> str:
        return render_html(model, self.next_command)

    def csv(self, model: FleetMetrics, style: Style) -> str:
        return render_csv(model)
