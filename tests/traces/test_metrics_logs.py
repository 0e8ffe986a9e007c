"""GPU metric logs: the real dcgm-exporter scrape, hand-made nvidia-smi / scrape / dmon files."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from rightsize.errors import InputError
from rightsize.traces.metrics_logs import looks_like_metrics_log, metrics_log_kind, read_metrics_log
from rightsize.traces.samples import GPU_SAMPLES
from tests.conftest import SAMPLES, shared_path

MIB = 1024 * 1024
PROM = "datadog-integrations-core-dcgm-tests-docker-serve-metrics.prom"


def direct_prom(path: Path) -> dict[tuple[str, str], float]:
    """{(field, UUID): value} read straight from the scrape with a regex."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r'^(DCGM_FI_\w+)\{.*UUID="([^"]+)".*\}\s+(\S+)$', line)
        if m:
            out[(m[1], m[2])] = float(m[3])
    return out


@pytest.mark.shared
def test_real_dcgm_scrape_matches_text() -> None:
    path = shared_path("traces", "dcgm", PROM)
    before = path.read_bytes()
    assert metrics_log_kind(before[:4096]) == "dcgm-exporter"
    df = read_metrics_log(path)
    assert path.read_bytes() == before
    assert df.schema == pl.Schema(GPU_SAMPLES)
    direct = direct_prom(path)
    uuids = sorted({u for _, u in direct})
    assert df.height == len(uuids) == 2
    assert df["t_ns"].null_count() == 2  # a scrape has no timestamps
    first = df.filter(pl.col("gpu_uuid") == "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e").row(
        0, named=True
    )
    u = first["gpu_uuid"]
    assert first["gpu_index"] == 0 and first["source"] == "dcgm"
    assert first["gpu_util_pct"] == direct[("DCGM_FI_DEV_GPU_UTIL", u)] == 0.0
    assert first["power_w"] == direct[("DCGM_FI_DEV_POWER_USAGE", u)] == 8.969
    assert first["sm_clock_mhz"] == direct[("DCGM_FI_DEV_SM_CLOCK", u)] == 300
    assert first["mem_clock_mhz"] == 405 and first["temperature_c"] == 25.0
    assert first["mem_used_bytes"] == 0
    # No FB_TOTAL for this GPU: total = used + free (15109 MiB).
    assert first["mem_total_bytes"] == 15109 * MIB
    second = df.filter(pl.col("gpu_uuid") != u).row(0, named=True)
    assert second["mem_total_bytes"] == direct[("DCGM_FI_DEV_FB_TOTAL", second["gpu_uuid"])] * MIB
    assert second["clocks_event_reasons"] == 1 and second["power_limit_w"] == 70.0


def test_scrape_with_timestamps_and_prof_ratios(tmp_path: Path) -> None:
    text = '# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.\n# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\nDCGM_FI_PROF_SM_ACTIVE{gpu="1",UUID="GPU-a",modelName="NVIDIA H100"} 0.25 1714564800000\nDCGM_FI_PROF_DRAM_ACTIVE{gpu="1",UUID="GPU-a"} 0.5 1714564800000\nDCGM_FI_PROF_PCIE_TX_BYTES{gpu="1",UUID="GPU-a"} 4791810 1714564800000\nDCGM_FI_DEV_PCIE_RX_THROUGHPUT{gpu="1",UUID="GPU-a"} 10 1714564800000\nDCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-a"} 2048 1714564800000\nDCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-a"} 91 1714564801000\nDCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-a"} 0 1714564801000'
    path = tmp_path / "scrape.txt"
    path.write_text(text + "\n")
    df = read_metrics_log(path)
    assert df["t_ns"].to_list() == [1714564800000 * 10**6, 1714564801000 * 10**6]
    a, b = df.rows(named=True)
    assert a["gpm_sm_util_pct"] == 25.0 and a["gpm_dram_bw_util_pct"] == 50.0
    assert a["gpm_pcie_tx_bytes_per_s"] == 4791810.0
    assert a["pcie_rx_bytes_per_s"] == 10240.0  # KB/s -> bytes/s
    assert a["mem_used_bytes"] == 2048 * MIB
    assert b["gpu_util_pct"] == 91.0 and b["gpu_index"] == 1


def test_scrape_time_parameter(tmp_path: Path) -> None:
    path = tmp_path / "metrics"
    path.write_text('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 42\n')
    df = read_metrics_log(path, scrape_time_ns=123)
    assert df.select("t_ns", "gpu_util_pct").rows() == [(123, 42.0)]


NVSMI = """timestamp, name, pci.bus_id, utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB], power.draw [W], clocks.sm [MHz], temperature.gpu, clocks_throttle_reasons.active
2024/05/01 12:00:00.123, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 87 %, 45 %, 1024 MiB, 81920 MiB, 250.50 W, 1410 MHz, 61, 0x0000000000000004
2024/05/01 12:00:00.123, NVIDIA A100-SXM4-80GB, 00000000:0F:00.0, [N/A], [Not Supported], 2048 MiB, 81920 MiB, [N/A], 1410 MHz, 55, 0x0000000000000000
2024/05/01 12:00:01.125, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 90 %, 40 %, 1030 MiB, 81920 MiB, 251.00 W, 1395 MHz, 62, 0x0000000000000000
"""


def test_nvidia_smi_with_units(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(NVSMI)
    assert metrics_log_kind(path.read_bytes()) == "nvidia-smi"
    df = read_metrics_log(path)
    assert df.schema == pl.Schema(GPU_SAMPLES)
    t0 = 1714564800123000000  # 2024-05-01 12:00:00.123 read as UTC
    assert df["t_ns"].to_list() == [t0, t0, t0 + 1_002_000_000]
    assert df["gpu_index"].to_list() == [0, 1, 0]  # by first appearance of the bus id
    assert df["gpu_util_pct"].to_list() == [87.0, None, 90.0]
    assert df["mem_util_pct"].to_list() == [45.0, None, 40.0]
    assert df["mem_used_bytes"].to_list() == [1024 * MIB, 2048 * MIB, 1030 * MIB]
    assert df["power_w"].to_list() == [250.5, None, 251.0]
    assert df["sm_clock_mhz"].to_list() == [1410, 1410, 1395]
    assert df["temperature_c"].to_list() == [61.0, 55.0, 62.0]
    assert df["clocks_event_reasons"].to_list() == [4, 0, 0]
    assert df["source"].unique().to_list() == ["nvidia-smi"]


def test_nvidia_smi_nounits_noheader_and_timezone(tmp_path: Path) -> None:
    nounits = tmp_path / "nounits.csv"
    nounits.write_text(
        "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"
        "2024/05/01 12:00:00.000, 3, 12, 100, [N/A]\n"
    )
    df = read_metrics_log(nounits, timezone="Europe/Berlin")
    assert df.select("t_ns", "gpu_index", "gpu_util_pct", "mem_used_bytes", "power_w").rows() == [
        (1714557600000000000, 3, 12.0, 100 * MIB, None)  # 12:00 CEST = 10:00 UTC
    ]
    noheader = tmp_path / "noheader.csv"
    noheader.write_text("2024/05/01 12:00:00.000, 12, 100\n2024/05/01 12:00:00.500, 13, 101\n")
    assert looks_like_metrics_log(noheader.read_bytes())
    with pytest.raises(InputError, match="without a header"):
        read_metrics_log(noheader)
    df = read_metrics_log(noheader, fields=["timestamp", "utilization.gpu", "memory.used"])
    assert df["gpu_util_pct"].to_list() == [12.0, 13.0]
    assert df["mem_used_bytes"].to_list() == [100 * MIB, 101 * MIB]  # nvidia-smi default MiB
    assert df["gpu_index"].to_list() == [0, 0]


DMON = """# Entity  GPUTL  MCUTL  DRAMA  SMACT  SMOCC  TENSO  PCITX      PCIRX
ID
    GPU 2          79          43  0.382  0.652  0.206  0.267             273834455            2258816847
    GPU 3          N/A          43  0.100  0.200  0.300  0.400             1            2
    GPU-I 1        10          10  0.1  0.1  0.1  0.1  1  1
    GPU 2          80          44  0.500  0.652  0.206  0.267             273834455            2258816847
"""


def test_dcgmi_dmon(tmp_path: Path) -> None:
    path = tmp_path / "dmon.txt"
    path.write_text(DMON)
    assert metrics_log_kind(path.read_bytes()) == "dcgmi-dmon"
    df = read_metrics_log(path, start_ns=10**18, interval_ms=1000)
    assert df["t_ns"].to_list() == [10**18, 10**18, 10**18 + 10**9]
    assert df["gpu_index"].to_list() == [2, 3, 2]
    assert df["gpu_util_pct"].to_list() == [79.0, None, 80.0]
    assert df["gpm_dram_bw_util_pct"].to_list() == pytest.approx([38.2, 10.0, 50.0])
    assert df["gpm_sm_util_pct"].to_list() == pytest.approx([65.2, 20.0, 65.2])
    assert df["gpm_tensor_util_pct"].to_list() == pytest.approx([26.7, 40.0, 26.7])
    assert df["gpm_pcie_rx_bytes_per_s"].to_list() == [2258816847.0, 2.0, 2258816847.0]
    untimed = read_metrics_log(path)
    assert untimed.height == 3 and untimed["t_ns"].null_count() == 3


def test_bad_inputs(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n1,2,3\n")
    assert not looks_like_metrics_log(other.read_bytes())
    with pytest.raises(InputError) as err:
        read_metrics_log(other)
    assert "not a supported GPU metrics log" in str(err.value) and "\n" not in str(err.value)
    ncu = tmp_path / "ncu.csv"
    ncu.write_text('"ID","Process ID","Kernel Name","Metric Name"\n')
    assert not looks_like_metrics_log(ncu.read_bytes())
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        read_metrics_log(empty)
    assert other.read_text() == "a,b,c\n1,2,3\n"


def test_a_real_h100_nvidia_smi_log() -> None:
    # samples/record_gpu.sh: nvidia-smi --query-gpu=... --format=csv -lms 100 during its runs
    df = read_metrics_log(SAMPLES / "exports" / "h100" / "nvidia-smi-query-gpu.csv")
    assert df.height == 1433 and set(df["source"]) == {"nvidia-smi"}
    assert df["mem_total_bytes"][0] == 81559 * 2**20  # "81559 MiB"
    assert (df["gpu_util_pct"].max(), df["power_w"].max()) == (100.0, 337.19)
    assert df["t_ns"].is_sorted() and df["t_ns"].max() - df["t_ns"].min() == 144_744_000_000
