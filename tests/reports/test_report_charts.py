"""The chart views of the report model: per-step split, one step over time, host samples, the
candidate scatter's axes. Exact values on inline document parts and a real sample run."""

from __future__ import annotations

from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document.sizing import HostTimeline
from rightsize.reports.charts import (
    category_color,
    host_chart,
    sizing_axes,
    step_split,
)
from rightsize.reports.model import build_model
from rightsize.reports.text import render_text
from tests.report_docs import real_doc, typed

ZERO = {"pcie": 0.0, "dataloader": 0.0, "communication": 0.0}


def _steps(rows: tuple[dm.StepSplit, ...], split: dm.SplitOverTime | None = None,
           mean: float | None = 15.0) -> dm.StepStats:
    return dm.StepStats(len(rows) or 1, mean, None, None, "profiler_step", True, 0, (),
                        rows, split)


def test_per_step_bars_keep_the_share_colours_and_drop_empty_shares():
    rows = (dm.StepSplit(3, 0.0, 10.0, {"compute": 6.0, "host": 4.0, "idle": 0.0, **ZERO}),
            dm.StepSplit(4, 10.0, 20.0, {"compute": 5.0, "host": 14.0, "idle": 1.0, **ZERO}))
    v = step_split(_steps(rows))
    assert v.kind == "per_step" and v.labels == ("step 3", "step 4")
    assert [(s.name, s.color, s.ms) for s in v.series] == [
        ("compute", category_color("compute"), (6.0, 5.0)),
        ("host", category_color("host"), (4.0, 14.0)),
        ("idle", category_color("idle"), (0.0, 1.0))]
    assert v.summary == "10 / 20 ms (slowest: step 4, +33.3% on the mean)"


def test_one_step_is_drawn_as_slices_in_percent():
    split = dm.SplitOverTime(0.5, {"compute": (0.5, 0.25), "idle": (0.0, 0.25), "pcie": (0, 0)})
    v = step_split(_steps((dm.StepSplit(1, 0.0, 0.75, {"compute": 0.75}),), split))
    assert v.kind == "over_time" and v.labels == ("0", "0.5") and v.bucket_ms == 0.5
    assert [(s.name, s.ms) for s in v.series] == [("compute", (100.0, 50.0)),
                                                  ("idle", (0.0, 50.0))]
    assert v.summary is None


def test_no_split_is_an_empty_state():
    v = step_split(dm.NO_STEPS)
    assert v.kind == "none" and v.series == () and v.empty


def test_host_samples_become_a_chart_in_mib():
    tl = HostTimeline((0.0, 0.1), (10.0, None), (100.0, 150.0), (2**20, 3 * 2**19), (0, 2), 4,
                      (0.05, 0.08))
    h = host_chart(tl)
    assert h.empty is None and h.rss_mib == (1.0, 1.5) and h.peak_rss == "1.50 MiB"
    assert h.window_s == (0.05, 0.08) and h.cpu_count == 4
    assert host_chart(None).empty


def test_scatter_axes_start_at_zero_and_hold_every_range():
    # 243.5-245 ms must not fill the axis: from 0 to a round number above the highest range
    x, y = sizing_axes([(243.5, 245.0, 244.0, 0.031), (240.0, 250.0, 245.0, 0.012)]) or (0, 0)
    assert (x.min, x.max, y.min, y.max) == (0.0, 300.0, 0.0, 0.04)
    assert sizing_axes([(None, None, None, None)]) is None


def test_cpu_run_model_has_its_charts_and_a_per_step_line():
    m = build_model(typed(real_doc("train_host-cpu")))
    charts = m.charts()
    assert charts["step_split"]["kind"] == "per_step"
    assert charts["step_split"]["labels"] == ["step 2", "step 3", "step 4"]
    assert len(charts["host"]["t_s"]) == len(charts["host"]["cpu_util_pct"]) >= 10
    assert charts["sizing_axes"]["x_max"] > 0 and charts["sizing_now"]["label"] == "this CPU"
    assert m.ops[0].self_ms is not None and m.ops[0].self_ms >= m.ops[-1].self_ms  # type: ignore[operator]
    text = render_text(m.document)
    assert sum(line.startswith("Per step: ") for line in text.splitlines()) == 1
    top = text.split("Top ops by self time", 1)[1].splitlines()[1]
    assert top.split()[:3] == [f"{m.ops[0].self_ms:.3f}", "ms", f"{m.ops[0].calls}x"]
