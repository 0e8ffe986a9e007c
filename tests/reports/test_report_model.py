"""The report model and the text renderer on inline documents: sections, empty states, caps."""

from __future__ import annotations

import copy
import json

import pytest

from rightsize.errors import OutputExistsError
from rightsize.reports import render
from rightsize.reports.model import build_model
from rightsize.reports.sections import MAX_TIMELINE_POINTS
from rightsize.reports.text import render_summary, render_text
from tests.report_docs import with_everything

KERNEL = "void at::native::vectorized_elementwise_kernel<4, AddFunctor>()"

BASE = {
    "schema_version": 1,
    "tool": {"name": "rightsize", "version": "0.1.0"},
    "inputs": [
        {"path": "/x/a.pt.trace.json.gz", "format": "kineto", "bytes": 10, "rank": 0, "events": 5}
    ],
    "devices": [
        {
            "index": 0,
            "rank": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "sm_count": 132,
            "memory_bytes": 80 << 30,
            "compute_capability": "9.0",
            "primary": True,
            "metrics": {},
        }
    ],
    "steps": {
        "count": 2,
        "mean_ms": 10.0,
        "min_ms": 9.0,
        "max_ms": 11.0,
        "source": "profiler_step",
        "device_aware": True,
        "dropped": 0,
        "names": [],
    },
    "metrics": {
        "device": 0,
        "gpu_util_pct": 40.0,
        "sm_efficiency_pct": None,
        "achieved_occupancy_pct": None,
        "tensor_core_kernel_pct": 0.0,
        "tensor_core_kernel_pct_extended": 0.0,
        "breakdown_ms": {
            "kernel": 4.0,
            "memcpy": 1.0,
            "memset": 0.0,
            "communication": 0.0,
            "runtime": 1.0,
            "dataloader": 3.0,
            "cpu_exec": 1.0,
            "other": 0.0,
            "step": 10.0,
        },
        "hta": None,
        "peak_memory_bytes": 8 << 30,
        "peak_reserved_bytes": None,
        "memory": [],
        "memcpy": [],
        "communication": None,
        "launch": None,
    },
    "top_kernels": [
        {
            "name": f"{KERNEL}{i}",
            "calls": 3,
            "total_ms": 1.0,
            "mean_us": 2.0,
            "max_us": 3.0,
            "pct": 5.0,
        }
        for i in range(20)
    ],
    "top_ops": [{"name": "aten::add", "calls": 3, "host_ms": 1.0, "gpu_ms": 2.0, "kernels": 3}],
    "ranks": [],
    "definitions": {"breakdown_ms": "TensorBoard plugin"},
    "notes": ["a note"],
}
CPU_ONLY = {
    **copy.deepcopy(BASE),
    "devices": [],
    "top_kernels": [],
    "top_ops": [],
    "steps": {**BASE["steps"], "count": 0, "mean_ms": None},
    "metrics": {
        **BASE["metrics"],
        "breakdown_ms": None,
        "peak_memory_bytes": None,
        "gpu_util_pct": None,
    },
}


def test_current_document_has_every_section_with_empty_states():
    m = build_model(BASE)
    assert m.title == "rightsize: a.pt.trace.json.gz"
    assert m.headline.device_name == "NVIDIA H100 80GB HBM3" and m.headline.step_ms == 10.0
    assert m.headline.bound is None and m.evidence.empty.startswith("No diagnosis")
    assert m.sizing.empty.startswith("No sizing") and m.timeline.empty
    assert [r.pct for r in m.breakdown.rows][:2] == [40.0, 10.0] and m.breakdown.empty is None
    assert len(m.kernels) == 15 and m.kernels[0].kind is None  # top-k
    assert m.memory.used_pct == 10.0 and m.memory.estimate == ()
    assert "bottleneck diagnosis: not in this analysis" in m.provenance.missing
    assert m.charts()["sizing"] == [] and m.charts()["timeline"]["nvml_gpu_util_pct"] is None


def test_cpu_only_run_without_steps():
    m = build_model(CPU_ONLY)
    assert m.headline.device_name is None and m.kernels == ()
    assert m.breakdown.empty.startswith("No steps found")
    assert m.memory.empty.startswith("No memory events")
    assert m.evidence.utilization == ()
    assert any(x.startswith("GPU: no GPU activity") for x in m.provenance.missing)
    assert any(x.startswith("steps: none found") for x in m.provenance.missing)


