"""The declared sample schemas: units in every name, and reading parts as one frame."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from rightsize.errors import RunDirError
from rightsize.traces.samples import (
    GPU_SAMPLES,
    HOST_SAMPLES,
    SAMPLE_FILES,
    conform_samples,
    read_samples,
)

UNIT = re.compile(r"_(ns|bytes|bytes_per_s|pct|w|c|mhz)$")
UNITLESS = {  # identifiers, counts and bitmasks
    "source", "gpu_index", "gpu_uuid", "pcie_link_gen", "pcie_link_width", "pcie_link_gen_max",
    "pcie_link_width_max", "clocks_event_reasons", "pid", "cpu_count", "job_processes",
    "dataloader_workers",
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(SAMPLE_FILES), ids=lambda k: f"{k}.parquet")
def test_every_measured_column_names_its_unit(kind: str) -> None:
    for column in SAMPLE_FILES[kind]:
        assert column in UNITLESS or UNIT.search(column), f"{kind}.{column} has no unit"


def test_every_gpu_column_names_its_nvidia_smi_or_nvml_source() -> None:
    source = Path(__file__).resolve().parents[2] / "rightsize" / "traces" / "samples.py"
    text = source.read_text()
    block = text[text.index("GPU_SAMPLES: dict") : text.index("GPU_PROCESS_SAMPLES: dict")]
    comments = block.count("#")
    assert comments >= len(GPU_SAMPLES) - 3  # a few columns share one comment ("as above")
    assert "nvmlDeviceGetUtilizationRates" in block and "utilization.gpu" in block


def test_parts_are_read_as_one_frame_in_time_order(tmp_path: Path) -> None:
    (tmp_path / "samples").mkdir()
    later = pl.DataFrame({"t_ns": [30, 40], "gpu_util_pct": [1.0, 2.0], "gpu_index": [0, 0]})
    earlier = pl.DataFrame({"t_ns": [10, 20], "power_w": [100.0, 110.0]})
    later.write_parquet(tmp_path / "samples" / "gpu.part0002.parquet")
    earlier.write_parquet(tmp_path / "samples" / "gpu.part0001.parquet")
    gpu, host = read_samples(tmp_path)
    assert gpu.schema == GPU_SAMPLES and host.schema == HOST_SAMPLES and host.height == 0
    assert gpu["t_ns"].to_list() == [10, 20, 30, 40]
    assert gpu["power_w"].to_list() == [100.0, 110.0, None, None]
    assert gpu["gpu_util_pct"].to_list() == [None, None, 1.0, 2.0]


def test_a_whole_file_wins_over_leftover_parts(tmp_path: Path) -> None:
    (tmp_path / "samples").mkdir()
    conform_samples("host", pl.DataFrame({"t_ns": [1]})).write_parquet(
        tmp_path / "samples" / "host.parquet"
    )
    pl.DataFrame({"t_ns": [2]}).write_parquet(tmp_path / "samples" / "host.part0001.parquet")
    assert read_samples(tmp_path)[1]["t_ns"].to_list() == [1]


def test_an_unreadable_file_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "gpu.parquet").write_bytes(b"not parquet")
    with pytest.raises(RunDirError, match=r"gpu\.parquet: unreadable samples file"):
        read_samples(tmp_path)
