"""The chart views of the report model: per-step split, one step over time, host samples, the
candidate scatter's axes. Exact values on inline document parts and a real sample run."""

from __future__ import annotations

import math
from itertools import pairwise

from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document.sizing import HostTimeline
from rightsize.reports.charts import (
    Axis,
    Tick,
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
    assert not x.log and not y.log and x.ticks == y.ticks == ()  # the chart picks its ticks
    assert sizing_axes([(None, None, None, None)]) is None


# Five GPUs between 30 and 150 ms and $0.018-0.034 per 1k steps, and a V100 5x slower than the
# slowest of them (750 ms, $0.115); each with a ±15% range. (name, step ms, $ per 1k steps)
INNER = [("H100 SXM", 30.0, 0.025), ("A100 80GB SXM", 55.0, 0.027), ("L40S", 80.0, 0.019),
         ("A10G", 120.0, 0.034), ("L4", 150.0, 0.018)]
OUTLIER = ("V100 16GB SXM2", 750.0, 0.115)
WIDTH_PX, HEIGHT_PX = 1000, 600  # a plot area; Chart.js puts a value at fraction x size


def test_an_outlier_gets_log_axes_and_leaves_the_rest_a_readable_spread():
    pts = [(ms * 0.85, ms * 1.15, ms, usd) for _, ms, usd in [*INNER, OUTLIER]]
    x, y = sizing_axes(pts) or (None, None)
    # from a round number under the lowest range (25.5 / 1.1 -> 20) to one over the highest
    # (862.5 * 1.1 -> 1000); costs 0.018 / 1.1 -> 0.015 to 0.115 * 1.1 -> 0.15
    assert x == Axis(20.0, 1000.0, True, (Tick(20.0, "20"), Tick(50.0, "50"),
                                          Tick(100.0, "100"), Tick(200.0, "200"),
                                          Tick(500.0, "500"), Tick(1000.0, "1,000")))
    assert y == Axis(0.015, 0.15, True, (Tick(0.02, "$0.02"), Tick(0.03, "$0.03"),
                                         Tick(0.05, "$0.05"), Tick(0.1, "$0.10")))
    # the pixels, by the log scale's own formula: size * log(v / min) / log(max / min)
    px = [round(WIDTH_PX * x.fraction(ms), 1) for _, ms, _ in INNER]
    assert px == [round(WIDTH_PX * math.log10(ms / 20.0) / math.log10(50.0), 1)
                  for _, ms, _ in INNER] == [103.6, 258.6, 354.4, 458.0, 515.1]
    assert round(WIDTH_PX * x.fraction(OUTLIER[1]), 1) == 926.5
    py = [round(HEIGHT_PX * y.fraction(usd), 1) for _, _, usd in INNER]
    assert py == [133.1, 153.2, 61.6, 213.2, 47.5]
    # readable: the five take 41% of the width and no two are closer than 57 px; on the old
    # linear axes from 0 (x to 1000 ms, y to $0.15) they took 12%, 25 px apart, bottom-left
    assert px[-1] - px[0] > 0.4 * WIDTH_PX and min(b - a for a, b in pairwise(px)) > 57
    linear = [WIDTH_PX * ms / 1000.0 for _, ms, _ in INNER]
    assert linear[-1] - linear[0] == 120.0 and min(b - a for a, b in pairwise(linear)) == 25
    assert max(py) - min(py) > 2.5 * (HEIGHT_PX * (0.034 - 0.018) / 0.15)  # 166 px vs 64 px


def test_log_ticks_stay_round_and_few():
    # spread just above 5x: a denser series so an axis has at least four labels
    x, _ = sizing_axes([(40.0, 230.0, 100.0, 1.0), (None, None, None, 1.1)]) or (None, None)
    assert x is not None and x.log and (x.min, x.max) == (30.0, 300.0)
    assert [t.value for t in x.ticks] == [30.0, 50.0, 100.0, 200.0, 300.0]
    # five decades: powers of ten only
    x, _ = sizing_axes([(0.05, 2000.0, 1.0, 1.0)]) or (None, None)
    assert x is not None and [t.label for t in x.ticks] == ["0.1", "1", "10", "100", "1,000"]
    # costs below a tenth of a cent keep their digits
    _, y = sizing_axes([(1.0, 1.0, 1.0, 0.0002), (1.0, 1.0, 1.0, 0.002)]) or (None, None)
    assert y is not None and y.log and [t.label for t in y.ticks] == [
        "$0.0002", "$0.0005", "$0.001", "$0.002"]


def test_cpu_run_model_has_its_charts_and_a_per_step_line():
    m = build_model(typed(real_doc("train_host-cpu")))
    charts = m.charts()
    assert charts["step_split"]["kind"] == "per_step"
    assert charts["step_split"]["labels"] == ["step 2", "step 3", "step 4"]
    assert len(charts["host"]["t_s"]) == len(charts["host"]["cpu_util_pct"]) >= 10
    # a CPU run: no GPU recommended, every candidate projected alike: not charted, said why
    assert charts["sizing"] == [] and charts["sizing_now"] is None
    assert m.sizing.no_chart is not None and m.sizing.no_chart.startswith("Not charted: ")
    assert m.ops[0].self_ms is not None and m.ops[0].self_ms >= m.ops[-1].self_ms  # type: ignore[operator]
    text = render_text(m.document)
    assert sum(line.startswith("Per step: ") for line in text.splitlines()) == 1
    top = text.split("Top ops by self time", 1)[1].splitlines()[1]
    assert top.split()[:3] == [f"{m.ops[0].self_ms:.3f}", "ms", f"{m.ops[0].calls}x"]
