"""An 8-GPU nvidia-smi log read and diagnosed as a user acts on it: every GPU on its own row
numbers (by bus id, else by its place in each round), the time before and after the job said
and left out, and power read: 100% utilization at a third of the busy power is a stall."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.pipeline import analyze_document
from rightsize.traces.metrics_logs import read_metrics_log
from tests import nvsmi_log as log


def _truth() -> list[int]:
    return [g for r in log.rounds() for _, g, *_ in r]


@pytest.mark.parametrize("bus_id", [True, False], ids=["bus-id", "no-bus-id"])
def test_every_row_lands_on_its_gpu(tmp_path, bus_id):
    df = read_metrics_log(log.write_log(tmp_path / "smi.csv", bus_id=bus_id))
    assert df["gpu_index"].to_list() == _truth()
    # numbering by place within a timestamp (before) put a third of the rounds' tails elsewhere
    stamps = [stamp for r in log.rounds() for stamp, *_ in r]
    before = pl.DataFrame({"t": stamps}).select(n=pl.int_range(pl.len()).over("t"))["n"]
    wrong = sum(a != b for a, b in zip(before.to_list(), _truth(), strict=True))
    straddling = sum(len({s for s, *_ in r}) > 1 for r in log.rounds())
    # a round starts 0.0-2.9 ms into its second and takes 0.28 ms: those starting at .8 ms
    # put GPUs 5-7 on the next stamp, at .9 ms GPUs 3-7: 120 rounds, 60 x 3 + 60 x 5 rows (10%)
    assert (straddling, wrong) == (120, 480)


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory):
    path = log.write_log(tmp_path_factory.mktemp("smi") / "smi.csv", bus_id=False)
    return analyze_document([path]).diagnosis


def test_before_and_after_the_job_is_not_running_not_host(diagnosis):
    d = diagnosis
    # 60 s before and 60 s after on 8 GPUs; the 480 s of the job: 10 s loading at 0% (memory
    # held), 430 s training, 40 of them a stall; host: the loading on every GPU and GPU 5's
    # 40 s stopped, (8 x 10 + 40) GPU-seconds of 8 x 480
    assert d.evidence[1] == (
        "not running in 960 of 4800 samples (0% busy with under 1 GiB used: no job on the GPU;"
        " 480 before the job, until 2025-02-11 09:01:00, and 480 after it, from 2025-02-11 "
        "09:08:59): left out of the shares")
    assert d.shares_pct["host"] == pytest.approx(100 * (8 * 10 + 40) / (8 * 480), abs=0.01)
    assert d.utilization.nvml.samples == 3840


def test_every_gpu_is_reported(diagnosis):
    per_gpu = next(e for e in diagnosis.evidence if e.startswith("per GPU"))
    for g in range(8):
        assert f"GPU {g} " in per_gpu
    # GPU 5 was stopped 40 s: 430 of 480 s at 100%; the others also 100% while they spun
    assert "GPU 5 89.6% busy, " in per_gpu and "GPU 0 97.9% busy (8.3% of the time spinning)" \
        in per_gpu
    assert diagnosis.evidence[0].startswith(
        "diagnosed from GPU counters alone (3840 samples of 8 GPUs: 0-7, no trace)")


def test_full_utilization_at_a_third_of_the_power_is_a_stall_with_its_time(diagnosis):
    stall = next(e for e in diagnosis.evidence if e.startswith("stall"))
    # the busy power: the 90th percentile of 665-715 W training rows; 230 W spinning
    assert stall == ("stall from 2025-02-11 09:05:00 for 40 s: GPUs 0-4, 6, 7 at 100% "
                     "utilization drawing 230 W, 32% of their 710 W busy power (kernels spinning"
                     " in a collective, not computing), while GPU 5 sat under 10% busy: it held"
                     " up the job (a straggler)")
    # seven GPUs spun 40 of 480 s: communication, not busy work
    assert diagnosis.shares_pct["communication"] == pytest.approx(100 * 7 * 40 / (8 * 480),
                                                                  abs=0.01)
