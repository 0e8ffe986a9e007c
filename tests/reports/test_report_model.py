"""The report model and the text renderer on real pipeline documents: sections, empty states,
labels, caps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.errors import OutputExistsError
from rightsize.reports import render
from rightsize.reports.html import render_html
from rightsize.reports.model import build_model
from rightsize.reports.sections import MAX_TIMELINE_POINTS
from rightsize.reports.text import render_summary, render_text
from tests.report_docs import KERNEL, real_doc, typed, with_everything

INTERNAL = ("gpu_busy_pct_mean", "gpu_util_pct_mean", "tiny_op_us", "work_bound_pct")


def test_cpu_sample_has_every_section_with_empty_states():
    m = build_model(typed(real_doc()))
    assert m.title == "rightsize: rank0.pid17679.pt.trace.json.gz"
    assert m.headline.device_name is None and m.headline.step_ms == 38.651812
    assert (m.headline.bound, m.headline.recommended_gpu) == ("dataloader", None)  # CPU-only
    assert m.kernels == () and m.timeline is None and m.breakdown.empty is None
    assert m.overview.steps == 3 and m.overview.step_source == "profiler_step"
    assert m.evidence.utilization == ()  # no GPU, no NVML: nothing to pair
    assert any(x.startswith("GPU: no GPU activity") for x in m.provenance.missing)
    assert "utilization timeline: not in this analysis" in m.provenance.missing
    assert m.charts()["timeline"]["nvml_gpu_util_pct"] is None


def test_thresholds_and_signals_are_labelled_for_people():
    m = build_model(typed(real_doc()))
    names = [t.name for t in m.evidence.thresholds]
    assert "CPU-only: ops shorter than this are dispatch overhead (µs)" in names
    assert "Inconclusive with fewer kernels in the steps than" in names
    assert [s.name for s in m.evidence.signals] == ["no rule matched (counted as memory-bound)",
                                                     "kernel-name taxonomy",
                                                     "op-level roofline from recorded shapes"]
    page = render.render(typed(real_doc()), "html") + render_text(typed(real_doc()))
    assert not [k for k in INTERNAL if k in page]


def test_full_document():
    doc = typed(with_everything(real_doc(), name=KERNEL + "3"))
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
        "dataloader", 0.72, "over-provisioned", "L4")
    assert h.projected_step_ms == 190.0 and h.savings_pct == 61.5
    assert h.usd_per_1k_steps_now == pytest.approx(2.48 * 177.6 / 3600)
    assert m.title == "rightsize: python3 t.py --x"
    assert [s.name for s in m.evidence.shares][:3] == ["compute", "memory", "pcie"]
    k3 = next(k for k in m.kernels if k.name == KERNEL + "3")
    assert (k3.kind, k3.signal) == ("compute", "name")  # exact group
    assert (m.kernels[0].kind, m.kernels[0].signal) == ("memory", "roofline")  # family group
    assert len(m.kernels) == 15  # top-k
    assert len(m.timeline.t_ms) <= MAX_TIMELINE_POINTS and m.timeline.bucket_ms == 40.0
    assert all(v is not None for v in m.timeline.nvml_gpu_util_pct)  # gaps averaged over
    assert [r.label for r in m.sizing.rows][:2] == ["L4", "V100-SXM2-32GB"]
    assert m.sizing.rows[0].recommended and m.sizing.rows[1].current
    assert [r.label for r in m.sizing.chart_points if r.candidate.gpu == "T4"] == []  # unprojected
    assert m.memory.used_pct == 10.0
    assert m.recommendations[0].evidence_lines == ("data loader wait 33% of the step",)
    assert ("cuda", "n/a") in [(t.name, t.value) for t in m.provenance.tools]
    assert "nvml: missing (no driver)" in m.provenance.missing
    json.dumps(m.charts(), allow_nan=False)


def test_trace_and_nvml_utilization_pair_the_keys_the_analyzer_emits():
    m = build_model(typed(with_everything(real_doc())))
    rows = [(u.metric, u.trace, u.nvml) for u in m.evidence.utilization]
    assert rows == [
        ("GPU busy, mean over the steps (a kernel running)", 55.5, 61.0),
        ("GPU busy, peak (step / sample)", 70.25, 98.0),
        ("SM efficiency (trace estimate) / SM activity (GPM)", 40.0, 35.0),
        ("Achieved occupancy (trace estimate) / SM occupancy (GPM)", 30.0, None),
    ]


def test_summary_is_verdict_evidence_gpu_and_path():
    m = build_model(typed(with_everything(real_doc())))
    lines = render_summary(m, "runs/x/report.html").splitlines()
    assert lines[0] == "Verdict: dataloader-bound (confidence 0.72); GPU over-provisioned"
    assert [x for x in lines if x.startswith("  - ")] == [
        "  - data loader wait is 33% of the step (threshold 5%)",
        "  - GPU idle 39% of the span, mostly host wait",
        "  - memcpy HtoD from pageable memory at 10 GB/s",
    ]
    rec = next(i for i, x in enumerate(lines) if x.startswith("Recommended GPU: "))
    assert lines[rec].startswith("Recommended GPU: L4 (4.9x slower), 190.00 ms per step")
    assert "(saves 61.5%)" in " ".join(lines[rec:rec + 2])
    assert lines[-2] == "Why: data-loader-bound: a cheaper GPU is as fast"
    assert lines[-1] == "Report: runs/x/report.html"
    colored = render_summary(m, None, color=True)
    assert colored.startswith("\033[1mVerdict") and "Report:" not in colored


def test_text_of_a_sample():
    text = render_text(typed(real_doc()))
    # 0.79: the time inside Optimizer.step ranges is recorded host time (coverage), issue 38
    assert text.startswith("Verdict: dataloader-bound (confidence 0.79)")
    assert "Steps: 3 (profiler_step), mean 38.65 ms" in text and "\033[" not in text
    assert "no GPU in the trace" in text
    assert "note: no GPU kernels in the trace: GPU metrics are null" in text


def test_write_report_never_overwrites(tmp_path):
    doc = typed(real_doc())
    out = tmp_path / "r.html"
    assert render.write_report(doc, out) == out and "<!doctype html>" in out.read_text()
    with pytest.raises(OutputExistsError, match="--force"):
        render.write_report(doc, out)
    render.write_report(doc, out, force=True, fmt="text")
    assert out.read_text().startswith("Verdict:")
    assert json.loads(render.write_report(doc, tmp_path / "a.json").read_text()) == real_doc()
    assert render.format_for("x.txt") == "text" and render.format_for("x") == "html"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_default_html_paths(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    assert render.default_html_path([tmp_path / "run"]) == tmp_path / "run" / "report.html"
    assert render.default_html_path([tmp_path / "t.json"]).name == "t.rightsize.html"
    assert render.default_html_path([tmp_path / "a.pt.trace.json.gz", tmp_path / "b.json"]) == (
        Path("a.pt.trace+1.rightsize.html"))
    assert render.default_html_path([], tmp_path / "o" / "a.json") == tmp_path / "o" / "report.html"


def test_renderers_share_one_interface():
    from rightsize.reports.renderer import FORMATS, Style, render_as

    m = build_model(typed(real_doc()))
    for fmt in FORMATS:
        assert isinstance(render_as(render.ANALYSIS, m, fmt, Style()), str)
    assert render_as(render.ANALYSIS, m, "json") == m.document.dumps()
    with pytest.raises(Exception, match="unknown report format 'pdf'"):
        render_as(render.ANALYSIS, m, "pdf")


def test_provenance_of_a_real_run_directory():
    from rightsize.rundir import read_manifest
    from tests.report_docs import SAMPLES

    m = build_model(typed(real_doc()), read_manifest(SAMPLES / "train_dataloader-cpu"))
    assert m.title == "rightsize: python samples/train_dataloader.py"
    run = {r.name: r.value for r in m.provenance.run}
    assert run["exit"] == "code 0" and run["duration_s"] == "2.73"
    assert ("torch", "2.13.0+cpu") in [(t.name, t.value) for t in m.provenance.tools]
    assert m.provenance.missing[0] == ("nvml: missing (NVML unavailable: NVML library not found "
                                       "(no NVIDIA driver on this machine))")


@pytest.mark.parametrize(("detection", "fix"), [
    ("optimizer", "Rerun with fewer --active steps (or a longer job) for clean steps."),
    ("time", ("Rerun with a job that runs longer after the time window opens, or "
              "--window-delay-s 0 for clean steps.")),
])
def test_a_job_ended_while_recording_gets_the_fix_of_its_step_detection(detection, fix):
    from rightsize.reports.model import capture_warnings

    manifest = {"collectors": {"profiler": {"processes": [
        {"step_detection": detection, "state": "ended",
         "notes": ["profiler stopped at exit after 0 steps"]}]}}}
    warnings = capture_warnings(typed(real_doc()), manifest)
    assert warnings[0].endswith(fix)
    assert warnings[0].startswith("The job ended while the profiler was recording")
    assert capture_warnings(typed(real_doc()), {"collectors": {}}) == ()


def test_an_undated_price_is_marked_once_not_spelled_out_on_every_row():
    doc = with_everything(real_doc("train_compute-cpu"))
    cands = doc["sizing"]["candidates"]
    cands[0]["price_date_seen"] = "undated"
    cands[1].update(price_provider="Lambda", price_instance="gpu_1x_a10", price_date_seen="undated")
    cands[2]["price_date_seen"] = "2026-11-09"
    m = build_model(typed(doc))
    rows = {r.candidate.gpu: r for r in m.sizing.rows}
    assert (rows["V100-SXM2-32GB"].price_source, rows["V100-SXM2-32GB"].price_undated) == (
        "aws · x · ?", True)
    assert rows["L4"].price_source == "Lambda · gpu_1x_a10 · ?"
    assert (rows["H100-SXM5-80GB"].price_source, rows["H100-SXM5-80GB"].price_undated) == (
        "aws · x · 2026-11-09", False)
    html = render_html(m)
    assert "undated" not in html.split('id="gpus"')[1].split("</section>")[0]
    assert html.count("? in the price source: no source gives the date of that price") == 1
    for c in cands:
        c["price_date_seen"] = "2025-01-01"
    assert "? in the price source" not in render_html(build_model(typed(doc)))
