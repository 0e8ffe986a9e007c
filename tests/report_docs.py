"""Analysis documents for the report tests, built from real pipeline output.

:func:`real_doc` is the JSON document the pipeline makes of a sample run in ``samples/runs``
(recorded by this project on CPU). :func:`with_everything` adds what a CPU sample cannot have (a
GPU, NVML samples, a long timeline, a recommendation with its evidence) in exactly the shapes
the analyzer emits; :func:`typed` reads a JSON document back through
:meth:`Document.from_json`, so a key the document classes do not know fails the test.
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path
from typing import Any

from rightsize.analyzers.document import Document

KERNEL = "void at::native::vectorized_elementwise_kernel<4, AddFunctor>()"
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "runs"


@functools.cache
def _analyzed(run: str) -> dict[str, Any]:
    from rightsize.pipeline import analyze_paths

    return analyze_paths([SAMPLES / run])


def real_doc(run: str = "train_dataloader-cpu") -> dict[str, Any]:
    """A fresh copy of the pipeline's document of a sample run."""
    return copy.deepcopy(_analyzed(run))


def typed(doc: dict[str, Any]) -> Document:
    return Document.from_json(doc)


def with_everything(doc: dict[str, Any], name: str = "nvjet") -> dict[str, Any]:
    """``doc`` plus every optional section; ``name`` is a kernel group the diagnosis decided."""
    out = copy.deepcopy(doc)
    out["top_kernels"] = [
        {"name": f"{KERNEL}{i}", "calls": 3, "total_ms": 1.0, "mean_us": 2.0, "max_us": 3.0,
         "pct": 5.0, "class": None, "signal": None}
        for i in range(20)
    ]
    out["devices"] = [{
        "index": 0, "rank": 0, "name": "NVIDIA H100 80GB HBM3", "sm_count": 132,
        "memory_bytes": 80 << 30, "compute_capability": "9.0", "primary": True,
        "metrics": {"gpu_util_pct": 55.5, "sm_efficiency_pct": 40.0,
                    "achieved_occupancy_pct": 30.0, "kernel_ms": 5.0},
    }]
    out["metrics"].update(device=0, gpu_util_pct=55.5, sm_efficiency_pct=40.0,
                          achieved_occupancy_pct=30.0, peak_memory_bytes=8 << 30)
    out["diagnosis"] = {
        "bound": "dataloader",
        "confidence": 0.72,
        "device": "gpu",
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
            {"group": name, "class": "compute", "signal": "name", "time_ms": 2.0, "calls": 3},
            {"group": "elementwise", "class": "memory", "signal": "roofline", "time_ms": 1.0,
             "calls": 9},
        ],
        "signal_pct": {"roofline": 33.33, "name": 66.67},
        "thresholds": dict(out["diagnosis"]["thresholds"]),
        "utilization": {
            "trace": {"gpu_busy_pct_mean": 55.5, "gpu_busy_pct_peak_step": 70.25},
            "nvml": {"samples": 12, "gpu_util_pct_mean": 61.0, "gpu_util_pct_peak": 98.0,
                     "gpm_sm_util_pct_mean": 35.0, "gpm_sm_util_pct_peak": 50.0},
        },
        "device_match": {"reported": "NVIDIA H100 80GB HBM3", "catalog": "H100-SXM5-80GB",
                         "note": "matched by name"},
    }
    out["recommendations"] = [
        {
            "id": "dataloader-workers",
            "title": "Use more DataLoader workers",
            "detail": "Set num_workers=8 and pin_memory=True.",
            "evidence": "data loader wait 33% of the step",
        },
    ]
    out["sizing"] = {  # as Sizing.to_json() shapes it
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


def empty_doc() -> dict[str, Any]:
    """The document of an analysis with nothing in it (no trace, no samples)."""
    from rightsize.analyzers.analysis import analyze
    from rightsize.analyzers.document.build import document

    return document(analyze([]), []).to_json()
