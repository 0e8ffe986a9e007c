"""Chart views of the report model: how the steps split over time, host samples, candidate GPUs.

Input: parts of the typed analysis document (``steps.per_step``, ``steps.split_over_time``,
``host_timeline``, the sizing rows of :mod:`rightsize.reports.tables`). Output: frozen
dataclasses of plain values, with the one colour per category every chart uses
(:data:`CATEGORY_COLORS`, by its name in style.css's palette), and :func:`sizing_axes`, the fixed
axes of the candidate scatter (logarithmic with labelled ticks when one candidate is far from the
rest). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rightsize.analyzers.document.metrics import StepStats
from rightsize.analyzers.document.sizing import HostTimeline
from rightsize.reports import fmt
from rightsize.vocab import SHARES

# One colour per category in every chart of every page: a breakdown row and the exclusive share
# that means the same time (data loader, communication, copies, host) share it; the timeline and
# the sizing scatter use none of these. The values are the names of CSS custom properties; the
# colours themselves are defined once, in style.css's :root, and the page's script reads them
# there (chart_setup.js: color()), so the report, compare and plan pages cannot drift apart.
CATEGORY_COLORS = {
    "compute": "--c-compute", "kernel": "--c-compute",
    "memory": "--c-memory", "memset": "--c-memset",
    "pcie": "--c-pcie", "memcpy": "--c-pcie",
    "dataloader": "--c-dataloader",
    "communication": "--c-communication",
    "host": "--c-host", "cpu_exec": "--c-host", "runtime": "--c-runtime",
    "idle": "--c-idle", "other": "--c-idle",
}
MAX_STEP_BARS = 300  # more steps than this: the first ones (the JSON has them all)


def category_color(key: str) -> str:
    """The palette name (a CSS custom property of style.css) that colours category ``key``."""
    return CATEGORY_COLORS.get(key, "--c-unknown")


@dataclass(frozen=True, slots=True)
class ShareSeries:
    name: str  # the share, as the shares chart names it
    color: str
    ms: tuple[float, ...]  # per step; % of each slice for ``over_time``


@dataclass(frozen=True, slots=True)
class StepSplit:
    """Stacked bars: one per step (``per_step``, ms), or one per time slice of a single step
    (``over_time``, % of the slice), split by exclusive share."""

    kind: str  # "per_step" | "over_time" | "none"
    labels: tuple[str, ...]
    series: tuple[ShareSeries, ...]
    bucket_ms: float | None
    summary: str | None  # one line for the text report
    empty: str | None


def step_split(steps: StepStats) -> StepSplit:
    if steps.count >= 2 and steps.per_step:
        rows = steps.per_step[:MAX_STEP_BARS]
        keys = _keys([r.shares_ms for r in rows])
        series = tuple(ShareSeries(k, category_color(k),
                                   tuple(float(r.shares_ms.get(k, 0.0)) for r in rows))
                       for k in keys)
        return StepSplit("per_step", tuple(f"step {r.step}" for r in rows), series, None,
                         _summary(steps), None)
    split = steps.split_over_time
    if split is not None:
        keys = _keys([split.shares_ms])
        n = max((len(v) for v in split.shares_ms.values()), default=0)
        labels = tuple(f"{i * split.bucket_ms:.3g}" for i in range(n))
        # percent of each slice: the strip reads the same whatever the step's length
        series = tuple(ShareSeries(k, category_color(k), tuple(
            round(100.0 * v / split.bucket_ms, 3) if split.bucket_ms else 0.0
            for v in split.shares_ms[k])) for k in keys)
        return StepSplit("over_time", labels, series, split.bucket_ms, None, None)
    return StepSplit("none", (), (), None, None,
                     "No per-step split in this analysis (no steps, or no diagnosis).")


def _keys(maps: Sequence[Mapping[str, float] | Mapping[str, tuple[float, ...]]]) -> list[str]:
    """Shares present in any step, in display order; all-zero shares are left out."""
    seen: dict[str, float] = {}
    for m in maps:
        for k, v in m.items():
            seen[k] = seen.get(k, 0.0) + (sum(v) if isinstance(v, tuple) else float(v))
    order = [k for k in SHARES if k in seen] + sorted(set(seen) - set(SHARES))
    return [k for k in order if seen[k] > 0]


def _summary(steps: StepStats) -> str | None:
    """``18.2 / 20.4 / 23.6 ms (slowest: step 4, +13.6% on the mean)``."""
    rows = steps.per_step
    if len(rows) < 2 or not steps.mean_ms:
        return None
    shown = " / ".join(f"{r.dur_ms:.3g}" for r in rows[:8]) + (" / …" if len(rows) > 8 else "")
    slow = max(rows, key=lambda r: r.dur_ms)
    over = 100.0 * (slow.dur_ms - steps.mean_ms) / steps.mean_ms
    return f"{shown} ms (slowest: step {slow.step}, {over:+.1f}% on the mean)"


@dataclass(frozen=True, slots=True)
class HostChart:
    t_s: tuple[float, ...]
    cpu_util_pct: tuple[float | None, ...]
    job_cpu_util_pct: tuple[float | None, ...]  # 100 = one core
    rss_mib: tuple[float | None, ...]
    dataloader_workers: tuple[int | None, ...]
    cpu_count: int | None
    window_s: tuple[float, ...] | None
    peak_rss: str | None  # formatted, for the caption
    empty: str | None


def host_chart(tl: HostTimeline | None) -> HostChart:
    if tl is None or not tl.t_s:
        return HostChart((), (), (), (), (), None, None, None,
                         "No host samples (not a run directory of `rightsize run`).")
    rss = tuple(None if v is None else round(v / 2**20, 1) for v in tl.job_rss_bytes)
    peak = max((v for v in tl.job_rss_bytes if v is not None), default=None)
    return HostChart(tl.t_s, tl.cpu_util_pct, tl.job_cpu_util_pct, rss, tl.dataloader_workers,
                     tl.cpu_count, tl.window_s, fmt.nbytes(peak) if peak else None, None)


# Largest over smallest value of an axis above which it is logarithmic: a V100 5x slower than
# the rest would otherwise squeeze every other candidate into the first fifth of a linear axis
# from 0. Below it, the axis starts at 0 (a 1 ms difference stays small next to a 245 ms step).
LOG_SPREAD = 5.0
HEADROOM = 1.1  # room beyond the outermost point for its name and range bar
TICK_SERIES = ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0))
MIN_LOG_TICKS = 4  # the first series above giving this many labelled ticks is used


@dataclass(frozen=True, slots=True)
class Tick:
    value: float
    label: str


@dataclass(frozen=True, slots=True)
class Axis:
    """A fixed axis of the candidate scatter; ``ticks`` are the labelled ticks of a log axis (a
    linear one lets the chart pick its own)."""

    min: float
    max: float
    log: bool = False
    ticks: tuple[Tick, ...] = ()

    def fraction(self, v: float) -> float:
        """Where ``v`` is drawn along the axis: 0 at ``min``, 1 at ``max`` (what Chart.js's
        linear and logarithmic scales do: the plot area's pixel is this share of its size)."""
        if self.log:
            lo = math.log10(self.min)
            return (math.log10(v) - lo) / (math.log10(self.max) - lo)
        return (v - self.min) / (self.max - self.min)

    def to_json(self) -> dict[str, object]:
        return {"min": self.min, "max": self.max, "log": self.log,
                "ticks": [[t.value, t.label] for t in self.ticks]}


def sizing_axes(points: Sequence[tuple[float | None, float | None, float | None, float | None]]
                ) -> tuple[Axis, Axis] | None:
    """Fixed axes for the candidate scatter from (step low, step high, step, cost) of each
    point: from 0 to a round number above the highest value when the values are within
    :data:`LOG_SPREAD` of each other, else logarithmic between round numbers around them, with
    labelled ticks, so one outlier leaves the others a readable spread."""
    xs = [v for p in points for v in (p[0], p[1], p[2]) if v is not None]
    ys = [p[3] for p in points if p[3] is not None]
    if not xs or not ys:
        return None
    return _axis(xs, lambda v: f"{v:,g}"), _axis(ys, fmt.usd)


def _axis(values: Sequence[float], label: Callable[[float], str]) -> Axis:
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo > LOG_SPREAD:
        a, b = _nice_below(lo / HEADROOM), _nice(hi * HEADROOM)
        return Axis(a, b, True, tuple(Tick(v, label(v)) for v in _log_ticks(a, b)))
    return Axis(0.0, _nice(hi * HEADROOM))


def _log_ticks(a: float, b: float) -> tuple[float, ...]:
    """Round values from ``a`` to ``b``: 1-2-5 per decade, denser when that gives fewer than
    :data:`MIN_LOG_TICKS`, only powers of ten when it gives more than a dozen."""
    def series(mantissas: tuple[float, ...]) -> tuple[float, ...]:
        out = []
        for k in range(math.floor(math.log10(a)), math.ceil(math.log10(b)) + 1):
            out += [round(m * 10.0 ** k, 12) for m in mantissas]
        return tuple(v for v in out if a * (1 - 1e-9) <= v <= b * (1 + 1e-9))

    first = series(TICK_SERIES[0])
    if len(first) > 12:
        return series((1.0,))
    return next((t for m in TICK_SERIES if len(t := series(m)) >= MIN_LOG_TICKS),
                series(TICK_SERIES[-1]))


MANTISSAS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def _nice(v: float) -> float:
    """The next 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k at or above ``v`` (round ticks)."""
    if v <= 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(v))
    for m in MANTISSAS:
        if v <= m * mag * (1 + 1e-12):
            return round(m * mag, 12)
    return round(10.0 * mag, 12)


def _nice_below(v: float) -> float:
    """The largest 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k at or below ``v`` (> 0)."""
    mag = 10.0 ** math.floor(math.log10(v))
    return round(max(m * mag for m in MANTISSAS if m * mag <= v * (1 + 1e-12)), 12)
