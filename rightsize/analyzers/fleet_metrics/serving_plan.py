"""Each serving workload's row: measured p95s against the SLO, then the calibrated plan search
for the cheapest configuration that still meets it (module docstring of :mod:`.serving`).

Input: the pods' :class:`~rightsize.traces.serving_metrics.PodServing`, what each workload runs
on (:class:`~.serving.Deployed`, from its GPU row), the SLO, model configs by served model name
(``""``: the one config for every model), the GPUs to consider and the catalog. Output:
:class:`~.serving.ServingRow` per workload. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rightsize.analyzers.fleet_metrics.serving import (
    PLAN_REQUESTS,
    Deployed,
    Measured,
    ServingRow,
    base_row,
    group,
    measure,
    verdict_why,
)
from rightsize.analyzers.serving.factors import (
    ANY_GPU,
    DEFAULT_OVERHEAD_MS,
    Calibration,
    Factors,
    Spread,
)
from rightsize.analyzers.serving.load import poisson
from rightsize.analyzers.serving.online import tables, vllm_defaults
from rightsize.analyzers.serving.online_fit import OnlineFit, fit
from rightsize.analyzers.serving.plan import Load, NoPlan, Slo
from rightsize.analyzers.serving.planner import plan
from rightsize.analyzers.serving.search import Space
from rightsize.analyzers.serving.simulate import Limits
from rightsize.analyzers.serving.step import Deployment, ModelConfig, ServingError, step_model
from rightsize.catalog import Catalog
from rightsize.errors import RightsizeError
from rightsize.traces.serving_metrics import PodServing


def rows(pods: Sequence[PodServing], deployed: Mapping[str, Deployed], slo: Slo | None,
         configs: Mapping[str, ModelConfig], gpus: tuple[str, ...], max_gpus: int,
         catalog: Catalog) -> tuple[ServingRow, ...]:
    out = []
    for key, members in sorted(group(pods).items()):
        m = measure(members)
        base = base_row(key, members, m, slo)
        d = deployed.get(key[0])
        config = configs.get(key[2]) or configs.get("")
        meets = base["meets_slo"]
        extra: dict[str, object] = {"why": verdict_why(m, slo, meets if isinstance(meets, bool)
                                                       else None)}
        if d is not None:
            extra.update(gpu=d.gpu, gpus_per_pod=d.gpus_per_pod,
                         cost_per_hour_now_usd=(d.pods * d.gpus_per_pod * d.usd_per_gpu_hour
                                                if d.usd_per_gpu_hour is not None else None))
        if slo is not None and base["meets_slo"] is not None:
            extra.update(_search(config, key[2] or key[0], m, d, slo, gpus, max_gpus, catalog,
                                 extra.get("cost_per_hour_now_usd"), str(extra["why"])))
        out.append(ServingRow(**base, **extra))  # type: ignore[arg-type]
    return tuple(out)


def _search(config: ModelConfig | None, name: str, m: Measured, d: Deployed | None,
            slo: Slo, gpus: tuple[str, ...], max_gpus: int, catalog: Catalog,
            now: object, why: str) -> dict[str, object]:
    if config is None:
        return {"why": why + "; pass --hf-config to find the cheapest configuration"}
    if not (m.isl and m.osl and m.rate > 0 and m.tpot[0]):
        return {"why": why + "; no requests, token counts or TPOT in the window to size from"}
    isl, osl = max(round(m.isl), 1), max(round(m.osl), 1)
    cal, by = None, "uncalibrated (the current GPU is unknown)"
    try:
        if d is not None:
            f = _fit(config, d, m, isl, osl, catalog)
            cal, by = _calibration(f), f.described
        p = plan(config, name, Load.poisson(m.rate, isl, osl, PLAN_REQUESTS),
                 slo, Space(gpus, max_gpus), catalog, cal)
    except NoPlan as exc:
        return {"why": f"{why}; {exc}", "calibrated_by": by}
    except (RightsizeError, ServingError, ValueError) as exc:
        return {"why": f"{why}; cannot size it: {exc}", "calibrated_by": by}
    r = p.recommended
    assert r is not None
    out: dict[str, object] = {
        "recommended": r.label, "recommended_cost_per_hour_usd": r.cost_per_hour_usd,
        "recommended_ttft_p95_ms": r.ttft_p95_ms, "recommended_tpot_p95_ms": r.tpot_p95_ms,
        "calibrated_by": by}
    if isinstance(now, float) and now > 0:
        saving = 100.0 * (1 - r.cost_per_hour_usd / now)
        out["saving_pct"] = saving
        out["why"] = why + (f"; {r.label} meets it for {saving:.0f}% less" if saving > 0 else
                            "; nothing cheaper meets it")
    return out


def _fit(config: ModelConfig, d: Deployed, m: Measured, isl: int, osl: int,
         catalog: Catalog) -> OnlineFit:
    model = step_model(config, Deployment(d.gpu, d.gpus_per_pod), catalog=catalog)
    seqs, batched = vllm_defaults(catalog.gpu(d.gpu))
    limits = Limits(seqs, batched, model.kv_cache_tokens)
    reqs = poisson(m.rate / max(d.pods, 1), isl, osl, PLAN_REQUESTS)
    assert m.tpot[0] is not None
    return fit(tables(model, limits, reqs), limits, reqs, m.rate / max(d.pods, 1), m.tpot[0],
               m.ttft[0], "the workload's vLLM metrics")


def _calibration(f: OnlineFit) -> Calibration:
    """The online factor as the step model's calibration: every class and overhead x factor
    (the same as every step x factor), for every GPU."""
    k = f.factor
    factors = Factors(k, k, k, DEFAULT_OVERHEAD_MS["prefill"] * k,
                      DEFAULT_OVERHEAD_MS["decode"] * k)
    spread = f.spread if f.spread is not None else 0.25
    src = "the measured TTFT's residual at the calibrating rate"
    return Calibration({ANY_GPU: factors}, {"prefill": Spread(-spread, spread, src),
                                            "decode": Spread(-spread, spread, src)},
                       f.described)