def test_full_document():
    doc = with_everything(BASE, name=KERNEL + "3")
    m = build_model(
        doc,
        manifest={
            "command": {"argv": ["/venv/bin/python3", "t.py", "--x"]},
            "environment": {"torch": "2.13.0", "cuda": None},
            "collectors": {"nvml": {"status": "missing", "reason": "no driver"}},
        },
    )
    h = m.headline
    assert (h.bound, h.confidence, h.verdict, h.recommended_gpu) == (
        "dataloader",
        0.72,
        "over-provisioned",
        "L4",
    )
    assert h.projected_step_ms == 190.0 and h.savings_pct == 61.5
    assert h.usd_per_1k_steps_now == pytest.approx(2.48 * 177.6 / 3600)
    assert m.title == "rightsize: python3 t.py --x"
    assert [s.name for s in m.evidence.shares][:3] == ["compute", "memory", "pcie"]
    assert m.evidence.thresholds[0].value == "5" and m.evidence.thresholds[0].note == "tb plugin"
    assert m.evidence.utilization[0].trace == 55.5 and m.evidence.utilization[0].nvml == 61.0
    k3 = next(k for k in m.kernels if k.name == KERNEL + "3")
    assert (k3.kind, k3.signal) == ("compute", "name")  # exact group
    assert (m.kernels[0].kind, m.kernels[0].signal) == ("memory", "roofline")  # family group
    assert len(m.timeline.t_ms) <= MAX_TIMELINE_POINTS and m.timeline.bucket_ms == 40.0
    assert all(v is not None for v in m.timeline.nvml_gpu_util_pct)  # gaps averaged over
    assert [r.label for r in m.sizing.rows][:2] == ["L4", "V100-SXM2-32GB"]
    assert m.sizing.rows[0].recommended and m.sizing.rows[1].current
    assert [c.label for c in m.sizing.chart_points if c.gpu == "T4"] == []  # not projected
    assert m.memory.estimate[0].name == "weights"
    assert m.recommendations[0].evidence == ("data loader wait 33% of the step",)
    assert ("cuda", "n/a") in [(t.name, t.value) for t in m.provenance.tools]
    assert "nvml: missing (no driver)" in m.provenance.missing
    json.dumps(m.charts(), allow_nan=False)


def test_summary_is_verdict_evidence_gpu_and_path():
    m = build_model(with_everything(BASE))
    lines = render_summary(m, "runs/x/report.html").splitlines()
    assert lines[0] == "Verdict: dataloader-bound (confidence 0.72); GPU over-provisioned"
    assert [x for x in lines if x.startswith("  - ")] == [
        "  - data loader wait is 33% of the step (threshold 5%)",
        "  - GPU idle 39% of the span, mostly host wait",
        "  - memcpy HtoD from pageable memory at 10 GB/s",
    ]
    assert lines[-2].startswith("Recommended GPU: L4 (19.0x slower), 190.00 ms per step")
    assert "(saves 61.5%)" in lines[-2] and lines[-1] == "Report: runs/x/report.html"
    colored = render_summary(m, None, color=True)
    assert colored.startswith("\033[1mVerdict") and "Report:" not in colored


def test_text_of_current_and_cpu_only_documents():
    text = render_text(BASE)
    assert text.startswith("Verdict: n/a (no diagnosis in this analysis)\n")
    assert "GPU: utilization 40.0%" in text and "dataloader" in text and "note: a note" in text
    assert "\033[" not in text
    cpu = render_text(CPU_ONLY)
    assert "no GPU in the trace" in cpu and "Peak memory: n/a" in cpu


def test_write_report_never_overwrites(tmp_path):
    out = tmp_path / "r.html"
    assert render.write_report(BASE, out) == out and "<!doctype html>" in out.read_text()
    with pytest.raises(OutputExistsError, match="--force"):
        render.write_report(BASE, out)
    render.write_report(BASE, out, force=True, fmt="text")
    assert out.read_text().startswith("Verdict:")
    assert json.loads(render.write_report(BASE, tmp_path / "a.json").read_text()) == BASE
    assert render.format_for("x.txt") == "text" and render.format_for("x") == "html"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_default_html_paths(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    assert render.default_html_path([tmp_path / "run"]) == tmp_path / "run" / "report.html"
    assert render.default_html_path([tmp_path / "t.json"]).name == "rightsize-report.html"
    assert render.default_html_path([], tmp_path / "o" / "a.json") == tmp_path / "o" / "report.html"


def test_renderers_share_one_interface():
    m = build_model(BASE)
    for name, r in render.RENDERERS.items():
        assert r.name == name and isinstance(r.render(m), str)
    with pytest.raises(Exception, match="unknown report format"):
        render.renderer("pdf")
