"""What a newcomer reads agrees with itself and carries the fix (issue 41): the headline leads
with the biggest predicted win whatever its kind, the text carries each rule's fix and what-if,
an under-used GPU's advice agrees with the sizing, a cheaper GPU passed over is never "as
fast", and ``analyze --format html`` is accepted like ``report``'s."""

from __future__ import annotations

import json
import re

from tests.conftest import SAMPLES, cli


def text(run: str) -> str:
    res = cli("analyze", SAMPLES / "runs" / run, "--format", "text", "--no-report")
    assert res.returncode == 0, res.stderr
    return re.sub(r"\n {4,}", " ", res.stdout)  # wrapped lines joined


def test_the_headline_leads_with_the_biggest_win():
    # train_compute-h100: right-sized (no cheaper GPU keeps the step), while its fp32 GEMMs on
    # tensor cores are predicted at 5.52 ms of 10.63: 1 - 5.523134 / 10.633525 = 48%
    out = text("train_compute-h100")
    first, win = out.splitlines()[:2]
    assert first == "Verdict: compute-bound (confidence 0.69); GPU right-sized"
    assert win == ("Biggest win: Use tensor cores: matrix math runs in fp32: 10.63 ms -> 5.52 ms"
                   " per step (range 2.97-8.08 ms), 48% less time and cost per step, predicted")


def test_text_carries_each_fix_and_its_what_if():
    out = text("train_dataloader-cpu")
    assert "  - Load data faster: the data loader stalls the step" in out
    assert "Use DataLoader(num_workers=N) with N a few CPU cores" in out
    assert ("if applied: 4.2 ms per step, range 4.2 ms to 21.4 ms: the data-loader wait is"
            " hidden behind the step") in out
    # a CPU run has no price: less time, no cost
    assert "89% less time per step, predicted" in out


def test_an_under_used_gpu_is_not_sent_to_a_cheaper_gpu_the_sizing_rejected():
    res = cli("analyze", SAMPLES / "runs" / "train_pcie-h100", "--format", "json",
              "--no-report")
    doc = json.loads(res.stdout)
    assert doc["sizing"]["verdict"] == "right-sized"
    idle = next(r for r in doc["recommendations"] if r["id"] == "low-gpu-utilization")
    assert idle["detail"].endswith(
        "or move the job to a MIG slice of this GPU, or a cheaper GPU at a slower step (the"
        " sizing found none cheaper that keeps this step within --slower-ok).")
    # the L4 the objective passed over: projected within 10%, but its range reaches 20% slower
    assert "L4 is as fast" not in doc["sizing"]["reason"]
    assert ("cheaper if you accept slower: L4 may be up to 20% slower (13.4 ms projected, up"
            " to 15.7, vs 13.1 ms now)") in doc["sizing"]["reason"]


def test_an_over_provisioned_gpu_is_sent_to_the_recommended_one():
    res = cli("analyze", SAMPLES / "runs" / "train_host-h100", "--format", "json",
              "--no-report")
    doc = json.loads(res.stdout)
    assert doc["sizing"]["verdict"] == "over-provisioned"
    moved = [r["detail"] for r in doc["recommendations"] if "move the job to" in r["detail"]]
    assert all(f"the {doc['sizing']['recommended']} the sizing recommends" in d for d in moved)


def test_analyze_accepts_format_html(tmp_path):
    page = tmp_path / "pcie.html"
    res = cli("analyze", SAMPLES / "runs" / "train_dataloader-cpu", "--format", "html", "-o",
              page, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "Biggest win:" in html
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pcie.html"]  # no second page
