"""The call that owns the job's CPU time (diagnosis/host_calls.py), its repeats per item
within a step, and the advice that follows, on a Hugging Face zero-shot object detection
pipeline built as torch writes it (tests/zero_shot_trace.py)."""

from __future__ import annotations

import json

import pytest

from rightsize.analyzers.diagnosis.host_calls import call_name
from rightsize.pipeline import analyze_document
from tests.zero_shot_trace import STEP_MS, zero_shot_trace


def test_call_names_from_frames():
    assert call_name("scipy/ndimage/_interpolation.py(711): zoom") == "scipy.ndimage.zoom"
    assert call_name("/opt/venv/lib/python3.11/site-packages/PIL/Image.py(1017): convert") == \
        "PIL.Image.convert"
    assert call_name("transformers/models/owlv2/image_processing_owlv2.py(359): resize") == \
        "transformers.models.owlv2.image_processing_owlv2.resize"
    assert call_name("<built-in function zoom_shift>") == "<built-in function zoom_shift>"
    assert call_name("<built-in method decode of ImagingDecoder object at 0x7f04f8>") == \
        "<built-in method decode of ImagingDecoder object>"


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    path = zero_shot_trace(tmp_path_factory.mktemp("zs") / "zs.pt.trace.json")
    return analyze_document([path])


def test_the_resize_repeated_per_label_is_named_with_its_library_and_caller(doc):
    d = doc.diagnosis
    # the five labels' loader __next__ (58.5 ms each) are 76.4% of the 383 ms step
    assert d.bound == "dataloader"
    assert d.shares_pct["dataloader"] == pytest.approx(100 * 5 * 58.5 / STEP_MS, abs=0.01)
    zoom, processor, gauss = d.host_work.calls
    # scipy.ndimage.zoom owns its 34 ms a label (its own frame and the built-in zoom_shift
    # under it), not the image processor that called it; four of the five are repeats
    assert (zoom.call, zoom.library, zoom.caller) == (
        "scipy.ndimage.zoom", "SciPy", "transformers.models.owlv2.image_processing_owlv2.resize")
    assert (zoom.pct, zoom.per_step, zoom.repeat_pct) == (
        pytest.approx(100 * 5 * 34.0 / STEP_MS, abs=0.01), 5.0,
        pytest.approx(100 * 4 * 34.0 / STEP_MS, abs=0.01))
    # the processor owns the 56 ms of its call less SciPy's 42 and NumPy's 5.1: 8.9 ms a label
    assert (processor.call, processor.caller) == (
        "transformers.image_processing_utils.__call__",
        "transformers.pipelines.zero_shot_object_detection.preprocess")
    assert processor.pct == pytest.approx(100 * 5 * 8.9 / STEP_MS, abs=0.01)
    assert (gauss.call, gauss.pct) == ("scipy.ndimage.gaussian_filter",
                                       pytest.approx(100 * 5 * 8.0 / STEP_MS, abs=0.01))
    # the model's forward, once per label
    assert (d.host_work.model, d.host_work.model_runs_per_step) == ("Owlv2ForObjectDetection", 5)
    said = next(e for e in d.evidence if "by the call that owns it" in e)
    assert said == ("the job's own CPU work while the GPU waits, by the call that owns it: "
                    "scipy.ndimage.zoom (SciPy, called from "
                    "transformers.models.owlv2.image_processing_owlv2.resize) 44.4% of the "
                    "step, 5 times a step with the same call stack (35.5% in all but one)")


def test_the_advice_is_do_it_once_not_more_dataloader_workers(doc):
    ids = [r.id for r in doc.recommendations]
    assert ids[0] == "repeated-host-work"
    assert "dataloader-stall" not in ids  # the loader's wait is this work: advised as such
    rec = doc.recommendations[0]
    assert rec.detail.startswith(
        "scipy.ndimage.zoom (SciPy, called from "
        "transformers.models.owlv2.image_processing_owlv2.resize) runs 5 times in each step "
        "with the same call stack and like durations, 44.4% of the step")
    for words in ("the model (Owlv2ForObjectDetection) runs 5 times a step",
                  "pass all the queries in one call", "use_fast=True",
                  "More DataLoader workers would only run the repeats in parallel"):
        assert words in rec.detail
    # the repeats of the three calls: 4/5 of (34 + 8.9 + 8) ms a label, five labels a step
    repeats_ms = 4 * (34.0 + 8.9 + 8.0)
    assert rec.what_if.step_ms == pytest.approx(STEP_MS - repeats_ms, abs=0.05)
    assert rec.what_if.step_ms_high == pytest.approx(STEP_MS - repeats_ms / 2, abs=0.05)
    assert "num_workers" not in doc.sizing.reason
    assert doc.sizing.reason.startswith(
        "44% of each step the GPU waits while scipy.ndimage.zoom (SciPy, called from "
        "transformers.models.owlv2.image_processing_owlv2.resize) runs 5 times in each step")


def test_without_python_frames_the_loader_advice_stands(tmp_path):
    path = zero_shot_trace(tmp_path / "zs.pt.trace.json")
    data = json.loads(path.read_text())
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "python_function"]
    path.write_text(json.dumps(data))
    doc = analyze_document([path])
    ids = [r.id for r in doc.recommendations]
    assert ids[0] == "dataloader-stall" and "repeated-host-work" not in ids
    assert doc.diagnosis.host_work.calls == ()


def test_a_batch_decoded_sample_by_sample_is_not_a_repeat():
    """samples/whatif/train_preprocess_stack-h200 decodes and resizes 16 different images a
    step with Pillow for one forward: per-sample work of a batch (DataLoader workers move it
    off the step), not the same work per item."""
    from tests.conftest import REPO

    doc = analyze_document([REPO / "samples" / "whatif" / "train_preprocess_stack-h200"])
    first = doc.diagnosis.host_work.calls[0]
    assert (first.call, first.library, first.per_step, first.repeat_pct) == (
        "PIL.Image.convert", "Pillow", 16.0, 0.0)
    assert doc.diagnosis.host_work.model == ""  # the model runs once a step
    ids = [r.id for r in doc.recommendations]
    assert ids[0] == "host-cpu-work" and "repeated-host-work" not in ids
