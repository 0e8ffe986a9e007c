"""The serving rows of ``rightsize fleet metrics`` as text: per vLLM/SGLang workload its
measured TTFT and TPOT p95 against the SLO, and the cheaper configuration that meets it.

Input: :class:`~rightsize.analyzers.fleet_metrics.serving.ServingRow` rows. Output: plain text
(empty without rows). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from rightsize.analyzers.fleet_metrics.serving import ServingRow
from rightsize.reports.fmt import ms, safe_text, usd


def serving_text(rows: Sequence[ServingRow]) -> str:
    if not rows:
        return ""
    lines = ["", "Serving (vLLM/SGLang metrics):"]
    for r in rows:
        model = f" {r.model_name}" if r.model_name else ""
        slo = (f" (SLO {r.ttft_p95_slo_ms:g} / {r.tpot_p95_slo_ms:g} ms)"
               if r.ttft_p95_slo_ms is not None and r.tpot_p95_slo_ms is not None else "")
        lines.append(safe_text(
            f"  {r.workload} [{r.engine}{model}]: {r.pods} pods, {r.rate_per_s:.3g} req/s; "
            f"TTFT p95 {ms(r.ttft_p95_ms)}, TPOT p95 {ms(r.tpot_p95_ms)}{slo}", True))
        if r.recommended:
            cost = f"{usd(r.recommended_cost_per_hour_usd)}/h" \
                if r.recommended_cost_per_hour_usd is not None else "unpriced"
            now = f" (now {usd(r.cost_per_hour_now_usd)}/h)" \
                if r.cost_per_hour_now_usd is not None else ""
            lines.append(safe_text(f"    cheapest meeting the SLO: {r.recommended}: {cost}{now}",
                                   True))
        lines.append(safe_text(f"    {r.why}", True))
        if r.calibrated_by:
            lines.append(safe_text(f"    calibrated by: {r.calibrated_by}", True))
    return "\n".join(lines) + "\n"
