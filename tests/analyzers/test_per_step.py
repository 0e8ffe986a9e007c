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


def test_shares_are_cut_at_step_boundaries():
    steps = _steps([100, 200], [200, 300], ("ProfilerStep#7", "ProfilerStep#8"))
    parts = {"compute": _ivs((150, 250)), "host": _ivs((100, 150), (250, 260)),
             "idle": _ivs((260, 300))}
    out = per_step(parts, steps)
    assert out is not None
    assert out.step == (7, 8) and out.start_ns == (0, 100) and out.dur_ns == (100, 100)
    assert out.shares_ns == {"compute": (50, 50), "host": (50, 10), "idle": (0, 40)}


def test_overlapping_steps_give_the_overlap_to_the_earlier_step():
    # the TensorBoard plugin's GPU-annotation steps overlap the host ones (tb-plugin definitions)
    steps = _steps([0, 50, 120], [100, 150, 130], ("a", "b", "c"))
    lo, hi = exclusive_windows(steps)
    assert lo.tolist() == [0, 100, 150] and hi.tolist() == [100, 150, 150]
    out = per_step({"compute": _ivs((0, 150))}, steps)
    assert out is not None and out.step == (0, 1, 2)
    assert out.shares_ns["compute"] == (100, 50, 0)  # sums to the union: 150


def test_one_step_is_split_over_time_in_equal_buckets():
    steps = _steps([1000], [1000 + 10_000], ("ProfilerStep#1",))
    parts = {"compute": _ivs((1000, 4000)), "idle": _ivs((4000, 11_000))}
    split = split_over_time(parts, steps, max_buckets=4)
    assert split is not None and split.bucket_ns == 2500
    assert split.shares_ns == {"compute": (2500, 500, 0, 0), "idle": (0, 2000, 2500, 2500)}


def test_per_step_values_sum_exactly_to_the_reported_totals():
    path = shared_path("traces", "kineto",
                       "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz")
    from rightsize.catalog import load_catalog

    rank = analyze_trace(read_kineto(path), Context(catalog=load_catalog()))
    d = rank.diagnosis
    assert d is not None and d.per_step is not None and rank.steps.count == 6
    assert sum(d.per_step.dur_ns) == d.step_ns == int(rank.steps.dur_ns.sum())
    for i, dur in enumerate(d.per_step.dur_ns):
        assert sum(d.per_step.shares_ns[k][i] for k in SHARES) == dur
    for k in SHARES:  # the verdict's shares are these sums over the summed step time
        assert 100.0 * sum(d.per_step.shares_ns[k]) / d.step_ns == d.shares_pct[k]
    doc = Document.from_json(document(Analysis((rank,)), []).to_json())
    rows = doc.steps.per_step
    assert [r.step for r in rows] == list(d.per_step.step)
    assert doc.diagnosis is not None and doc.steps.split_over_time is None
    step_ns = sum(round(r.dur_ms * 1e6) for r in rows)
    assert step_ns == d.step_ns
    assert round(doc.steps.mean_ms * 1e6) == round(step_ns / len(rows))  # type: ignore[operator]
    for k in SHARES:
        total_ns = sum(round(r.shares_ms[k] * 1e6) for r in rows)
        assert total_ns == sum(d.per_step.shares_ns[k])
        assert round(100.0 * total_ns / step_ns, 2) == doc.diagnosis.shares_pct[k]
