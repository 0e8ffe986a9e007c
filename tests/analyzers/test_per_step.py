"""The per-step split of the exclusive shares: exact values inline, exact sums on a real trace."""

from __future__ import annotations

import numpy as np

from rightsize.analyzers.analysis import Analysis, Context, analyze_trace
from rightsize.analyzers.document import Document
from rightsize.analyzers.document.build import document
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.per_step import exclusive_windows, per_step, split_over_time
from rightsize.analyzers.metrics.steps import Steps
from rightsize.traces.kineto import read_kineto
from rightsize.vocab import SHARES
from tests.conftest import shared_path


def _steps(starts: list[int], ends: list[int], names: tuple[str, ...]) -> Steps:
    return Steps(names, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
                 "profiler_step", False, 0)


def _ivs(*pairs: tuple[int, int]) -> iv.Intervals:
    return iv.union(iv.of(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])))


def _ns(ms: float) -> int:
    """Whole ns back from ms (exact: the values are ns / 1e6)."""
    return round(ms * 1e6)


def test_shares_are_cut_at_step_boundaries():
    steps = _steps([100, 200], [200, 300], ("ProfilerStep#7", "ProfilerStep#8"))
    parts = {"compute": _ivs((150, 250)), "host": _ivs((100, 150), (250, 260)),
             "idle": _ivs((260, 300))}
    out = per_step(parts, steps)
    assert [(s.step, _ns(s.start_ms), _ns(s.dur_ms)) for s in out] == [(7, 0, 100), (8, 100, 100)]
    assert [{k: _ns(v) for k, v in s.shares_ms.items()} for s in out] == [
        {"compute": 50, "host": 50, "idle": 0}, {"compute": 50, "host": 10, "idle": 40}]
    assert out[1].to_json() == {"step": 8, "start_ms": 0.0001, "dur_ms": 0.0001,
                                "shares_ms": {"compute": 0.00005, "host": 0.00001,
                                              "idle": 0.00004}}


def test_overlapping_steps_give_the_overlap_to_the_earlier_step():
    # the TensorBoard plugin's GPU-annotation steps overlap the host ones (tb-plugin definitions)
    steps = _steps([0, 50, 120], [100, 150, 130], ("a", "b", "c"))
    lo, hi = exclusive_windows(steps)
    assert lo.tolist() == [0, 100, 150] and hi.tolist() == [100, 150, 150]
    out = per_step({"compute": _ivs((0, 150))}, steps)
    assert [s.step for s in out] == [0, 1, 2]
    assert [_ns(s.shares_ms["compute"]) for s in out] == [100, 50, 0]  # sums to the union: 150


def test_one_step_is_split_over_time_in_equal_buckets():
    steps = _steps([1000], [1000 + 10_000], ("ProfilerStep#1",))
    parts = {"compute": _ivs((1000, 4000)), "idle": _ivs((4000, 11_000))}
    split = split_over_time(parts, steps, max_buckets=4)
    assert split is not None and _ns(split.bucket_ms) == 2500
    assert {k: tuple(_ns(x) for x in v) for k, v in split.shares_ms.items()} == {
        "compute": (2500, 500, 0, 0), "idle": (0, 2000, 2500, 2500)}


def test_per_step_values_sum_exactly_to_the_reported_totals():
    path = shared_path("traces", "kineto",
                       "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz")
    from rightsize.catalog import load_catalog

    rank = analyze_trace(read_kineto(path), Context(catalog=load_catalog()))
    d = rank.diagnosis
    assert d is not None and d.per_step and rank.steps.count == 6
    assert sum(_ns(s.dur_ms) for s in d.per_step) == d.step_ns == int(rank.steps.dur_ns.sum())
    for s in d.per_step:
        assert sum(_ns(s.shares_ms[k]) for k in SHARES) == _ns(s.dur_ms)
    for k in SHARES:  # the verdict's shares are these sums over the summed step time
        assert 100.0 * sum(_ns(s.shares_ms[k]) for s in d.per_step) / d.step_ns \
            == d.shares_pct[k]
    doc = Document.from_json(document(Analysis((rank,)), []).to_json())
    rows = doc.steps.per_step
    assert [r.step for r in rows] == [s.step for s in d.per_step]
    assert doc.diagnosis is not None and doc.steps.split_over_time is None
    step_ns = sum(round(r.dur_ms * 1e6) for r in rows)
    assert step_ns == d.step_ns
    assert round(doc.steps.mean_ms * 1e6) == round(step_ns / len(rows))  # type: ignore[operator]
    for k in SHARES:
        total_ns = sum(round(r.shares_ms[k] * 1e6) for r in rows)
        assert total_ns == sum(_ns(s.shares_ms[k]) for s in d.per_step)
        assert round(100.0 * total_ns / step_ns, 2) == doc.diagnosis.shares_pct[k]


def test_more_steps_than_a_document_lists_are_summarised_with_exact_sums() -> None:
    """Issue 40, 5: 2,500 steps listed at most 1,000 rows: rows of 3 consecutive steps (the
    last of 1), durations and shares summed, the first step's number and start; names kept
    per row."""
    from rightsize.analyzers.document.metrics import StepSplit
    from rightsize.analyzers.metrics.per_step import summarised

    rows = tuple(StepSplit(n, n * 2.0, 2.0, {"compute": 1.5, "idle": 0.5}) for n in range(2500))
    names = tuple(f"ProfilerStep#{n}" for n in range(2500))
    out, kept = summarised(rows, names)
    assert len(out) == 834 and len(kept) == 834
    assert out[0] == StepSplit(0, 0.0, 6.0, {"compute": 4.5, "idle": 1.5}, steps=3)
    assert out[-1] == StepSplit(2499, 4998.0, 2.0, {"compute": 1.5, "idle": 0.5}, steps=1)
    assert kept[:2] == ("ProfilerStep#0", "ProfilerStep#3")
    assert sum(r.dur_ms for r in out) == 5000.0
    assert sum(r.shares_ms["compute"] for r in out) == 3750.0
    assert summarised(rows[:1000], names[:1000]) == (rows[:1000], names[:1000])
