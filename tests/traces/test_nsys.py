"""Nsight Systems SQLite reader: real exports vs direct SQL, hand-made exports, bad input."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from rightsize.errors import InputError
from rightsize.traces.nsys import (
    looks_like_nsys,
    nsys_kernel_short_names,
    read_nsys,
    read_nsys_gpu_metrics,
)
from rightsize.traces.schema import FRAMES
from tests.conftest import shared_path
from tests.nsys_handmade import make_export

NSYS_FILES = [
    "fuser-ee4fcf3-h200-report1.sqlite",
    "fuser-8fa9ec2-h100-report1.sqlite",
    "extrap-concurrent_example-concurrent.s1-profile1.sqlite",
    "extrap-sampled_callchains-ex-gpu.s10.sqlite",
]
# Observed values: (kernels, total kernel ns, {direction: memcpy bytes}, device name, SMs).
OBSERVED = {
    "fuser-ee4fcf3-h200-report1.sqlite": (
        18,
        10167602,
        {"HtoD": 394002434, "DtoD": 62914560},
        "NVIDIA H200",
        132,
    ),
    "fuser-8fa9ec2-h100-report1.sqlite": (19, 402301, {"DtoH": 1}, "NVIDIA H100 80GB HBM3", 132),
    "extrap-concurrent_example-concurrent.s1-profile1.sqlite": (
        12,
        48000028,
        {"HtoD": 44160000, "DtoH": 44160000},
        "GeForce GTX 1060 with Max-Q Design",
        10,
    ),
    "extrap-sampled_callchains-ex-gpu.s10.sqlite": (6, 34113, {}, "A100-PCIE-40GB", 108),
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def query(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def has_table(path: Path, table: str) -> bool:
    return bool(query(path, f"SELECT 1 FROM sqlite_master WHERE name = '{table}'"))


@pytest.mark.shared
@pytest.mark.parametrize("name", NSYS_FILES)
def test_real_export_matches_direct_sql(name: str) -> None:
    path = shared_path("traces", "nsys", name)
    before = sha256(path)
    trace = read_nsys(path)
    assert sha256(path) == before
    for frame, cols in FRAMES.items():
        assert trace.frame(frame).schema == pl.Schema(cols), frame
    kernels, kernel_ns, copies, device, sms = OBSERVED[name]
    ((count, total),) = query(
        path, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    assert trace.kernels.height == count == kernels
    assert trace.kernels["dur_ns"].sum() == total == kernel_ns
    assert trace.kernels["name"].null_count() == 0
    memcpy = trace.transfers.filter(pl.col("kind") == "memcpy")
    got = dict(memcpy.group_by("direction").agg(pl.col("bytes").sum()).iter_rows())
    assert got == copies
    if has_table(path, "CUPTI_ACTIVITY_KIND_MEMCPY"):
        direct = query(
            path, "SELECT copyKind, sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"
        )
        names = {1: "HtoD", 2: "DtoH", 8: "DtoD"}
        assert got == {names[k]: b for k, b in direct}
    used = trace.devices.filter(pl.col("device").is_in(trace.kernels["device"].unique().implode()))
    assert used["name"].to_list() == [device]
    assert used["sm_count"].to_list() == [sms]
    if has_table(path, "TARGET_INFO_CUDA_GPU"):
        ((direct_sms,),) = query(
            path, "SELECT DISTINCT numMultiprocessors FROM TARGET_INFO_CUDA_GPU"
        )
    else:
        ((direct_sms,),) = query(
            path, f"SELECT smCount FROM TARGET_INFO_GPU WHERE name = '{device}' LIMIT 1"
        )
    assert direct_sms == sms
    # Kineto's definitions: blocks per SM = grid / SMs, warps per SM = that * threads / 32.
    k = trace.kernels.row(0, named=True)
    assert k["blocks_per_sm"] == pytest.approx(k["grid_blocks"] / sms)
    assert k["warps_per_sm"] == pytest.approx(k["blocks_per_sm"] * k["block_threads"] / 32)
    assert trace.kernels["occupancy_pct"].null_count() == trace.kernels.height
    assert trace.meta.format == "nsys"


@pytest.mark.shared
def test_h200_pageable_htod_is_flagged() -> None:
    trace = read_nsys(shared_path("traces", "nsys", "fuser-ee4fcf3-h200-report1.sqlite"))
    htod = trace.transfers.filter(pl.col("direction") == "HtoD")
    assert htod["src_memory"].to_list() == ["pageable", "pageable"]
    assert htod["dst_memory"].to_list() == ["device", "device"]
    big = htod.filter(pl.col("bytes") == 394002432).row(0, named=True)
    assert big["bandwidth_gbps"] == pytest.approx(394002432 / 21355637)  # ~18.45 GB/s
    assert big["name"] == "Memcpy HtoD (Pageable -> Device)"
    assert trace.meta.profiler["clock"] == "utc_epoch_ns"
    assert trace.meta.base_time_ns == 1741793819042497997
    assert trace.kernels["ts_ns"].min() == 1741793819042497997 + 5844617581
    assert trace.meta.profiler["schema_version"] == "3.17.1"
    assert trace.runtime.filter(pl.col("api") == "runtime").height == 91
    assert trace.runtime.filter(pl.col("api") == "driver").height == 899
    assert "cudaLaunchKernel" in trace.runtime["name"].to_list()  # _v7000 suffix stripped
    assert trace.cpu_ops.height == 13513
    assert set(trace.cpu_ops["cat"].to_list()) == {"user_annotation"}
    assert trace.steps.is_empty()  # its NVTX ranges are nvFuser internals, not steps
    assert trace.windows["dur_ns"].to_list() == [11220081301 - 566135859]
    assert trace.windows["ts_ns"].to_list() == [1741793819042497997 + 566135859]


@pytest.mark.shared
def test_old_exports_edge_cases() -> None:
    windows = read_nsys(
        shared_path("traces", "nsys", "extrap-concurrent_example-concurrent.s1-profile1.sqlite")
    )
    assert windows.meta.profiler["product_version"] == "2022.1.1.61"
    assert windows.meta.profiler["non_cuda_adapters"] == [
        "Intel(R) HD Graphics 630",
        "Microsoft Basic Render Driver",
    ]
    pinned = windows.transfers.filter(pl.col("direction") == "HtoD")["src_memory"].unique()
    assert pinned.to_list() == ["pinned"]
    old = read_nsys(shared_path("traces", "nsys", "extrap-sampled_callchains-ex-gpu.s10.sqlite"))
    assert old.meta.profiler["clock"] == "session_relative_ns"
    assert old.devices.height == 4
    assert old.runtime.height == 18  # the duplicate class-67 copies of each call are dropped
    assert old.kernels["ts_ns"].min() == 352103962


@pytest.mark.shared
def test_short_names() -> None:
    path = shared_path("traces", "nsys", "extrap-sampled_callchains-ex-gpu.s10.sqlite")
    names = nsys_kernel_short_names(path)
    row = names.filter(pl.col("short_name") == "vector_add").row(0, named=True)
    assert row["name"] == "vector_add(double const*, double const*, unsigned long, double*)"


# ---------------------------------------------------------------- hand-made exports


@pytest.mark.parametrize(
    ("new_gpu_table", "enums"), [(True, True), (True, False), (False, False), (False, True)]
)
def test_hand_made_export_exact(tmp_path: Path, new_gpu_table: bool, enums: bool) -> None:
    path = make_export(tmp_path / "r.sqlite", new_gpu_table=new_gpu_table, enums=enums)
    before = sha256(path)
    trace = read_nsys(path)
    assert sha256(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]  # no -journal/-wal left
    base = 1_000_000_000_000
    k = trace.kernels
    assert k["ts_ns"].to_list() == [base + 100, base + 300]
    assert k["dur_ns"].to_list() == [50, 30]
    assert (
        k["name"].to_list()
        == ["void at::native::foo_kernel<(int)4, at::native::F<float>>(int)"] * 2
    )
    assert k["grid_blocks"].to_list() == [10, 20]
    assert k["block_threads"].to_list() == [128, 256]
    assert k["blocks_per_sm"].to_list() == [1.0, 2.0]
    assert k["warps_per_sm"].to_list() == [4.0, 16.0]
    assert k["shared_memory_bytes"].to_list() == [3072, 0]
    assert k["registers_per_thread"].to_list() == [32, 40]
    t = trace.transfers
    assert t["kind"].to_list() == ["memcpy", "memcpy", "memset"]
    assert t["direction"].to_list() == ["HtoD", "DtoH", None]
    assert t["src_memory"].to_list() == ["pageable", "device", None]
    assert t["dst_memory"].to_list() == ["device", "pinned", "device"]
    assert t["bytes"].to_list() == [4000, 100, 64]
    assert t["bandwidth_gbps"].to_list() == [100.0, 10.0, 16.0]
    assert t["name"].to_list() == [
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy DtoH (Device -> Pinned)",
        "Memset (Device)",
    ]
    r = trace.runtime
    assert r["name"].to_list() == ["cudaMemcpyAsync", "cudaLaunchKernel", "cuLaunchKernelEx"]
    assert r["api"].to_list() == ["runtime", "runtime", "driver"]
    assert r["correlation"].to_list() == [13, 11, 12]
    assert set(r["pid"].to_list()) == {"4242"} and set(r["tid"].to_list()) == {"4243"}
    assert trace.cpu_ops["name"].to_list() == [
        "ProfilerStep#7",
        "train_step",
        "ProfilerStep#8",
        "train_step",
    ]
    assert trace.steps["step"].to_list() == [7, 8]  # default rule: ProfilerStep#N
    assert trace.steps["dur_ns"].to_list() == [250, 250]
    d = trace.devices
    assert d.rows() == [(0, "Test GPU", 1000, 10, 8, 6, 1536, 32)]
    assert trace.meta.profiler["schema_version"] == "3.1.2"
    assert trace.meta.profiler["product_version"] == "2023.1 \ufffd"  # not UTF-8: replaced


def test_step_range_parameter(tmp_path: Path) -> None:
    path = make_export(tmp_path / "r.sqlite")
    steps = read_nsys(path, step_range="train_step").steps
    assert steps["step"].to_list() == [0, 1]
    assert steps["ts_ns"].to_list() == [1_000_000_000_010, 1_000_000_000_300]
    with pytest.raises(InputError) as err:
        read_nsys(path, step_range="epoch")
    assert "no NVTX range named 'epoch'" in str(err.value)
    assert "\n" not in str(err.value)


def test_gpu_metrics_table(tmp_path: Path) -> None:
    path = make_export(tmp_path / "r.sqlite")
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER, sourceId INTEGER, "
        "typeName TEXT, metricId INTEGER, metricName TEXT)"
    )
    conn.execute(
        "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (1, 0, 'GH100', 10, "
        "'SMs Active [Throughput %]'), (1, 0, 'GH100', 11, 'DRAM Read Bandwidth "
        "[Throughput %]'), (1, 0, 'GH100', 12, 'DRAM Write Bandwidth [Throughput %]')"
    )
    conn.execute(
        "CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER, "
        "metricId INTEGER, value INTEGER)"
    )
    conn.execute(
        "INSERT INTO GPU_METRICS VALUES (100, 1, 10, 50), (100, 1, 11, 20), "
        "(100, 1, 12, 5), (200, 1, 10, 70)"
    )
    conn.commit()
    conn.close()
    samples = read_nsys_gpu_metrics(path)
    assert samples["t_ns"].to_list() == [1_000_000_000_100, 1_000_000_000_200]
    assert samples["gpm_sm_util_pct"].to_list() == [50.0, 70.0]
    assert samples["gpm_dram_bw_util_pct"].to_list() == [25.0, None]
    assert samples["source"].unique().to_list() == ["nsys"]
    assert read_nsys(path).meta.profiler["has_gpu_metrics"] is True


# ---------------------------------------------------------------- bad input


def _assert_one_line_error(path: Path, fragment: str) -> None:
    before = path.read_bytes()
    with pytest.raises(InputError) as err:
        read_nsys(path)
    message = str(err.value)
    assert "\n" not in message and fragment in message, message
    assert path.read_bytes() == before


def test_not_nsys_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    _assert_one_line_error(path, "not an Nsight Systems export")
    assert not looks_like_nsys(path, path.read_bytes()[:100])


def test_empty_and_text_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    _assert_one_line_error(empty, "empty file")
    text = tmp_path / "x.sqlite"
    text.write_text("timestamp, utilization.gpu [%]\n")
    _assert_one_line_error(text, "not a SQLite database")
    assert not looks_like_nsys(text, text.read_bytes())


def test_truncated_sqlite(tmp_path: Path) -> None:
    whole = make_export(tmp_path / "whole.sqlite")
    data = whole.read_bytes()
    assert looks_like_nsys(whole, data[:100])
    for cut in (50, 4096 + 100, len(data) // 2):
        path = tmp_path / f"cut{cut}.sqlite"
        path.write_bytes(data[:cut])
        _assert_one_line_error(path, "truncated")
        assert not looks_like_nsys(path, data[:100])


def test_corrupt_page_is_input_error(tmp_path: Path) -> None:
    whole = make_export(tmp_path / "whole.sqlite")
    data = bytearray(whole.read_bytes())
    data[4096 : 4096 * 3] = b"\xa5" * (4096 * 2)  # garble pages after the schema page
    path = tmp_path / "bad.sqlite"
    path.write_bytes(bytes(data))
    _assert_one_line_error(path, "")


def test_step_range_with_regex_characters(tmp_path: Path) -> None:
    path = make_export(tmp_path / "r.sqlite")
    steps = read_nsys(path, step_range="ProfilerStep#").steps
    assert steps["step"].to_list() == [7, 8]
    assert read_nsys(path, step_range="ProfilerStep#7").steps["step"].to_list() == [0]


def test_owned_copies_keep_values_and_nulls() -> None:
    from rightsize.traces.nsys_db import owned

    df = pl.DataFrame({"a": [1, None, -(1 << 62)], "b": [7, 8, None]},
                      schema={"a": pl.Int64, "b": pl.Int32})
    out = df.select(*owned("a", "b"))
    assert out.schema == df.schema
    assert out.to_dict(as_series=False) == {"a": [1, None, -(1 << 62)], "b": [7, 8, None]}


def test_constant_columns_become_literals_with_the_same_values() -> None:
    from rightsize.traces.nsys_host import _constant

    df = pl.DataFrame({"pid": ["42"] * 4, "tid": ["1", "2", "1", None], "x": [1, 2, 3, 4]})
    out = _constant(df, "pid", "tid")
    assert out.equals(df)  # pid is one scalar now; tid (two values and a null) is untouched
    assert _constant(df.clear(), "pid").equals(df.clear())


@pytest.mark.parametrize("name", NSYS_FILES)
def test_pid_tid_equal_the_global_id_formula(name: str) -> None:
    """pid/tid (mapped per distinct globalTid, a constant one kept as a literal) against SQL."""
    path = shared_path("traces", "nsys", name)
    runtime = read_nsys(path).runtime
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT CAST((globalTid >> 24) & 16777215 AS TEXT), "
            "CAST(globalTid & 16777215 AS TEXT) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    assert set(runtime.select("pid", "tid").unique().iter_rows()) == set(rows)
