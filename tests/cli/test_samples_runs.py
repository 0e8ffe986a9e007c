"""The run directories recorded from samples/*.py stay readable and say what they should."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
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
    # host annotations only: a CUDA trace repeats each on the GPU (gpu_user_annotation)
    steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"]
    if expected == "optimizer":
        active = manifest["settings"]["active"]
        assert steps == [f"ProfilerStep#{n}" for n in range(2, 2 + active)]
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


GPU_RUNS = [r for r in RUNS if r.name.endswith("-h100")]


@pytest.mark.parametrize("run_dir", GPU_RUNS, ids=[r.name for r in GPU_RUNS])
def test_gpu_runs_hold_nvml_and_gpm_samples(run_dir: Path) -> None:
    # Recorded on an H100 by samples/record_gpu.sh (samples/README.md)
    manifest = read_manifest(run_dir)
    assert manifest["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert manifest["gpus"][0]["gpm_supported"] is True
    gpu, _ = read_samples(run_dir)
    assert gpu.height == manifest["collectors"]["nvml"]["rows"] > 100
    gpm = gpu.filter(pl.col("gpm_sm_util_pct").is_not_null())
    assert gpm.height >= gpu.height // 3
    pair_ms = ((gpm["t_ns"] - gpm["gpm_from_ns"]) / 1e6).to_list()
    assert min(pair_ms) >= 90.0  # NVML's GPM refresh rate, kept by the sampler
    assert gpu["gpm_dram_bw_util_pct"].is_nan().sum() == 0
