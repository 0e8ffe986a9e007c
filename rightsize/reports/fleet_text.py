"""The text form of the fleet report (``rightsize fleet report --format text``).

Input: a :class:`~rightsize.fleet.report.FleetReport`. Output: lines of at most ~100 columns,
every name from the table passed through :func:`~rightsize.reports.fmt.safe_line` (job names
and reasons come from users' files). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rightsize.fleet.report import FleetReport, Group, Week
from rightsize.reports.fmt import safe_line, usd, usd_per_steps
from rightsize.reports.renderer import Style

NA = "n/a"


def _h(v: float | None) -> str:
    return NA if v is None else f"{v:,.1f}" if v >= 10 else f"{v:.3g}"


def _cut(s: object, width: int) -> str:
    text = safe_line(s)
    return text if len(text) <= width else text[: width - 1] + "…"


def _groups(title: str, groups: tuple[Group, ...]) -> list[str]:
    out = [f"{title:<30} {'jobs':>6} {'with hours':>10} {'GPU-hours':>10} {'cost':>10}"]
    out += [f"  {_cut(g.name, 28):<28} {g.jobs:>6} {g.jobs_with_hours:>10} {_h(g.gpu_hours):>10}"
            f" {usd(g.cost_usd):>10}" for g in groups]
    return out + [""]


def _delta(now: dict[str, int], before: dict[str, int]) -> str:
    keys = sorted(set(now) | set(before))
    return ", ".join(f"{k} {now.get(k, 0)} ({now.get(k, 0) - before.get(k, 0):+d})"
                     for k in keys) or "none"


def _weeks(this: Week | None, prev: Week | None) -> list[str]:
    if this is None or prev is None:
        return []
    out = [(f"Changes since the previous week ({this.start}..{this.end} vs "
            f"{prev.start}..{prev.end})"),
           f"  jobs: {this.jobs} ({this.jobs - prev.jobs:+d})",
           f"  sizing verdicts: {_delta(this.by_verdict, prev.by_verdict)}",
           f"  bottlenecks: {_delta(this.by_bound, prev.by_bound)}"]
    if this.savings_per_month_usd is not None or prev.savings_per_month_usd is not None:
        out.append(f"  savings on offer per month: {usd(this.savings_per_month_usd)} (previous"
                   f" week {usd(prev.savings_per_month_usd)})")
    return out


def render_text(r: FleetReport) -> str:
    days = f"recorded {r.first_day}..{r.last_day}" if r.first_day else "none recorded"
    out = [f"rightsize fleet report: {_cut(r.table, 60)}",
           f"{r.jobs} jobs {days}: {r.ok} ok, {r.bad_input} bad inputs, {r.failed} failed",
           f"GPU-hours: {safe_line(r.hours_note)}"]
    if r.usage_unmatched:
        out.append(f"  usage labels with no job: {_cut(', '.join(r.usage_unmatched), 80)}")
    out += [(f"total: {_h(r.gpu_hours)} GPU-hours, cost {usd(r.cost_usd)} (at each job's "
             "current GPU price)"), ""]
    out += _groups("By sizing verdict", r.by_verdict)
    out += _groups("By bottleneck", r.by_bound)
    out += _groups("By team", r.by_team)
    out += _groups("By source (trace, metrics)", r.by_source)
    monthly = r.hours_source == "usage"
    mixed = any(s.source == "metrics" for s in r.over_provisioned)
    head = ("savings per month" if monthly else
            "savings per month (metrics workloads, their own), then per 1k steps (trace jobs: "
            "no --usage)" if mixed else "savings per 1k steps (no --usage: per month unknown)")
    out.append(f"Over-provisioned jobs, by {head}: {r.over_provisioned_total}"
               + (f", {usd(r.savings_per_month_usd)} a month in all"
                  if r.savings_per_month_usd is not None else ""))
    for s in r.over_provisioned[:20]:
        per = (f"{usd(s.savings_per_month_usd)}/month" if s.savings_per_month_usd is not None
               else usd_per_steps(s.savings_per_1k_steps_usd))
        move = (f"{s.gpus or 1} x {s.gpu} -> {s.recommended}" if s.source == "metrics" else
                f"{s.gpus or 1} x {s.gpu} -> {s.recommended_gpus or 1} x {s.recommended_gpu}")
        out.append(f"  {_cut(s.job, 28):<28} {_cut(s.team or '-', 10):<10} saves "
                   f"{s.savings_pct or 0:>3.0f}% {per:>21}  {_cut(move, 72)}")
    if r.over_provisioned_total > 20:
        out.append(f"  ... {r.over_provisioned_total - 20} more (--format json lists "
                   f"{len(r.over_provisioned)})")
    out.append("")
    out.append("Most common bottlenecks and their fixes (tuning rules that fired)")
    for b in r.bottlenecks[:15]:
        gain = (f"; what-if: step {b.median_gain_pct:.0f}% shorter (median)"
                if b.median_gain_pct is not None else "")
        jobs = f"{b.jobs} job" + ("" if b.jobs == 1 else "s")
        out.append(f"  {jobs:>10} ({b.jobs_pct:.0f}%) {_cut(b.id, 28)}: "
                   f"{_cut(b.title, 60)}{gain}")
    if not r.bottlenecks:
        out.append("  none")
    out.append("")
    out += _weeks(r.this_week, r.previous_week)
    for c in r.changed[:20]:
        out.append(f"  {_cut(c.job, 40)}: {c.before} -> {c.after}")
    out.append("")
    if r.errors:
        out.append(f"Bad inputs and failures: {r.bad_input + r.failed}")
        out += [f"  {_cut(e.status, 9):<9} {_cut(e.reason or '', 88)}" for e in r.errors[:20]]
        out.append("")
    out.append("Each job's analysis: its row's document (under the table), or its report "
               "page with --format html.")
    return "\n".join(out) + "\n"


class FleetRenderer:
    """``rightsize fleet report`` (:mod:`rightsize.reports.renderer`'s protocol): the fleet
    report as text, JSON (docs/fleet.md) or its page, whose jobs link to ``links`` (a job's
    key -> its report page, relative to the page)."""

    def __init__(self, links: Mapping[str, str] | None = None) -> None:
        self.links: Mapping[str, str] = dict(links or {})

    def text(self, model: FleetReport, style: Style) -> str:
        return render_text(model)

    def json(self, model: FleetReport) -> Any:
        return model.to_json()

    def html(self, model: FleetReport) -> str:
        from rightsize.reports.fleet_html import render_fleet_html  # jinja2 for a page

        return render_fleet_html(model, self.links)
