"""The job section draws ``job.collective_checks`` (reports/job_view.py, templates/job.html.j2):
each collective type and size against NCCL's model on the job's fabric, slow ones first with
their cause, in the text report and the page (escaped)."""

from __future__ import annotations

import dataclasses

from rightsize.analyzers.document.job import CollectiveCheck
from rightsize.pipeline import analyze_document
from rightsize.reports.job_view import CHECKS_TITLE, job_view, text_lines
from rightsize.reports.render import render
from tests.job.test_job_naming_schemes import _rank

CHECKS = (
    CollectiveCheck(collective="allreduce", bytes=448, group_size=2, calls=20,
                    transfer_us=20.0, model_us=14.2, expected_us=20.0, algorithm="ring",
                    protocol="LL", busbw_gbs=0.022, expected_busbw_gbs=0.022, slowdown=1.0,
                    verdict="expected", cause=""),
    CollectiveCheck(collective="allreduce", bytes=64 << 20, group_size=2, calls=4,
                    transfer_us=1500.0, model_us=250.0, expected_us=250.0, algorithm="nvls",
                    protocol="Simple", busbw_gbs=44.739, expected_busbw_gbs=268.435,
                    slowdown=6.0, verdict="slow", cause="peer-to-peer off <b>or</b> compute"),
)


def _doc(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for r in (0, 1):
        _rank(r, "old").write(d / f"rank{r}.pt.trace.json")
    doc = analyze_document([d])
    assert doc.job is not None
    return dataclasses.replace(doc, job=dataclasses.replace(doc.job, collective_checks=CHECKS))


def test_the_job_view_lists_the_checks_slow_first(tmp_path):
    doc = _doc(tmp_path)
    view = job_view(doc.job)
    assert view is not None
    assert view.checks.headers[-2:] == ("NCCL's pick", "Verdict")
    assert [r[1] for r in view.checks.rows] == ["64.00 MiB", "448 B"]
    assert view.checks.rows[0][4:] == ("1,500.0", "250.0", "44.74", "268.44", "nvls Simple",
                                       "6.0x slower: peer-to-peer off <b>or</b> compute")
    assert view.checks.rows[1][-1] == "as expected"
    lines = text_lines(view)
    at = lines.index(f"  {CHECKS_TITLE}")
    assert lines[at + 1].split() == ["Collective", "Size", "per", "call", "Measured", "µs",
                                     "Expected", "µs", "NCCL's", "pick", "Verdict"]
    assert lines[at + 2].split()[:6] == ["all-reduce", "64.00", "MiB", "1,500.0", "250.0", "nvls"]


def test_the_page_draws_the_checks_escaped(tmp_path):
    page = render(_doc(tmp_path), "html")
    assert f"<h3>{CHECKS_TITLE.replace(chr(39), '&#39;')}</h3>" in page
    assert "6.0x slower: peer-to-peer off &lt;b&gt;or&lt;/b&gt; compute" in page
    assert "<b>or</b>" not in page
