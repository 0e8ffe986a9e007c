"""The text rendering of a serving plan (``rightsize plan --format text``).

Input: a :class:`~rightsize.analyzers.plan.plan.Plan`. Output: plain text: what was measured
and where each number came from, one row per candidate GPU (cheapest autoscaled first, those
that miss the SLO last), the recommendation, partitions, autoscaling targets and what is
missing. Pure.
"""

from __future__ import annotations

from typing import Any

from rightsize.analyzers.plan.capacity import Capacity, SloStatus
from rightsize.analyzers.plan.plan import Plan
from rightsize.reports.fmt import safe_text, usd
from rightsize.reports.renderer import Style


def rate(v: float | None) -> str:
    """A rate people read: ``41,120``, ``184.9``, ``0.425`` (never ``4.112e+04``)."""
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


HEAD = ("GPU", "step ms (range)", "per replica/s", "SLO", "replicas peak/p95/mean",
        "GPU-h/day", "$/day auto", "$/day static", "saved")


def candidate_row(c: Capacity) -> tuple[str, ...]:
    rng = f"{c.step_ms:.3g}" + (f" ({c.step_ms_low:.3g}-{c.step_ms_high:.3g})"
                                if c.step_ms_low is not None and c.step_ms_high is not None
                                else "")
    r = c.replicas
    reps = "-" if r is None else f"{r.peak}/{r.p95}/{r.mean:g}"
    return (c.gpu, rng, rate(c.per_replica_per_s), str(c.slo), reps,
            "-" if r is None else f"{r.gpu_hours_per_day:g}", usd(c.usd_per_day),
            usd(c.static_usd_per_day), "-" if c.savings_pct is None else f"{c.savings_pct}%")


def candidate_order(c: Capacity) -> tuple[int, float, float]:
    miss = c.slo is SloStatus.MISSES
    return (int(miss) * 2 + int(c.usd_per_day is None), c.usd_per_day or 0.0, c.step_ms)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                      for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in rows]


def _workload(plan: Plan) -> list[str]:
    w, i = plan.workload, plan.inputs
    out = [(f"Measured: step {w.step_ms:.4g} ms ({w.step_source}) with {i.samples_per_step} "
           f"{i.unit}/step on {w.current_gpu or 'the recorded device'}")]
    out.append("  GPU busy: " + (f"{w.util_pct:.1f}%" if w.util_pct is not None else "unknown")
               + f" ({w.util_source})")
    out.append("  peak memory: " + (f"{w.peak_memory_bytes / 2**30:.2f} GiB"
                                    if w.peak_memory_bytes is not None else "unknown")
               + f" ({w.memory_source})")
    if w.host is not None:
        out.append(f"  host: {w.host.cpu_cores_peak:.2f} CPU cores and "
                   f"{w.host.rss_bytes_peak / 2**30:.2f} GiB RSS at peak ({w.host.samples} "
                   "host samples)")
    d = i.demand
    slo = f"{i.slo_ms:g} ms per step" if i.slo_ms is not None else "none"
    out.append(f"Demand: {d.source}: peak {rate(d.peak_per_s)} {i.unit}/s, mean "
               f"{rate(d.mean_per_s)} {i.unit}/s; SLO {slo}; headroom {i.headroom:.0%}")
    if i.kv is not None:
        out.append(f"LLM serving ({i.kv.model}, {i.kv.precision}, {i.kv.seq} tokens per "
                   f"request): {i.kv.fixed_bytes / 2**30:.2f} GiB fixed + "
                   f"{i.kv.kv_bytes_per_request / 2**20:.0f} MiB KV cache per request "
                   f"(estimator: {i.kv.definition})")
    return out


def _partitions(plan: Plan) -> list[str]:
    shown = [p for p in plan.partitions if p.gpu == plan.recommended or p.kind == "mig"]
    out = []
    for p in sorted(shown, key=lambda p: p.gpu != plan.recommended):
        step = f"; step {p.step_ms:.4g} ms" if p.step_ms is not None else ""
        peak = (f"; {p.gpus_at_peak} GPU{'' if p.gpus_at_peak == 1 else 's'} at the peak"
                if p.gpus_at_peak is not None else "")
        out.append(f"  {p.gpu}: {p.kind}, {p.per_gpu} per GPU, requests {p.resource}{step}"
                   f"{peak} - {p.reason}")
        out.extend(f"      passed over: {r}" for r in p.rejected[-2:])
    return out


def render(plan: Plan) -> str:
    lines = ["rightsize plan", "", *_workload(plan), ""]
    caps = sorted(plan.capacities, key=candidate_order)
    if caps:
        lines += _table([HEAD, *(candidate_row(c) for c in caps)])
    lines += [f"  excluded: {e}" for e in plan.excluded]
    lines += ["", ("per replica/s = batch / projected step (batch: --samples-per-step, or the KV "
                  "cache bound); replicas = ceil(rate / (per replica x (1 - headroom))), at "
                  "least 1; static = peak replicas all day")]
    lines += ["", ("Recommended: " if plan.recommended else "No recommendation: ") + plan.reason]
    parts = _partitions(plan)
    if parts:
        lines += ["", "Partitions (smallest MIG slice or time share that fits):", *parts]
    if plan.recommended is not None:
        lines += ["", "Autoscaling:"]
        if plan.hpa_target_pct is not None:
            lines.append(f"  HPA on DCGM_FI_DEV_GPU_UTIL: target {plan.hpa_target_pct}% "
                         f"(busy {plan.util_on_recommended_pct}% at full load x (1 - headroom))")
        lines.append(f"  KEDA on Prometheus: threshold {rate(plan.keda_threshold_per_s)} "
                     f"{plan.inputs.unit}/s per replica")
    if plan.notes:
        lines += ["", "Missing or uncertain:", *(f"  - {n}" for n in plan.notes)]
    # file and model names come from the user's data: control characters shown as escapes
    return safe_text("\n".join(lines) + "\n")


class PlanRenderer:
    """``rightsize plan`` (:mod:`rightsize.reports.renderer`'s protocol): a plan as text, JSON
    (docs/plan.md) or its page, with the manifests written (``manifests_check``: what checked
    them), the next command, and whether manifests were skipped (``--no-manifests``)."""

    def __init__(self, manifests: tuple[str, ...] = (), manifests_check: str | None = None,
                 next_command: str = "", skipped: bool = False) -> None:
        self.manifests, self.manifests_check = manifests, manifests_check
        self.next_command, self.skipped = next_command, skipped

    def text(self, model: Plan, style: Style) -> str:
        return render(model) + self._tail()

    def json(self, model: Plan) -> Any:
        return {**model.to_json(), "manifests": list(self.manifests),
                "manifests_check": self.manifests_check, "next": self.next_command}

    def html(self, model: Plan) -> str:
        from rightsize.reports.plan_html import render_html  # jinja2 for a page

        return render_html(model, list(self.manifests), self.next_command)

    def _tail(self) -> str:
        lines = [""]
        if self.manifests:
            lines.append(f"Manifests: {', '.join(self.manifests)}")
            lines.append(f"  {self.manifests_check or ''}")
        elif not self.skipped:
            lines.append("Manifests: none written (no recommended GPU to write them for)")
        lines.append(f"next: {self.next_command}")
        return safe_text("\n".join(lines) + "\n")
