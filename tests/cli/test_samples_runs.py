"""The run directories recorded from samples/*.py stay readable and say what they should."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rightsize.rundir import read_manifest, trace_paths
from rightsize.traces.samples import HOST_SAMPLES, read_samples

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
RUNS = sorted((SAMPLES / "runs").glob("*")) if (SAMPLES / "runs").is_dir() else []


def test_every_sample_script_has_a_recorded_cpu_run() -> None:
    scripts = {p.stem for p in SAMPLES.glob("*.py")}
    assert {"train_compute", "train_memory", "train_pcie", "train_dataloader", "train_host",
            "infer"} <= scripts  # fmt: skip
    assert {f"{s}-cpu" for s in scripts} <= {r.name for r in RUNS}


@pytest.mark.parametrize("run_dir", RUNS, ids=[r.name for r in RUNS])
def test_recorded_run_is_complete(run_dir: Path) -> None:
    manifest = read_manifest(run_dir)
    assert manifest["exit"]["code"] == 0 and manifest["status"] == "done"
    prof = manifest["collectors"]["profiler"]
    expected = "time" if run_dir.name.startswith("infer") else "optimizer"
    assert (prof["status"], prof["step_detection"]) == ("collected", expected)
    (trace,) = trace_paths(run_dir)
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")]
    if expected == "optimizer":
        assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    else:
        assert len(steps) >= 2
    gpu, host = read_samples(run_dir)
    assert host.schema == HOST_SAMPLES and host.height >= 1
    if manifest["collectors"]["nvml"]["status"] != "collected":
        assert gpu.height == 0 and manifest["collectors"]["nvml"]["reason"]
    if manifest["collectors"]["analysis"]["status"] == "written":
        assert json.loads((run_dir / "analysis.json").read_text())["steps"]["count"] >= 2
    size_bytes = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    assert size_bytes < 2_000_000
