"""The projected range and the precision mix in the report model, the HTML page and the text."""

from __future__ import annotations

from rightsize.reports import fmt
from rightsize.reports.model import build_model
from rightsize.reports.render import render
from rightsize.reports.text import render_summary
from tests.report_docs import real_doc, typed, with_everything

PRECISION = {"workload": "bf16", "time_pct": {"bf16": 92.5, "fp32": 7.5}, "unknown_pct": 1.76,
             "groups": [{"group": "elementwise", "precision": "fp32", "time_ms": 0.02},
                        {"group": "gemm", "precision": "bf16", "time_ms": 0.1976},
                        {"group": "reduction", "precision": None, "time_ms": 0.0036}]}


def _doc():
    doc = with_everything(real_doc())
    for c in doc["sizing"]["candidates"]:
        if c["gpu"] == "L4":
            c.update(projected_step_ms_low=171.0, projected_step_ms_high=209.0,
                     precision_used="bf16")
        if c["gpu"] == "T4":
            c.update(recommendable=False, precision_used="fp32",
                     warnings=["the T4 has no bf16 math: projected at fp32"])
    doc["precision"] = PRECISION
    return typed(doc)


def test_range_and_precision_in_the_model():
    m = build_model(_doc())
    h = m.headline
    assert (h.projected_step_ms, h.projected_low_ms, h.projected_high_ms) == (190.0, 171.0, 209.0)
    l4 = next(r.candidate for r in m.sizing.rows if r.candidate.gpu == "L4")
    assert (l4.projected_step_ms_low, l4.projected_step_ms_high) == (171.0, 209.0)
    t4 = next(r.candidate for r in m.sizing.rows if r.candidate.gpu == "T4")
    assert not t4.recommendable and t4.warnings == ("the T4 has no bf16 math: projected at fp32",)
    p = m.precision
    assert p is not None and p.workload == "bf16" and p.unknown_pct == 1.76
    assert [(r.name, r.pct) for r in p.mix] == [("bf16", 92.5), ("fp32", 7.5)]
    assert [(g.name, g.precision, g.ms) for g in p.groups] == [
        ("gemm", "bf16", 0.1976), ("elementwise", "fp32", 0.02), ("reduction", None, 0.0036)]
    point = next(c for c in m.charts()["sizing"] if c["label"] == "L4")
    assert (point["step_low_ms"], point["step_high_ms"]) == (171.0, 209.0)


def test_range_and_precision_in_html_and_text():
    m = build_model(_doc())
    page = render(_doc(), "html")
    assert "<th class=\"n\">Range (low-high)</th>" in page
    assert '<td class="n muted">171.00-209.00 ms</td>' in page
    assert "Workload precision: <b>bf16</b>" in page
    assert "bf16 92.5% · fp32 7.5%. " in page and "Precision unknown for 1.8% of all" in page
    assert '<span class="tag" title="the T4 has no bf16 math: projected at fp32">' in page
    summary = " ".join(render_summary(m, None).split())  # wrapped to the terminal: unwrap
    assert "190.00 ms per step (range 171.00-209.00 ms), " in summary
    assert "(range" not in render_summary(build_model(typed(with_everything(real_doc()))), None)


def test_ms_range():
    assert fmt.ms_range(4.8, 5.4) == "4.80-5.40 ms"
    assert fmt.ms_range(1500.0, 2500.0) == "1.50-2.50 s"
    assert fmt.ms_range(None, 2.0) == "n/a"
