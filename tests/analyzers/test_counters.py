"""A verdict from GPU counters alone, and its capped confidence."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.analyzers.diagnosis.counters import diagnose_counters
from rightsize.analyzers.thresholds import SIGNALS
from rightsize.pipeline import analyze_paths
from rightsize.vocab import Bound
from tests.conftest import shared_path


def samples(**cols):
    n = len(next(iter(cols.values())))
    return pl.DataFrame({"t_ns": list(range(n)), "gpu_index": [0] * n, **cols})


def test_busy_gpu_split_by_math_vs_dram():
    d = diagnose_counters(samples(gpu_util_pct=[90.0, 90.0], gpm_tensor_util_pct=[70.0, 70.0],
                                  gpm_dram_bw_util_pct=[30.0, 30.0]))
    assert d.device == "counters" and d.bound is Bound.COMPUTE
    assert d.shares_pct["compute"] == pytest.approx(63.0) and d.shares_pct["memory"] == \
        pytest.approx(27.0)
    assert d.shares_pct["host"] == pytest.approx(10.0) and d.shares_pct["dataloader"] is None
    # margin |63 - 27| / 90 = 0.4 -> 0.5 * (0.5 + 0.2)
    assert d.confidence == 0.35 <= SIGNALS.counters_only_max_confidence


def test_waiting_gpu_is_host_and_says_why():
    d = diagnose_counters(samples(gpu_util_pct=[20.0, 40.0]))
    assert d.bound is Bound.HOST and d.confidence == round(0.5 * (0.5 + 0.5 * 0.7), 2)
    assert any("cannot tell data loading" in e for e in d.evidence)


def test_full_host_link_is_pcie():
    d = diagnose_counters(samples(gpu_util_pct=[30.0] * 2, pcie_rx_bytes_per_s=[20e9] * 2,
                                  pcie_tx_bytes_per_s=[1e9] * 2, pcie_link_gen=[4] * 2,
                                  pcie_link_width=[16] * 2))
    assert d.shares_pct["pcie"] == pytest.approx(62.5)  # 20 GB/s of 32 GB/s
    assert d.bound is Bound.PCIE


def test_busy_without_profiling_counters_has_no_verdict():
    d = diagnose_counters(samples(gpu_util_pct=[95.0, 95.0]))
    assert d.bound is None and d.confidence is None


def test_one_sample_or_an_idle_gpu_is_inconclusive():
    one = diagnose_counters(samples(gpu_util_pct=[95.0]))
    assert (one.bound, one.confidence) == (Bound.INCONCLUSIVE, None)
    assert one.evidence[0].startswith("inconclusive: one sample of GPU 0")
    idle = diagnose_counters(samples(gpu_util_pct=[0.0, 0.5, 0.0]))
    assert idle.bound is Bound.INCONCLUSIVE
    assert "GPU 0 was idle in every sample (utilization.gpu at most 0%)" in idle.evidence[0]


def test_analyze_a_metrics_log_alone(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
                   "2023/11/14 22:13:20.000, 0, 12 %, 1000 MiB\n"
                   "2023/11/14 22:13:21.000, 0, 18 %, 1000 MiB\n")
    doc = analyze_paths([log])
    d = doc["diagnosis"]
    assert (d["device"], d["bound"]) == ("counters", "host")
    assert d["shares_pct"]["host"] == 85.0


def test_shared_dcgm_scrape_of_an_idle_gpu():
    doc = analyze_paths([shared_path("traces", "dcgm",
                                     "datadog-integrations-core-dcgm-tests-docker-serve-metrics.prom")])
    # one scrape of an idle T4: no workload to judge (it was called host-bound, 0.50)
    assert (doc["diagnosis"]["bound"], doc["diagnosis"]["confidence"]) == ("inconclusive", None)
    assert doc["diagnosis"]["utilization"]["nvml"]["gpu_util_pct_mean"] == 0.0
