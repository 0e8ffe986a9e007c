"""Host samples as report series: exact values inline, and a recorded CPU run carries them."""

from __future__ import annotations

import polars as pl

from rightsize.analyzers.metrics.host_timeline import host_timeline
from rightsize.traces.samples import conform_samples
from tests.report_docs import real_doc


def _samples(n: int) -> pl.DataFrame:
    return conform_samples("host", pl.DataFrame({
        "t_ns": [10**9 + i * 100_000_000 for i in range(n)],
        "cpu_util_pct": [float(10 * i) for i in range(n)],
        "job_cpu_util_pct": [100.0] * n,
        "job_rss_bytes": [1000 * (i + 1) for i in range(n)],
        "dataloader_workers": [i % 3 for i in range(n)],
        "cpu_count": [8] * n,
    }))


def test_samples_become_series_with_the_profiled_window():
    tl = host_timeline(_samples(4), (10**9 + 150_000_000, 10**9 + 250_000_000))
    assert tl is not None
    assert tl.t_s == (0.0, 0.1, 0.2, 0.3) and tl.cpu_util_pct == (0.0, 10.0, 20.0, 30.0)
    assert tl.job_rss_bytes == (1000, 2000, 3000, 4000) and tl.cpu_count == 8
    assert tl.window_s == (0.15, 0.25)
    assert host_timeline(None) is None and host_timeline(_samples(0)) is None


def test_long_runs_are_averaged_into_buckets_keeping_the_peak_worker_count():
    tl = host_timeline(_samples(6), None, max_points=3)  # span 0.5 s -> buckets of 1/6 s
    assert tl is not None and tl.window_s is None
    assert tl.t_s == (0.0, 0.2, 0.4)
    assert tl.cpu_util_pct == (5.0, 25.0, 45.0)
    assert tl.job_rss_bytes == (1500, 3500, 5500)
    assert tl.dataloader_workers == (1, 2, 2)


def test_a_recorded_cpu_run_carries_its_host_samples():
    doc = real_doc("train_host-cpu")
    host = doc["host_timeline"]
    assert len(host["t_s"]) == len(host["cpu_util_pct"]) >= 10
    start, end = host["window_s"]
    assert 0 < start < end < host["t_s"][-1]
