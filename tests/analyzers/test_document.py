"""The typed analysis document: round trip, versions, the contract doc, the public API."""

from __future__ import annotations

import doctest
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rightsize
from rightsize.analyzers.document import SCHEMA_VERSION, Document, DocumentError
from rightsize.analyzers.document import diagnosis as dd
from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document import sizing as ds
from rightsize.analyzers.document.codec import json_fields, json_key
from rightsize.analyzers.sections import SECTIONS
from tests.report_docs import real_doc

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "runs" / "train_dataloader-cpu"


def test_round_trip_is_exact_text():
    doc = real_doc()
    assert json.dumps(Document.from_json(doc).to_json(), indent=2) == json.dumps(doc, indent=2)


def test_versions_and_shapes_are_one_line_errors(tmp_path):
    doc = real_doc()
    with pytest.raises(DocumentError, match="schema_version 2 is newer than this rightsize"):
        Document.from_json({**doc, "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(DocumentError, match=r"document.steps.count: expected int, found 'x'"):
        Document.from_json({**doc, "steps": {**doc["steps"], "count": "x"}})
    with pytest.raises(DocumentError, match="the key 'metrics' is missing"):
        Document.from_json({k: v for k, v in doc.items() if k != "metrics"})
    bad = tmp_path / "a.json"
    bad.write_text("{")
    with pytest.raises(DocumentError, match="not JSON"):
        Document.from_json(bad)


def test_added_keys_survive_a_round_trip():
    doc = real_doc()
    doc["diagnosis"]["precision"] = {"dominant": "fp32"}
    doc["sizing"]["candidates"][0]["projected_step_ms_range"] = [1.0, 2.0]
    back = Document.from_json(doc)
    assert back.diagnosis.extra == {"precision": {"dominant": "fp32"}}
    assert back.to_json() == doc


def _documented(section: str) -> set[str]:
    """Backticked keys in the contract doc's table or paragraph for ``section``."""
    text = (ROOT / "docs" / "json-contract.md").read_text()
    return set(re.findall(r"`([a-z_0-9]+)`", _section(text, section)))


def _section(text: str, name: str) -> str:
    start = text.index(f"\n`{name}`")
    end = text.find("\n\n`", start + 2)
    return text[start:end if end > 0 else None]


def _keys(cls: type) -> set[str]:
    return {json_key(f) for f in json_fields(cls)}


@pytest.mark.parametrize("section, cls", [
    ("metrics", dm.Metrics), ("diagnosis", dd.Diagnosis), ("timeline", ds.Timeline),
    ("steps.per_step", dm.StepSplit), ("steps.split_over_time", dm.SplitOverTime),
    ("host_timeline", ds.HostTimeline),
])
def test_contract_doc_lists_every_key_of_the_classes(section, cls):
    assert _keys(cls) <= _documented(section)


@pytest.mark.parametrize("section, cls", [("metrics", dm.Metrics), ("diagnosis", dd.Diagnosis)])
def test_every_key_the_contract_doc_tables_name_exists(section, cls):
    rows = re.findall(r"^\| ([^|]+) \|", _section((ROOT / "docs" / "json-contract.md")
                                                  .read_text(), section), re.MULTILINE)
    named = {k for row in rows for k in re.findall(r"`([a-z_0-9]+)`", row)}
    assert named and named <= _keys(cls)


def test_contract_doc_top_level_table_matches_the_document():
    text = (ROOT / "docs" / "json-contract.md").read_text()
    table = text[text.index("| key | type | meaning |"):]
    table = table[:table.index("\n\n")]
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE))
    assert rows == _keys(Document) | {s.key for s in SECTIONS if s.node is not None}
    assert _keys(ds.Sizing) | _keys(ds.Candidate) <= _documented("sizing")


def test_public_api_doctest(monkeypatch):
    import rightsize.api

    monkeypatch.chdir(ROOT)
    result = doctest.testmod(rightsize.api)
    assert result.attempted >= 5 and result.failed == 0


def test_analysis_object_frames_and_reports(tmp_path):
    a = rightsize.analyze(SAMPLE)
    assert a.diagnosis.bound == "dataloader" and a.sizing.recommended is None  # CPU-only
    assert a.ranks[0].kernels.height == 0 and a.ranks[0].ops.height > 0
    assert a.report("text").startswith("Verdict: dataloader-bound")
    assert a.write_report(tmp_path / "r.html").read_text().startswith("<!doctype html>")
    assert "<pre class='rightsize'>Verdict: dataloader-bound" in a._repr_html_()
    saved = tmp_path / "a.json"
    saved.write_text(json.dumps(a.to_json()))
    b = rightsize.Analysis.from_json(saved)
    assert b.to_json() == a.to_json() and not b.has_frames
    with pytest.raises(rightsize.RightsizeError, match="read from JSON: it has the document"):
        b.ranks[0]
    run = rightsize.open_run(SAMPLE)  # the run's manifest shows in the report's provenance
    assert run.diagnosis == a.diagnosis
    assert "<dt>command</dt><dd>/tmp/venv/bin/python samples/train_dataloader.py</dd>" \
        in run.report("html")
    assert "<dt>command</dt>" not in a.report("html")


def test_tb_plugin_definitions_are_wired_through():
    a = rightsize.analyze(SAMPLE, definitions="tb-plugin")
    assert a.document.definitions["steps"].startswith("TensorBoard plugin 0.4.3 step bounds "
                                                      "with its defects reproduced")
    with pytest.raises(rightsize.RightsizeError, match="unknown definitions 'x'"):
        rightsize.analyze(SAMPLE, definitions="x")


def test_import_rightsize_stays_cheap():
    code = ("import sys, rightsize; rightsize.analyze; rightsize.Analysis; "
            "print(sorted(m for m in ('polars', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_contract_doc_lists_the_self_ops_keys():
    text = (ROOT / "docs" / "json-contract.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `self_ops` |"))
    assert _keys(dm.SelfOp) <= set(re.findall(r"`([a-z_0-9]+)`", row))


@pytest.mark.parametrize("run", ["train_dataloader-cpu", "train_compute-h100", "train_pcie-h100"])
def test_published_is_the_json_read_back_without_writing_it(run, monkeypatch):
    """Rounding happens once, from the fields' num() metadata: the document the analysis
    publishes (node.published) equals its JSON read back, every value and key."""
    from rightsize.analyzers.document import build
    from rightsize.node import FrozenMap, published
    from rightsize.pipeline import analyze_document

    made = []
    monkeypatch.setattr(build, "rounded", lambda doc: made.append(doc) or published(doc))
    analyze_document([ROOT / "samples" / "runs" / run])
    raw = made[0]
    doc = published(raw)
    assert doc == Document.from_json(raw.to_json())
    assert json.dumps(doc.to_json()) == json.dumps(raw.to_json())
    assert doc.steps.mean_ms == round(raw.steps.mean_ms, 6) != raw.steps.mean_ms
    assert doc.diagnosis.step_ns == 0 < raw.diagnosis.step_ns  # internal: not published
    assert isinstance(doc.diagnosis.shares_pct, FrozenMap) and published(doc) is doc
