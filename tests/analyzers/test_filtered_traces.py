"""Traces sampled after recording (diagnosis/capture.py ``ops_kept_pct``,
``ids_in_sequence_pct``): the share of the host ops a trace numbers that it holds, how many of
them run in sequence, and the inconclusive verdict a sampled trace earns."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.analyzers.diagnosis.capture import ids_in_sequence_pct, ops_kept_pct
from rightsize.pipeline import analyze_paths
from tests.conftest import shared_path


def _ops(*threads: tuple[str, list[int], int]) -> pl.DataFrame:
    """Host ops: per thread (tid, its External ids, the start of its first op in ns; one op
    a nanosecond after another)."""
    rows = [(tid, i, t0 + n) for tid, ids, t0 in threads for n, i in enumerate(ids)]
    return pl.DataFrame({"cat": ["cpu_op"] * len(rows), "tid": [r[0] for r in rows],
                         "external_id": [r[1] for r in rows], "ts_ns": [r[2] for r in rows]})


def test_a_cut_trace_keeps_few_of_the_ids_it_numbers_in_runs():
    # HTA's CPU-only rank 34 as kept: the main thread's ids 8,490-8,493, two gloo threads' five
    # all_reduce ranges each from ids 1,025 and 1,537 (their blocks of 512): 14 ids over a range
    # of 7,469, of which 3 threads + 1 blocks (2,048 ids) are forgiven; 11 of the 13 after the
    # first follow the id before them: cut into whole pieces, not sampled
    ops = _ops(("main", list(range(8490, 8494)), 0), ("gloo0", list(range(1025, 1030)), 0),
               ("gloo1", list(range(1537, 1542)), 0))
    assert ops_kept_pct(ops) == pytest.approx(100 * 14 / (14 + 7469 - 14 - 2048))
    assert ids_in_sequence_pct(ops) == pytest.approx(100 * 11 / 13)


def test_a_cut_down_trace_is_inconclusive_though_its_ids_run_in_sequence():
    """HTA's CPU-only rank 34 as the file holds it: 14 numbered ops over ids 1,025-8,493 on 3
    threads (above): 14 / (14 + 7,469 - 14 - 4 x 512) = 0.258% kept, 11 of 13 in sequence; Kineto's Ev Idx runs 0-5 then 7,470-7,478, and the 210 ms step holds no op
    of its main thread, so its 85% 'exposed communication' is the gloo threads' all-reduces
    over a main thread whose ops were cut: inconclusive, no overlap advice."""
    doc = analyze_paths([shared_path("traces", "kineto",
                                     "hta-cpu_only-rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")])
    assert doc["diagnosis"]["bound"] == "inconclusive"
    assert [(s, round(v, 3), t) for s, v, t in _reasons(doc)] == [("filtered", 0.258, 1.0)]
    assert doc["diagnosis"]["evidence"][0].startswith(
        "inconclusive: a cut-down trace - it holds 0.26% of the host ops")
    assert doc["recommendations"] == [] and doc["sizing"]["recommended"] is None


def test_a_sampled_trace_keeps_few_scattered():
    # one op in a thousand with its child: 20 ids over a range of 9,002 (one thread: 1,024
    # forgiven), 10 of the 19 after the first in sequence
    ops = _ops(("main", [1 + 1000 * k + d for k in range(10) for d in (0, 1)], 0))
    assert ops_kept_pct(ops) == pytest.approx(100 * 20 / (20 + 9002 - 20 - 1024))
    assert ids_in_sequence_pct(ops) == pytest.approx(100 * 10 / 19)


def test_an_unfiltered_trace_keeps_all_of_them():
    assert ops_kept_pct(_ops(("main", list(range(1, 101)), 0))) == 100.0
    # a worker thread's partly used block is no gap
    assert ops_kept_pct(_ops(("main", list(range(1, 11)), 0),
                             ("worker", list(range(513, 519)), 0))) == 100.0
    assert ops_kept_pct(_ops(("main", [7], 0))) is None  # one id: no range
    assert ids_in_sequence_pct(_ops(("main", [7], 0))) is None
    assert ids_in_sequence_pct(_ops(("main", list(range(1, 101)), 0))) == 100.0
    nsys = _ops(("main", [1, 2], 0)).with_columns(pl.lit(None, pl.Int64).alias("external_id"))
    assert ops_kept_pct(nsys) is None  # no External id (Nsight Systems ranges)


def test_a_window_of_steps_leaves_out_the_ops_begun_before_it():
    # --steps 4-4: an op of step 3 (id 3,000) overlaps the window, its neighbours do not
    ops = _ops(("main", [3000], 0), ("main", list(range(6000, 6100)), 1000))
    assert ops_kept_pct(ops) == pytest.approx(100 * 101 / (101 + 3100 - 101 - 1024))
    assert ops_kept_pct(ops, since_ns=1000) == 100.0


def _reasons(doc: dict) -> list[tuple]:
    return [(e["share"], e["value"], e["threshold"]) for e in doc["diagnosis"]["evidence_items"]
            if e["text"].startswith("inconclusive:")]


@pytest.mark.parametrize(("parts", "reasons"), [
    (("kineto", "hta-trace_filter-sampled_rank-0.json.gz"), [("filtered", 1.423, 50.0)]),
])
def test_shared_filtered_traces_are_inconclusive(parts, reasons):
    doc = analyze_paths([shared_path("traces", *parts)])
    assert doc["diagnosis"]["bound"] == "inconclusive"
    assert _reasons(doc) == reasons
    assert doc["diagnosis"]["evidence"][0].startswith("inconclusive: a sampled trace - it holds")
    assert doc["recommendations"] == [] and doc["sizing"]["recommended"] is None


def test_ranks_of_a_sampled_job_name_no_straggler():
    # HTA's two sampled ranks of a 128-rank job: their collectives matched by order rest on
    # what the sampling kept, so no straggler rule (it named rank 1)
    doc = analyze_paths([shared_path("traces", "ranks", "hta-trace_filter-2of128")])
    assert doc["diagnosis"]["bound"] == "inconclusive"
    assert doc["recommendations"] == []
    assert doc["job"]["stragglers"]  # the job section still reports what it matched
