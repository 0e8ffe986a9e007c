"""Analysis documents for the report tests: the sections the analysis is gaining (diagnosis,
sizing, recommendations, timeline, memory estimate) added to a real document in their documented
shapes, so the report is tested with and without them."""

from __future__ import annotations

import copy
import math
from typing import Any


def with_everything(doc: dict[str, Any], name: str = "nvjet") -> dict[str, Any]:
    """``doc`` plus every optional section; ``name`` is a kernel group the diagnosis decided."""
    out = copy.deepcopy(doc)
    out["diagnosis"] = {
        "bound": "dataloader",
        "confidence": 0.72,
        "shares_pct": {
            "compute": 30.0,
            "memory": 20.0,
            "pcie": 2.0,
            "dataloader": 33.0,
            "communication": 0.0,
            "host": 10.0,
            "idle": 5.0,
        },
        "evidence": [
            "data loader wait is 33% of the step (threshold 5%)",
            "GPU idle 39% of the span, mostly host wait",
            "memcpy HtoD from pageable memory at 10 GB/s",
            "a fourth piece of evidence the summary leaves out",
        ],
        "signals": [
            {"group": name, "class": "compute", "signal": "name"},
            {"group": "elementwise", "class": "memory", "signal": "roofline"},
        ],
        "thresholds": {
            "dataloader_pct": {"value": 5.0, "reason": "tb plugin"},
            "sm_active_low": 0.5,
        },
        "utilization": {"trace": {"gpu_util_pct": 55.5}, "nvml": {"gpu_util_pct": 61.0}},
    }
    out["recommendations"] = [
        {
            "id": "dataloader-workers",
            "title": "Use more DataLoader workers",
            "detail": "Set num_workers=8 and pin_memory=True.",
            "evidence": ["data loader wait 33% of the step"],
        },
    ]
    out["sizing"] = {
        "current": "V100-SXM2-32GB",
        "recommended": "L4",
        "recommended_gpus": 1,
        "verdict": "over-provisioned",
        "savings_pct": 61.5,
        "reason": "data-loader-bound: a cheaper GPU is as fast",
        "current_note": "matched",
        "candidates": [
            _cand("V100-SXM2-32GB", 1, 177.6, 2.48),
            _cand("L4", 1, 190.0, 0.80),
            _cand("H100-SXM5-80GB", 1, 150.0, 4.0),
            _cand("T4", 1, None, 0.35, fits=False),
        ],
    }
    t = [i * 10.0 for i in range(2000)]  # more points than the page keeps
    out["timeline"] = {
        "bucket_ms": 10.0,
        "t_ms": t,
        "trace_busy_pct": [50 + 40 * math.sin(x / 300) for x in t],
        "nvml_gpu_util_pct": [None if i % 97 == 0 else 60.0 for i in range(len(t))],
    }
    out["metrics"]["memory_estimate"] = {
        "memory_bytes": {
            "weights": 1 << 28,
            "gradients": 1 << 28,
            "optimizer": 3 << 29,
            "activations": 1 << 30,
            "kv_cache": 0,
            "overhead": 1 << 29,
            "total": 7 << 29,
        }
    }
    return out


def _cand(
    gpu: str, gpus: int, step: float | None, usd_h: float, fits: bool = True
) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "gpus": gpus,
        "fits_memory": fits,
        "projected_step_ms": step,
        "usd_per_hour": usd_h,
        "usd_per_1k_steps": None if step is None else usd_h * step * 1000 / 3.6e6,
        "energy_j_per_step": None if step is None else 0.3 * step,
        "price_provider": "aws",
        "price_instance": "x",
        "price_date_seen": "2025-01-01",
        "meets_constraints": True,
        "precision_used": "fp32",
        "parallelism": "none",
        "interconnect": "none",
    }
