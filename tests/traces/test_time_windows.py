"""A trace without steps keeps the memory budget too: it is read over a window of time.

Kineto without ProfilerStep and Nsight exports without NVTX step ranges used to be read whole
whatever ``--memory-budget`` said (a 4 GiB export without steps peaked at 10.5-11.4 GiB under a
2 GB budget). Now their events are cut into slices of time that hold as many events each, and
the slices that fit the budget are read, as steps would be (``traces/window.py``).
"""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from rightsize.pipeline import Options, analyze_document
from rightsize.traces import budget, kineto, nsys, window
from rightsize.traces.kineto import read_kineto
from rightsize.traces.nsys import read_nsys
from tests.nsys_handmade import make_export
from tests.tracebuilder import TraceBuilder


def _fits(memory, events: int) -> int:
    """The smallest budget whose window (WINDOW_FILL of it above the floor) holds ``events``."""
    return budget.BASE_BYTES + math.ceil(events * memory.per_event / window.WINDOW_FILL)


def test_time_table_cuts_equal_events():
    t = window.StepTable(np.zeros(0, np.int64), *(np.zeros(0, np.int64),) * 3,
                         starts=np.arange(0, 100, 10, dtype=np.int64))
    s = window.time_table(t, 5)  # 10 events: 2 a slice
    assert s.step.tolist() == [0, 1, 2, 3, 4]
    assert s.start_ns.tolist() == [0, 20, 40, 60, 80]
    assert s.end_ns.tolist() == [20, 40, 60, 80, 91]
    # a histogram's buckets are not split: buckets of 1, 8, 1 events in 2 slices; a bucket
    # goes to the slice its first event falls in (the 8 after 1 event: the first, 9 events)
    h = window.StepTable(np.zeros(0, np.int64), *(np.zeros(0, np.int64),) * 3,
                         starts=np.array([0, 10, 20]), weights=np.array([1, 8, 1]))
    assert window.time_table(h, 2).start_ns.tolist() == [0, 20]


def test_plan_without_steps_is_a_window_of_time():
    t = window.StepTable(np.zeros(0, np.int64), *(np.zeros(0, np.int64),) * 3,
                         starts=np.arange(0, 100, 10, dtype=np.int64))
    w = window.plan(t, "x", None, lambda n: n, 7)  # 10 events need 10; 7 holds 6 (90%)
    assert (w.by, w.first_step, w.last_step, w.steps_in_trace) == ("time", 1, 6, 10)
    assert (w.lo_ns, w.hi_ns, w.span_ns) == (10, 70, (0, 90))
    assert (w.need_bytes, w.window_need_bytes, w.budget_bytes, w.numbers) == (10, 6, 7, ())
    assert w.entry()["by"] == "time"
    assert window.plan(t, "x", None, lambda n: n, 10) is None  # the whole trace fits


def _no_steps(tmp_path):
    """20 iterations 1 ms apart, no ProfilerStep: an op (100 us), its launch (+10 us) and its
    kernel (+50 us, 500 us): 60 timed events."""
    b = TraceBuilder(devices=[])
    b.devices = TraceBuilder().devices
    for i in range(20):
        t = 1000.0 * i
        b.op("aten::mm", t, 100.0, ext=i)
        b.launch("cudaLaunchKernel", t + 10, 5.0, corr=i, ext=i)
        b.kernel("gemm", t + 50, 500.0, corr=i, ext=i)
    return b.write(tmp_path / "nosteps.json")


def test_kineto_without_steps_reads_a_window_of_time(tmp_path):
    path = _no_steps(tmp_path)
    cap = _fits(kineto.MEMORY, 18)
    assert budget.estimate(path, kineto.MEMORY).need_bytes > cap  # so the first pass runs
    t = read_kineto(path, budget_bytes=cap)
    w = t.meta.window
    # 60 events, one a slice; from the second slice, 18 fit: starts 10 us .. 6000 us
    assert (w.by, w.first_step, w.last_step, w.steps_in_trace) == ("time", 1, 18, 60)
    assert (w.lo_ns, w.hi_ns) == (10_000, 6_010_000)
    assert t.kernels["correlation"].to_list() == [0, 1, 2, 3, 4, 5]
    assert t.runtime["correlation"].to_list() == [0, 1, 2, 3, 4, 5]
    assert t.cpu_ops.height == 7  # op 0 (0-100 us) overlaps the window; op 6 starts in it
    doc = analyze_document([path], Options(memory_budget_bytes=cap))
    assert doc.to_json()["inputs"][0]["window"]["by"] == "time"
    note = next(n for n in doc.notes if "analyzed over" in n)
    assert note.startswith("nosteps.json: analyzed over 0.010-6.010 ms of its 19.050 ms after "
                           "its first event (slices 1-18 of 60 of equal events; it has no "
                           "steps): the whole trace needs about")
    assert note.endswith("every metric is of this window")


def _nsys_no_steps(tmp_path):
    path = make_export(tmp_path / "a.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep%'")
    db.close()
    return path


def test_nsys_without_steps_reads_a_window_of_time(tmp_path):
    path = _nsys_no_steps(tmp_path)
    assert read_nsys(path).steps.height == 0
    cap = _fits(nsys.MEMORY, 5)
    t = read_nsys(path, budget_bytes=cap)
    w = t.meta.window
    # 11 rows starting at 10, 30, 40, 50, 90, 100, 200, 290, 300 (2), 400 ns: one bucket a
    # start; from the second, 5 rows fit: [30, 200) ns of the session
    assert (w.by, w.first_step, w.last_step, w.steps_in_trace) == ("time", 1, 5, 10)
    start = 1_000_000_000_000  # TARGET_INFO_SESSION_START_TIME
    assert (w.lo_ns - start, w.hi_ns - start) == (30, 200)
    assert t.kernels["correlation"].to_list() == [11]
    assert t.transfers["correlation"].to_list() == [13]
    assert sorted(t.runtime["correlation"].to_list()) == [11, 13]
    assert t.steps.height == 0


@pytest.mark.parametrize("events", [1, 3])
def test_a_time_window_never_holds_more_than_the_budget_allows(tmp_path, events):
    path = _no_steps(tmp_path)
    cap = _fits(kineto.MEMORY, events)
    w = read_kineto(path, budget_bytes=cap).meta.window
    assert w.window_need_bytes <= cap and w.last_step - w.first_step + 1 == events


def test_a_budget_that_cannot_be_kept_is_said_before_reading(tmp_path):
    from tests.conftest import cli

    path = _no_steps(tmp_path)
    res = cli("analyze", path, "--memory-budget", "150M", "-q", "--no-report", "--format",
              "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        ("rightsize: warning: a memory budget of 150 MB per trace cannot be kept: analyzing any "
        "trace takes about 200 MB; each is read over its smallest window (one step, or one "
        "slice of its time)")]
