"""The Python API takes every option the CLI takes, returns enums and immutable documents, and
an analysis read from JSON says plainly that it has no frames."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

import rightsize
from rightsize.analyzers.document import Document
from rightsize.analyzers.document.sizing import Verdict
from rightsize.api import NoFramesError
from rightsize.vocab import Bound, DeviceKind
from tests.conftest import REPO
from tests.nsys_handmade import make_export

SAMPLE = REPO / "samples" / "runs" / "train_dataloader-cpu"


def _cli_json(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "rightsize", "analyze", *args, "--format", "json",
                          "-q", "--no-report"], capture_output=True, text=True, check=True,
                         timeout=120)
    return json.loads(out.stdout)


def test_step_range_is_the_clis(tmp_path):
    export = make_export(tmp_path / "r.sqlite")
    a = rightsize.analyze(export, step_range="train_step")  # two NVTX train_step ranges
    assert (a.steps.count, rightsize.analyze(export).steps.count) == (2, 1)
    assert a.to_json() == _cli_json(str(export), "--step-range", "train_step")
    with pytest.raises(rightsize.RightsizeError, match="epoch"):
        rightsize.analyze(export, step_range="epoch")


def test_timezone_is_the_clis(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
                   "2024/05/01 12:00:00.000, 0, 12, 100\n2024/05/01 12:00:01.000, 0, 14, 100\n")
    utc = rightsize.analyze(log, timezone="UTC")
    berlin = rightsize.analyze(log, timezone="Europe/Berlin")
    assert utc.to_json() == _cli_json(str(log), "--timezone", "UTC")
    assert berlin.to_json() == _cli_json(str(log), "--timezone", "Europe/Berlin")
    assert utc.diagnosis.device is DeviceKind.COUNTERS


def test_samples_per_step_reaches_the_sizing():
    from rightsize.analyzers.sizing.projection import Constraints

    fast = Constraints(target_throughput=1e9)  # no GPU reaches it: nothing meets it
    a = rightsize.analyze(SAMPLE, samples_per_step=32, constraints=fast)
    assert a.sizing is not None and not any(c.meets_constraints for c in a.sizing.candidates)
    slow = rightsize.analyze(SAMPLE, samples_per_step=32, constraints=Constraints(
        target_throughput=320))  # 32 samples in 35.4 ms projected: 904 a second
    assert slow.sizing is not None and all(c.meets_constraints for c in slow.sizing.candidates
                                           if c.fits_memory is not False)
    with pytest.raises(rightsize.RightsizeError, match="target_throughput\\) needs samples_per_step"):
        rightsize.analyze(SAMPLE, constraints=fast)
    with pytest.raises(rightsize.RightsizeError, match="positive integer"):
        rightsize.analyze(SAMPLE, samples_per_step=0)


def test_vocabularies_are_enums_and_compare_as_text():
    a = rightsize.analyze(SAMPLE)
    assert a.diagnosis.bound is Bound.DATALOADER and a.diagnosis.bound == "dataloader"
    assert a.diagnosis.device is DeviceKind.CPU
    assert a.sizing.verdict is None or isinstance(a.sizing.verdict, Verdict)
    back = rightsize.Analysis.from_json(a.to_json())
    assert back.diagnosis.bound is Bound.DATALOADER and back.document == a.document


def test_documents_cannot_be_changed():
    a = rightsize.analyze(SAMPLE)
    with pytest.raises(TypeError, match="immutable"):
        a.diagnosis.shares_pct["dataloader"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError, match="immutable"):
        a.document.definitions.clear()  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.diagnosis.bound = Bound.HOST  # type: ignore[misc]
    assert isinstance(a.diagnosis.evidence, tuple)
    assert a.to_json()["diagnosis"]["shares_pct"]["dataloader"] == 89.02
    changed = dataclasses.replace(a.diagnosis, shares_pct={**a.diagnosis.shares_pct,
                                                           "dataloader": 1.0})
    assert changed.shares_pct["dataloader"] == 1.0 and a.diagnosis.shares_pct["dataloader"] != 1.0
    assert json.loads(Document.dumps(a.document)) == a.to_json()


def test_ranks_of_a_saved_analysis_say_there_are_no_frames():
    saved = rightsize.Analysis.from_json(rightsize.analyze(SAMPLE).to_json())
    assert not saved.has_frames and len(saved.document.ranks) == 1
    for use in (lambda: saved.ranks[0], lambda: list(saved.ranks), lambda: len(saved.ranks)):
        with pytest.raises(NoFramesError, match="document.ranks"):
            use()
