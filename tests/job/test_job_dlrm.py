"""The real 8-rank DLRM job (../shared/traces/ranks/param-dlrm-8rank-v100): what its traces show,
read by hand and written here, and what rightsize makes of it.

Read with json.load (kernels named ``nccl*`` sorted by ts on each rank, one step each): every
rank has 8 NCCL kernels on stream 84, in the same order (4 all-to-alls, an all-reduce, an
all-to-all, 2 all-reduces; the all-to-alls run as ``ncclKernel_SendRecv`` under
``nccl:all_to_all``), no collective args. Per call, over the 8 ranks (µs):

    call  last  late  transfer  skew   sum of waits  ends apart
    0     7     505   10        7624   26435         2
    1     7     509   8         1101   6231          2
    2     7     162   7         168    1161          1
    3     7     124   7         125    871           2
    4     7     9     86        223    854           5
    5     5     52    10        534    2903          3
    6     5     49    20        584    3379          5
    7     4     14    69        885    5009          7

(late: last arrival - second-last; transfer: the shortest kernel; skew: last - first arrival.)
Rank 7 arrives last at 5 of the 8 calls, 1309 µs in all; its ProfilerStep#10 starts at
1694128201428718 µs, 4523 µs after the median of the other ranks' (424195). The sizes are the
``nccl:*`` ops' Input Dims: all-reduces of 394241, 112 and 226960 floats.
"""

from __future__ import annotations

import pytest

from rightsize.pipeline import analyze_document
from tests.conftest import shared_path

pytestmark = pytest.mark.shared

LAST = [7, 7, 7, 7, 7, 5, 5, 4]
LATE_US = [505, 509, 162, 124, 9, 52, 49, 14]
TRANSFER_US = [10, 8, 7, 7, 86, 10, 20, 69]
SKEW_US = [7624, 1101, 168, 125, 223, 534, 584, 885]
WAITS_US = [26435, 6231, 1161, 871, 854, 2903, 3379, 5009]
KINDS = ["alltoall"] * 4 + ["allreduce", "alltoall", "allreduce", "allreduce"]


@pytest.fixture(scope="module")
def doc():
    return analyze_document([shared_path("traces", "ranks", "param-dlrm-8rank-v100")])


def test_calls_as_read_by_hand(doc):
    job = doc.job
    assert job is not None and (job.world_size, job.rank_count) == (8, 8)
    assert job.matched_by == ("order per stream",) and job.calls_total == 8
    assert [c.key for c in job.calls] == [f"stream 84 #{i}" for i in range(8)]
    assert [c.collective for c in job.calls] == KINDS
    assert [c.last_rank for c in job.calls] == LAST
    assert [c.late_ms for c in job.calls] == [v / 1000 for v in LATE_US]
    assert [c.transfer_ms for c in job.calls] == [v / 1000 for v in TRANSFER_US]
    assert [c.skew_ms for c in job.calls] == [v / 1000 for v in SKEW_US]
    assert [c.wait_ms_mean for c in job.calls] == [round(v / 8 / 1000, 6) for v in WAITS_US]
    assert job.notes == ()  # every call ended together (within 7 µs)
    allreduce = [c for c in job.calls if c.collective == "allreduce"]
    assert [c.bytes for c in allreduce] == [394241 * 4, 112 * 4, 226960 * 4]
    # nccl-tests: algbw = size / transfer, busbw = algbw x 2(n-1)/n for 8 ranks
    assert [c.busbw_gbs for c in allreduce] == [
        round(394241 * 4 / 86_000 * 1.75, 3), round(112 * 4 / 20_000 * 1.75, 3),
        round(226960 * 4 / 69_000 * 1.75, 3)]


def test_rank_7_is_the_straggler(doc):
    job = doc.job
    assert job is not None
    (s,) = job.stragglers  # rank 5 (2 calls, 0.101 ms) costs under 1% of the step
    assert (s.rank, s.last_calls, s.calls, s.last_pct) == (7, 5, 8, 62.5)
    assert s.late_ms_per_step == 1.309
    assert s.last_pct_by_type == {"allreduce": 33.33, "alltoall": 80.0}
    assert s.step_start_late_ms == 4.523
    assert [r.last_calls for r in job.ranks] == [0, 0, 0, 0, 1, 2, 0, 5]
    assert doc.recommendations[0].title == "Rank 7 holds up the collectives"
    assert "rank 7 arrives last" in " ".join(doc.diagnosis.evidence)


def test_one_nvlink_node_and_no_nvlink_advice(doc):
    job = doc.job
    assert job is not None
    assert (job.nodes, job.gpus_per_node) == (1, 8)
    assert job.fabric == ("NVLink within one node (150 GB/s per direction per GPU; NVLink 2 in"
                          " a hybrid cube-mesh)")
    assert {c.collective: c.link_peak_gbs for c in job.collectives} == {
        "allreduce": 150.0, "alltoall": 150.0}
    # per-rank steps: the ProfilerStep#10 annotations last 14.455, 19.901, 13.017, 19.313,
    # 17.979, 17.797, 13.091 and 12.509 ms; rightsize's device-aware step bounds (steps.py)
    # keep them but for ranks 1 and 3, whose bounds start later
    assert [r.step_ms for r in job.ranks] == [
        (14.455,), (18.584,), (13.017,), (18.711,), (17.979,), (17.797,), (13.091,), (12.509,)]
    comm = next(r for r in doc.recommendations if r.id == "exposed-communication")
    assert "use a faster interconnect (NVLink)" not in comm.detail
    assert "already talk over NVLink within one node" in comm.detail
