"""Verdicts on the project's own recorded runs and on the shared real traces."""

from __future__ import annotations

import pytest

from rightsize.pipeline import analyze_paths
from tests.conftest import SAMPLES, shared_path

# Each sample script is engineered to one bottleneck (samples/*.py). Recorded on CPU: there is
# no host<->device link, so the PCIe sample's stand-in copy is a memory-bound host copy.
SAMPLE_VERDICTS = {
    "train_compute-cpu": "compute",
    "train_memory-cpu": "memory",
    "train_dataloader-cpu": "dataloader",
    "train_host-cpu": "host",
    "train_pcie-cpu": "memory",
}


@pytest.mark.parametrize("run", sorted(SAMPLE_VERDICTS))
def test_sample_run_verdicts(run):
    doc = analyze_paths([SAMPLES / "runs" / run])
    d = doc["diagnosis"]
    assert d["device"] == "cpu"
    assert d["bound"] == SAMPLE_VERDICTS[run], d["shares_pct"]
    assert sum(d["shares_pct"].values()) == pytest.approx(100.0, abs=0.05)


@pytest.mark.parametrize("name,bound", [
    ("kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz",
     "dataloader"),
    ("tracelens-h100-gaunernst_bert-small-uncased__1016001.json.gz", "host"),
])
def test_shared_trace_verdicts(name, bound):
    doc = analyze_paths([shared_path("traces", "kineto", name)])
    assert doc["diagnosis"]["bound"] == bound
    assert doc["diagnosis"]["evidence"]
    ids = [r["id"] for r in doc["recommendations"]]
    expected = {"dataloader": "dataloader-stall", "host": "host-wait"}[bound]
    assert expected in ids


def test_dataloader_bound_run_is_not_helped_by_a_bigger_gpu():
    doc = analyze_paths([shared_path(
        "traces", "kineto",
        "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz")])
    s = doc["sizing"]
    assert s["current"] == "V100 32GB SXM2"
    fastest = min(c["projected_step_ms"] for c in s["candidates"] if c["projected_step_ms"])
    # A third of the step is data loading, which no GPU shortens; the reason says so.
    assert fastest > 0.33 * doc["steps"]["mean_ms"]
    assert "waits for the data loader, which a bigger GPU will not shrink" in s["reason"]
