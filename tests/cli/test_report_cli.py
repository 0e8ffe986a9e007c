"""The real `rightsize report` command in a subprocess: the JSON contract for every sample, text,
where the page goes, reuse of a run directory's analysis.json, and never overwriting."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.conftest import REPO, SAMPLES, cli, shared_path

SAMPLE_RUNS = sorted(p for p in (SAMPLES / "runs").glob("*") if (p / "manifest.json").is_file())
SHARED_TRACES = [
    "tracelens-h100-gaunernst_bert-small-uncased__1016001.json.gz",
    "hta-cpu_only-rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
]
TYPES = {"int": int, "object": dict, "list": list, "list of str": list}


rightsize = cli

DIAGNOSIS_KEYS: set[str] = set()


def _contract() -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """docs/json-contract.md: top-level key -> (type, meaning); metrics key -> meaning."""
    top: dict[str, tuple[str, str]] = {}
    metrics: dict[str, str] = {}
    table = None
    for line in (REPO / "docs" / "json-contract.md").read_text().splitlines():
        if line.startswith("| key | type"):
            table = "top"
        elif line.startswith("| key | meaning"):
            table = "metrics"
        elif line.startswith("| diagnosis key"):
            table = "diagnosis"
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or table is None:
            continue
        for key in re.findall(r"`([^`]+)`", cells[0]):
            if table == "top":
                top[key] = (cells[1], cells[2])
            elif table == "metrics":
                metrics[key] = cells[1]
            elif "Absent" not in cells[-1]:  # an optional key (host_work) need not be there
                DIAGNOSIS_KEYS.add(key)
    return top, metrics


def _fields(meaning: str) -> set[str]:
    """The keys a row's meaning lists, without value lists and nested keys in parentheses."""
    while re.search(r"\([^()]*\)", meaning):
        meaning = re.sub(r"\([^()]*\)", "", meaning)
    return set(re.findall(r"`([a-z_]+)`", meaning))


def _check(value, meaning: str, where: str) -> None:
    want = _fields(meaning)
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, dict):
            assert want <= item.keys(), f"{where}: missing {sorted(want - item.keys())}"


def validate(doc: dict) -> None:
    top, metrics = _contract()
    assert {"schema_version", "metrics", "top_kernels"} <= top.keys()  # the doc was parsed
    for key, (typ, meaning) in top.items():
        if "Absent otherwise" in meaning and key not in doc:
            continue  # an optional section (job: only for the ranks of one job)
        assert key in doc, f"missing top-level key {key}"
        base = typ.replace(" or null", "")
        if doc[key] is None:
            assert "null" in typ, f"{key} is null"
            continue
        assert isinstance(doc[key], TYPES.get(base, object)), f"{key}: not {typ}"
        if base == "list of str":
            assert all(isinstance(x, str) for x in doc[key])
        if key != "metrics":
            _check(doc[key], meaning, key)
    assert doc["schema_version"] == 1
    for key, meaning in metrics.items():
        assert key in doc["metrics"], f"missing metrics.{key}"
        if doc["metrics"][key] is not None:
            _check(doc["metrics"][key], meaning, f"metrics.{key}")
    if doc["diagnosis"] is not None:
        assert DIAGNOSIS_KEYS and DIAGNOSIS_KEYS <= doc["diagnosis"].keys()
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN/Infinity


@pytest.mark.parametrize("run_dir", SAMPLE_RUNS, ids=[p.name for p in SAMPLE_RUNS])
def test_json_contract_of_every_sample_run(run_dir):
    res = rightsize("report", run_dir, "--format", "json", "-q")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    validate(doc)
    assert doc == json.loads((run_dir / "analysis.json").read_text())  # reused, not redone


@pytest.mark.parametrize("name", SHARED_TRACES)
def test_json_contract_of_shared_traces(name):
    res = rightsize("report", shared_path("traces", "kineto", name), "--format", "json", "-q")
    assert res.returncode == 0, res.stderr
    validate(json.loads(res.stdout))


@pytest.fixture
def run_copy(tmp_path):
    if not SAMPLE_RUNS:
        pytest.skip("no recorded sample runs under samples/runs")
    return shutil.copytree(SAMPLE_RUNS[0], tmp_path / "run")


def test_reuses_current_analysis_and_redoes_an_old_one(run_copy):
    analysis = run_copy / "analysis.json"
    doc = json.loads(analysis.read_text())
    doc["notes"] = ["marker-from-stored-analysis"]
    analysis.write_text(json.dumps(doc))
    res = rightsize("report", run_copy, "--format", "text")
    assert res.returncode == 0 and "marker-from-stored-analysis" in res.stdout
    doc["schema_version"] = 999  # written by another rightsize: analyze the traces again
    analysis.write_text(json.dumps(doc))
    res = rightsize("report", run_copy, "--format", "text", "-q")
    assert res.returncode == 0, res.stderr
    assert "marker-from-stored-analysis" not in res.stdout and "Steps:" in res.stdout


def test_text_is_verdict_first_without_colors_off_a_tty(run_copy):
    res = rightsize("report", run_copy, "--format", "text")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Verdict: ")
    assert "Recommended GPU: " in res.stdout and "Top kernels" not in res.stdout.split("\n")[0]
    assert "\033[" not in res.stdout


def test_html_goes_into_the_run_directory_and_is_re_rendered_in_place(run_copy):
    res = rightsize("report", run_copy)
    assert res.returncode == 0, res.stderr
    page = run_copy / "report.html"
    assert page.is_file() and page.stat().st_size < 2_000_000
    assert res.stdout.startswith("Verdict: ")
    assert f"Report: {page}" in res.stdout and f"next: xdg-open {page}" in res.stdout
    res = rightsize("report", run_copy)  # its own page: re-rendered, as "next:" promised
    assert res.returncode == 0, res.stderr
    assert f"Report: {page}" in res.stdout
    page.write_text("my notes")  # not rightsize's page: kept, one line
    res = rightsize("report", run_copy)
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "already exists; pass --force" in res.stderr and page.read_text() == "my notes"


def test_traces_report_to_the_current_directory(tmp_path):
    from tests.tracebuilder import two_step_trace

    trace = two_step_trace().write(tmp_path / "two.pt.trace.json")
    res = rightsize("report", trace, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "two.pt.trace.rightsize.html").is_file()
    assert "Report: two.pt.trace.rightsize.html" in res.stdout


def test_json_to_a_file_prints_where_and_next(tmp_path):
    from tests.tracebuilder import two_step_trace

    trace = two_step_trace().write(tmp_path / "two.pt.trace.json")
    out = tmp_path / "doc.json"
    res = rightsize("report", trace, "--format", "json", "-o", out)
    assert res.returncode == 0, res.stderr
    validate(json.loads(out.read_text()))
    assert f"wrote {out}" in res.stderr and "--format text" in res.stderr
    assert res.stdout == ""


def test_missing_input_is_one_line(tmp_path):
    res = rightsize("report", tmp_path / "nope.json", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.startswith("rightsize: error: ")
    assert res.stderr.count("\n") == 1 and not list(tmp_path.glob("*.html"))
