"""The host share split: the job's own CPU work (library frames, ops on CPU tensors) vs
framework and launch overhead, and the advice that follows it; what-ifs checked against the
measured pairs of samples/whatif."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rightsize.analyzers.analysis import Context, analyze_trace
from rightsize.analyzers.diagnosis.host_work import CPU_OPS_PART, host_work
from rightsize.catalog import load_catalog
from tests.framebuilder import H100, FrameBuilder

ROOT = Path(__file__).resolve().parents[2]
PILLOW = "Pillow (image decoding and transforms)"


def preprocessing_step() -> FrameBuilder:
    """A 1000 us step: 0-400 Pillow decodes, 400-500 an op on CPU tensors (no launch inside),
    500-600 an op that launches (framework), 600-790 Python between ops, 790-800 the GEMMs' op
    and launches, 800-1000 twenty GEMMs on the GPU."""
    b = FrameBuilder([H100])
    b.step(1, 0, 1000)
    b.x("python_function", "train.py(10): main", 0, 1000)
    b.x("python_function", "PIL/Image.py(1017): convert", 0, 400)
    b.x("python_function", "<built-in method decode of ImagingDecoder object at 0x7f04f8>", 50, 300)
    b.op("aten::div_", 400, 100)
    b.op("aten::add", 500, 100, ext=2).launch("cudaLaunchKernel", 550, 5, corr=2, ext=2)
    b.kernel("elementwise_kernel", 560, 1, corr=2, ext=2)
    b.op("aten::mm", 790, 10, ext=1)
    for i in range(20):
        b.launch("cudaLaunchKernel", 790 + 0.5 * i, 0.4, corr=10 + i, ext=1)
        b.kernel("ampere_sgemm_128x64_nn", 800 + 10 * i, 10, corr=10 + i, ext=1)
    return b


def test_split_names_the_libraries_and_the_cpu_ops():
    trace = preprocessing_step().trace()
    # GPU idle 0-560 and 561-800: 799 us of host time, 79.9% of the step
    host = (np.array([0, 561_000]), np.array([560_000, 800_000]))
    w = host_work(trace, host, 1_000_000)
    assert w is not None and w.python_frames
    # Pillow 0-400 us (40%), aten::div_ 400-500 (10%): 50% CPU work; 29.9% framework
    assert [(p.name, round(p.pct, 3)) for p in w.parts] == [(PILLOW, 40.0), (CPU_OPS_PART, 10.0)]
    assert (round(w.cpu_work_pct, 3), round(w.framework_pct, 3)) == (50.0, 29.9)
    assert w.parts[0].top == ("PIL/Image.py(1017): convert",
                              "<built-in method decode of ImagingDecoder object>")
    assert w.parts[1].top == ("aten::div_",)  # aten::add launched a kernel: framework


def test_cpu_work_gets_its_own_advice_not_cuda_graphs():
    r = analyze_trace(preprocessing_step().trace(), Context(catalog=load_catalog()))
    assert r.diagnosis.bound == "host"
    ids = [x.id for x in r.recommendations]
    assert ids[0] == "host-cpu-work", ids
    rec = r.recommendations[0]
    assert "Pillow (image decoding and transforms) 40.0%" in rec.detail
    assert "DataLoader workers" in rec.detail and "torch.compile do not touch" in rec.detail
    # point: all 500 us of CPU work off the step; worst half of it. The low end also drops the
    # Python recorder's share: half the framework share (29.9% of the 1000 us step)
    w = rec.what_if
    assert (round(w.step_ms, 4), round(w.step_ms_high, 4)) == (0.5, 0.75)
    assert round(w.step_ms_low, 4) == round(1.0 - 0.5 - 0.299 / 2, 4)
    assert "the job's own CPU work 50.0%" in r.diagnosis.evidence[0]
    assert "the job's own CPU work" in r.sizing.reason


def test_host_work_absent_without_a_host_share():
    trace = preprocessing_step().trace()
    assert host_work(trace, (np.zeros(0, np.int64), np.zeros(0, np.int64)), 1_000_000) is None


PAIRS = json.loads((ROOT / "samples" / "whatif" / "pairs.json").read_text())["pairs"]


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS, ids=[f"{p['rule']}:{Path(p['after']).name}"
                                             for p in PAIRS])
def test_what_if_covers_the_measured_step(pair):
    """Each recommendation's predicted range holds the step measured once its advice was
    applied (benchmarks/whatif_check.py prints the table)."""
    from rightsize.pipeline import analyze_document
    before = analyze_document([str(ROOT / pair["before"])]).to_json()
    after = analyze_document([str(ROOT / pair["after"])]).to_json()
    rec = next(r for r in before["recommendations"] if r["id"] == pair["rule"])
    measured = after["metrics"]["breakdown_ms"]["step"]
    w = rec["what_if"]
    assert w["step_ms_low"] <= measured <= w["step_ms_high"], (w, measured)
    assert w["step_ms_low"] <= w["step_ms"] <= w["step_ms_high"]
