"""Big traces over a window of steps (``--steps A-B``, ``--memory-budget``): which steps, which
events, what the document says, and the memory model's inputs (sizes, gzip estimate)."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import polars as pl
import pytest

from rightsize.errors import InputError
from rightsize.pipeline import Options, analyze_document
from rightsize.traces import budget, kineto, window
from rightsize.traces.kineto import read_kineto
from rightsize.traces.nsys import read_nsys
from tests.conftest import shared_path
from tests.job.steps_job import BASE, EVENTS_PER_STEP, rank_trace
from tests.nsys_handmade import make_export


def _trace(tmp_path, steps=6, gz=False):
    return rank_trace(0, 2, steps).write(tmp_path / f"r.json{'.gz' if gz else ''}", gz=gz)


@pytest.mark.parametrize("gz", [False, True])
def test_asked_steps_read_only_their_span(tmp_path, gz):
    path = _trace(tmp_path, gz=gz)
    t = read_kineto(path, steps=(2, 3))
    assert t.steps["step"].to_list() == [2, 3]
    # steps 2-3 span [t2, end of step 3's GPU annotation]: their 2 kernels and 2 launches each
    assert t.kernels.height == 4 and t.runtime.height == 4
    assert t.kernels["ts_ns"].min() == (BASE + 2000 + 10) * 1000
    w = t.meta.window
    assert (w.first_step, w.last_step, w.steps_in_trace, w.reason) == (2, 3, 6, "asked")
    assert t.meta.base_time_ns is None  # absolute times: the window's clock is the trace's
    assert (w.lo_ns, w.hi_ns) == ((BASE + 2000) * 1000, (BASE + 3900) * 1000)
    assert t.meta.event_count == 6 * EVENTS_PER_STEP  # the file's events, all counted


def test_a_window_analyzes_its_steps_as_the_whole_trace_does(tmp_path):
    path = _trace(tmp_path)
    whole = analyze_document([path]).to_json()
    part = analyze_document([path], Options(steps=(2, 4))).to_json()
    assert part["steps"]["names"] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    keep = ("step", "dur_ms", "shares_ms")
    assert [{k: s[k] for k in keep} for s in part["steps"]["per_step"]] == \
        [{k: s[k] for k in keep} for s in whole["steps"]["per_step"][2:5]]
    assert part["inputs"][0]["window"] == {
        "first_step": 2, "last_step": 4, "steps_in_trace": 6, "reason": "asked",
        "need_bytes": budget.need_for_events(kineto.MEMORY, 36),
        "window_need_bytes": budget.need_for_events(kineto.MEMORY, 18), "budget_bytes": None}
    assert "r.json: analyzed over steps 2-4 (3 of 6 steps), as --steps asked" in part["notes"]
    assert "window" not in whole["inputs"][0]


def test_the_budget_chooses_the_most_steps_that_fit_from_the_second(tmp_path):
    path = _trace(tmp_path)
    need_3 = budget.need_for_events(kineto.MEMORY, 3 * EVENTS_PER_STEP)
    # a window fills 90% of the budget above the floor
    fits_3 = budget.BASE_BYTES + math.ceil((need_3 - budget.BASE_BYTES) / window.WINDOW_FILL)
    t = read_kineto(path, budget_bytes=fits_3)
    assert t.steps["step"].to_list() == [1, 2, 3]
    w = t.meta.window
    assert (w.reason, w.budget_bytes, w.window_need_bytes) == ("memory budget", fits_3, need_3)
    assert w.need_bytes == budget.need_for_events(kineto.MEMORY, 36)
    assert read_kineto(path, budget_bytes=fits_3 - 1).steps["step"].to_list() == [1, 2]
    # the whole trace fits: no window, and no first pass (the estimate from its size fits)
    assert read_kineto(path, budget_bytes=10**12).meta.window is None
    # not even one step fits: one step all the same, and the note says so
    doc = analyze_document([path], Options(memory_budget_bytes=budget.BASE_BYTES))
    assert doc.steps.names == ("ProfilerStep#1",)
    note = next(n for n in doc.notes if "analyzed over" in n)
    gb = f"{budget.BASE_BYTES / 1e9:.2f} GB"  # 36 or 12 events more: the same in GB
    assert note.startswith(f"r.json: analyzed over step 1 (1 of 6 steps): the whole trace needs "
                           f"about {gb} of memory to analyze, more than the {gb} budget")
    assert f"even one step needs about {gb}, more than the budget" in note


def test_steps_the_trace_does_not_have(tmp_path):
    from rightsize.errors import InputError

    with pytest.raises(InputError, match=r"no step numbered 7-9 \(--steps\); its steps: 0-5"):
        read_kineto(_trace(tmp_path), steps=(7, 9))


def test_nsys_window_is_a_where_on_start_and_end(tmp_path):
    path = make_export(tmp_path / "a.sqlite")
    whole = read_nsys(path)
    assert whole.steps["step"].to_list() == [7, 8] and whole.kernels.height == 2
    t = read_nsys(path, steps=(8, 8))
    # step 8 is [250, 500] (session ns), the last: rows ending after 250 or starting at 250+
    assert t.steps["step"].to_list() == [8]
    assert t.kernels["correlation"].to_list() == [12]
    assert t.runtime["correlation"].to_list() == [12]
    assert t.transfers["kind"].to_list() == ["memset"]
    assert sorted(t.cpu_ops["name"].to_list()) == ["ProfilerStep#8", "train_step"]
    assert (t.meta.window.first_step, t.meta.window.steps_in_trace) == (8, 2)
    # step 7 of 2: from the start to the end of step 8's host range (no GPU annotation)
    first = read_nsys(path, steps=(7, 7))
    assert first.steps["step"].to_list() == [7] and first.kernels.height == 2


def test_choose_and_bounds_on_a_table():
    t = window.StepTable(step=np.array([10, 11, 12, 13]), start_ns=np.array([0, 100, 200, 300]),
                         end_ns=np.array([90, 190, 290, 390]),
                         gpu_end_ns=np.array([-1, 195, -1, -1]),
                         starts=np.array([1, 50, 100, 150, 199, 250, 260, 300, 350]))
    assert window.bounds(t, 1, 1) == (100, 195)  # the GPU annotation ends step 11
    assert window.bounds(t, 2, 2) == (200, 390)  # no annotation: step 13's host end
    assert window.bounds(t, 0, 3) == (None, None)
    assert window.window_events(t, 1, 1) == 2  # starts in [100, 195)
    assert window.window_events(t, 1, 2) == 7  # starts in [100, 390)
    assert window.window_events(t, 1, 3) == 7  # the last step: to the end
    assert window.choose(t, lambda n: n, 9) == (0, 3)  # all 9 fit
    assert window.choose(t, lambda n: n, 8) == (1, 3)  # from the second step; 0.9 x 8 >= 7
    assert window.choose(t, lambda n: n, 7) == (1, 1)
    assert window.choose(t, lambda n: n, 1) == (1, 1)  # one step, even over the budget


def test_sizes_and_the_gzip_estimate(tmp_path, monkeypatch):
    assert budget.parse_size("2G") == 2_000_000_000
    assert budget.parse_size("1.5GiB") == int(1.5 * 2**30)
    assert budget.parse_size("512MB") == 512_000_000 and budget.parse_size("800") == 800
    with pytest.raises(ValueError, match="not a size"):
        budget.parse_size("lots")
    text = b"".join(b'{"ph": "X", "ts": %d}\n' % i for i in range(200_000))
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text))
    assert budget.gunzipped_size(path, path.stat().st_size) == len(text)
    monkeypatch.setattr(budget, "SAMPLE_BYTES", 2000)  # the ratio from a sample, then ISIZE
    assert budget.gunzipped_size(path, path.stat().st_size) == len(text)
    est = budget.estimate(path, kineto.MEMORY)
    assert est.data_bytes == len(text)
    assert est.need_bytes == budget.BASE_BYTES + int(len(text) * kineto.MEMORY.per_byte)


def test_keep_is_overlap():
    df = pl.DataFrame({"ts_ns": [0, 10, 20, 30], "dur_ns": [5, 15, 0, 5]})
    assert window.keep(df, 12, 30)["ts_ns"].to_list() == [10, 20]
    assert window.keep(df, None, 20)["ts_ns"].to_list() == [0, 10]
    assert window.keep(df.select("ts_ns"), 10, None)["ts_ns"].to_list() == [10, 20, 30]


def _legacy_trace(tmp_path):
    """Three steps as torch 1.8-1.9 wrote them (the TensorBoard plugin's samples): the step
    range is an "Operator", kernels and runtime calls are "Kernel"/"Runtime", ids lower case."""
    events = []
    for s in (5, 6, 7):
        t = 1000 * s
        events += [
            {"ph": "X", "cat": "Operator", "name": f"ProfilerStep#{s}", "pid": "25738",
             "tid": "25738", "ts": t, "dur": 900},
            {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": "25738",
             "tid": "25738", "ts": t + 5, "dur": 3, "args": {"correlation": s}},
            {"ph": "X", "cat": "Kernel", "name": "implicit_convolve_sgemm", "pid": 0,
             "tid": "stream 7", "ts": t + 10, "dur": 500, "args": {"correlation": s}}]
    path = tmp_path / "legacy.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_asked_steps_of_a_2021_trace_whose_steps_are_operators(tmp_path):
    # before: "no step numbered 6-7 (--steps); its steps: none" (the first pass took the
    # step ranges of "user_annotation" only)
    t = read_kineto(_legacy_trace(tmp_path), steps=(6, 7))
    assert t.steps["step"].to_list() == [6, 7]
    assert t.kernels["ts_ns"].to_list() == [6010_000, 7010_000]
    with pytest.raises(InputError, match=r"its steps: 5-7"):
        read_kineto(_legacy_trace(tmp_path), steps=(8, 9))


def test_steps_6_to_10_of_the_shared_2021_resnet50_trace():
    path = shared_path("traces", "kineto", "kineto-tb_plugin-resnet50_num_workers_0-"
                       "worker0.1623143089861.pt.trace.json.gz")
    doc = analyze_document([path], Options(steps=(6, 10)))
    # the trace holds ProfilerStep#5-#10 (grep of the file); 6-10 is the last five
    assert doc.steps.names == tuple(f"ProfilerStep#{n}" for n in range(6, 11))
    assert doc.to_json()["inputs"][0]["window"]["steps_in_trace"] == 6
