"""Nsight Compute CSV reader: real details/roofline files vs a direct CSV read, hand-made pages."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from rightsize.errors import InputError
from rightsize.traces.ncu import (
    NCU_KERNELS,
    combine_ncu,
    looks_like_ncu,
    normalize_kernel_name,
    read_ncu_csv,
)
from tests.conftest import shared_path

# Observed: (normalized name, duration ns, SM %, memory %, DRAM %, achieved occupancy %, grid).
OBSERVED = {
    "llmperfopt-dsocr-kernel_0002-gemv-ncu.details.csv": (
        "kernel<int,int,__nv_bfloat16,__nv_bfloat16,__nv_bfloat16,float,0,1,1,0,6,0>",
        18340,
        22.47,
        54.36,
        54.36,
        15.23,
        1712,
    ),
    "llmperfopt-dsocr-kernel_0010-elementwise-ncu.details.csv": (
        "elementwise_kernel<128,4>",
        94910,
        12.07,
        93.99,
        10.29,
        89.30,
        14400,
    ),
    "llmperfopt-dsocr-kernel_0016-gemm-ncu.details.csv": (
        "Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8>",
        404700,
        32.46,
        25.75,
        8.96,
        16.66,
        304,
    ),
}


def direct_metric(path: Path, metric: str, section: str | None = None) -> tuple[str, str]:
    """(unit, value) of a metric read straight from the CSV with the csv module."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["Metric Name"] == metric and (section is None or row["Section Name"] == section):
            return row["Metric Unit"], row["Metric Value"]
    raise KeyError(metric)


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(OBSERVED))
def test_details_page_matches_csv(name: str) -> None:
    path = shared_path("traces", "ncu", name)
    before = path.read_bytes()
    df = read_ncu_csv(path)
    assert path.read_bytes() == before
    assert df.schema == pl.Schema(NCU_KERNELS)
    assert df.height == 1
    row = df.row(0, named=True)
    norm, dur, sm, mem, dram, occ, grid = OBSERVED[name]
    assert row["kernel_name_normalized"] == norm
    unit, value = direct_metric(path, "Duration")
    assert unit == "us"
    assert row["duration_ns"] == round(float(value) * 1000) == dur
    sol = "GPU Speed Of Light Throughput"
    assert (
        row["sm_throughput_pct"] == float(direct_metric(path, "Compute (SM) Throughput")[1]) == sm
    )
    assert row["memory_throughput_pct"] == float(direct_metric(path, "Memory Throughput", sol)[1])
    assert row["memory_throughput_pct"] == mem
    assert row["dram_throughput_pct"] == dram
    assert row["achieved_occupancy_pct"] == pytest.approx(occ)
    assert row["grid_blocks"] == grid
    assert row["device"] == 0 and row["compute_capability"] == "12.0"
    cycles = direct_metric(path, "Elapsed Cycles")[1]
    assert "," in cycles  # thousands separator in the source
    assert row["elapsed_cycles"] == float(cycles.replace(",", ""))
    assert row["flop_count"] is None  # flop_count_hp.sum is "n/a" (not a valid ncu metric)
    assert row["waves_per_sm"] is None  # Launch Statistics was not collected


@pytest.mark.shared
def test_gemm_units_and_roofline() -> None:
    details = read_ncu_csv(
        shared_path("traces", "ncu", "llmperfopt-dsocr-kernel_0016-gemm-ncu.details.csv")
    )
    roof = read_ncu_csv(
        shared_path(
            "traces",
            "ncu",
            "llmperfopt-dsocr-kernel_0016-gemm-ncu.section_SpeedOfLight_RooflineChart.csv",
        )
    )
    d = details.row(0, named=True)
    assert d["dram_read_bytes"] == pytest.approx(63.77e6)  # "Mbyte"
    assert d["dram_write_bytes"] == pytest.approx(197.38e3)  # "Kbyte"
    assert d["dram_bandwidth_bytes_per_s"] == pytest.approx(158.07e9)  # "Gbyte/s"
    assert d["sm_frequency_hz"] == pytest.approx(2.0e9)  # "Ghz"
    assert d["tensor_ops"] == 45902462976.0
    r = roof.row(0, named=True)
    assert r["roofline_fp32_peak_flop_per_s"] == pytest.approx(43520 * 2.01e9)
    assert r["roofline_dram_peak_bytes_per_s"] == pytest.approx(128 * 13.79e9)
    assert r["roofline_fp32_achieved_flop_per_s"] == pytest.approx(18.39 * 2.01e9)
    both = combine_ncu([details, roof]).row(0, named=True)
    assert both["duration_ns"] == 404700
    assert both["roofline_fp32_peak_flop_per_s"] == pytest.approx(43520 * 2.01e9)


HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
    '"Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type",'
    '"Estimated Speedup"'
)


def _row(launch: int, name: str, section: str, metric: str, unit: str, value: str) -> str:
    return (
        f'"{launch}","77","python","host","{name}","1","7","(128, 2, 1)","(1024, 1, 1)",'
        f'"0","9.0","{section}","{metric}","{unit}","{value}",'
    )


def test_hand_made_details_page(tmp_path: Path) -> None:
    name = "void at::native::foo<float, 4>(int)"
    lines = [
        "==PROF== Connected to process 77 (/usr/bin/python3.11)",
        "==WARNING== Found outstanding GPU clock reset, trying to revert...",
        "some program output, with a comma",
        HEADER,
        _row(0, name, "GPU Speed Of Light Throughput", "Duration", "msecond", "1.25"),
        _row(0, name, "GPU Speed Of Light Throughput", "Elapsed Cycles", "cycle", "1,234,567"),
        _row(0, name, "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "81.5"),
        _row(0, name, "GPU Speed Of Light Throughput", "Memory Throughput", "%", "n/a"),
        _row(0, name, "GPU Speed Of Light Throughput", "SM Frequency", "cycle/nsecond", "1.50"),
        _row(0, name, "Memory Workload Analysis", "Memory Throughput", "Tbyte/s", "1.5"),
        _row(0, name, "Launch Statistics", "Waves Per SM", "", "2.5"),
        _row(0, name, "Launch Statistics", "Registers Per Thread", "register/thread", "64"),
        '"0","77","python","host","' + name + '","1","7","(128, 2, 1)","(1024, 1, 1)","0","9.0",'
        '"SpeedOfLight","","","","SOLBottleneck","OPT","Rule text, with commas","global","12.5"',
        _row(
            0,
            name,
            "Command line profiler metrics",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
            "inst",
            "1,000",
        ),
        _row(
            0,
            name,
            "Command line profiler metrics",
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "inst",
            "500",
        ),
        _row(0, name, "Command line profiler metrics", "dram__bytes.sum", "Kbyte", "5"),
        _row(1, name, "GPU Speed Of Light Throughput", "Duration", "usecond", "2.5")[:-1],
        '"1","77","python","host","' + name + '","1","7"',  # short row: dropped (no metric)
        "==PROF== Disconnected from process 77",
    ]
    path = tmp_path / "ncu.csv"
    path.write_text("\n".join(lines) + "\n")
    assert looks_like_ncu(path.read_bytes()[:4096])
    df = read_ncu_csv(path)
    assert df["launch_id"].to_list() == [0, 1]
    a, b = df.rows(named=True)
    assert a["duration_ns"] == 1_250_000 and b["duration_ns"] == 2500
    assert a["elapsed_cycles"] == 1234567.0
    assert a["sm_throughput_pct"] == 81.5
    assert a["memory_throughput_pct"] is None  # n/a
    assert a["sm_frequency_hz"] == 1.5e9
    assert a["dram_bandwidth_bytes_per_s"] == 1.5e12
    assert a["waves_per_sm"] == 2.5 and a["registers_per_thread"] == 64
    assert a["flop_count"] == 2500.0  # 2 * 1000 FFMA + 500 FADD
    assert a["dram_bytes"] == 5000.0
    assert a["arithmetic_intensity_flop_per_byte"] == 0.5
    assert a["flop_rate_per_s"] == pytest.approx(2500 / 1.25e-3)
    assert a["grid_blocks"] == 1024 and a["block_threads"] == 256
    assert a["kernel_name_normalized"] == "foo<float,4>"
    assert b["flop_count"] is None


def test_hand_made_raw_page(tmp_path: Path) -> None:
    header = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC","device__attribute_multiprocessor_count",'
        '"gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed",'
        '"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",'
        '"dram__throughput.avg.pct_of_peak_sustained_elapsed",'
        '"sm__warps_active.avg.pct_of_peak_sustained_active",'
        '"launch__waves_per_multiprocessor","launch__grid_size","dram__bytes_read.sum"'
    )
    units = '"","","","","","","","","","","","","nsecond","%","%","%","%","","","Mbyte"'
    rows = [
        (
            '"0","9","a.out","h","Kernel2<cutlass_80_x>(Params)","1","7","(256, 1, 1)","(304, 1, 1)",'
            '"0","8.0","108","12,345","10.5","20.25","n/a","50","2.81","304","1.5"'
        ),
        (
            '"1","9","a.out","h","vector_add(const double *, double *)","1","7","(256, 1, 1)",'
            '"(8, 1, 1)","0","8.0","108","1,000","1","2","3"'
        ),  # short row
    ]
    path = tmp_path / "raw.csv"
    path.write_text("==PROF== Connected\n" + "\n".join([header, units, *rows]) + "\n")
    df = read_ncu_csv(path)
    a, b = df.rows(named=True)
    assert a["duration_ns"] == 12345 and b["duration_ns"] == 1000
    assert a["sm_throughput_pct"] == 10.5 and a["memory_throughput_pct"] == 20.25
    assert a["dram_throughput_pct"] is None and b["dram_throughput_pct"] == 3.0
    assert a["achieved_occupancy_pct"] == 50.0 and b["achieved_occupancy_pct"] is None
    assert a["waves_per_sm"] == 2.81 and a["sm_count"] == 108
    assert a["grid_blocks"] == 304 and b["grid_blocks"] == 8
    assert a["dram_read_bytes"] == 1.5e6
    assert a["kernel_name_normalized"] == "Kernel2<cutlass_80_x>"
    assert b["kernel_name_normalized"] == "vector_add"


def test_error_only_output_and_bad_files(tmp_path: Path) -> None:
    err = tmp_path / "raw.csv"
    err.write_text("==ERROR== Option '--section .*SpeedOfLight.*' did not match any section.\n")
    assert looks_like_ncu(err.read_bytes())
    with pytest.raises(InputError) as exc:
        read_ncu_csv(err)
    assert "did not match any section" in str(exc.value) and "\n" not in str(exc.value)
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n1,2,3\n")
    assert not looks_like_ncu(other.read_bytes())
    with pytest.raises(InputError, match="not an Nsight Compute CSV"):
        read_ncu_csv(other)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        read_ncu_csv(empty)
    assert other.read_text() == "a,b,c\n1,2,3\n"


def test_header_only_gives_empty_frame(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text(HEADER + "\n")
    df = read_ncu_csv(path)
    assert df.is_empty() and df.schema == pl.Schema(NCU_KERNELS)


@pytest.mark.parametrize(
    ("trace_name", "ncu_name"),
    [
        (
            (
                "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<c10::Half>, "
                "std::array<char *, (unsigned long)1>>(int, T2, T3)"
            ),
            "void vectorized_elementwise_kernel<4, FillFunctor<Half>, array<char *, 1>>(int, T2, T3)",
        ),
        (
            (
                "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8>"
                "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8::Params)"
            ),
            "void Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8>(Params)",
        ),
        (
            (
                "std::enable_if<!(bool)1, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, "
                "float, (bool)0, (bool)1, (int)6, cublasGemvParamsEx<int, float>>(T13)"
            ),
            (
                "enable_if<!T7, void>::type kernel<int, int, __nv_bfloat16, float, 0, 1, 6, "
                "cublasGemvParamsEx<int, float>>(T13)"
            ),
        ),
        ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN"),
        ("void at::native::(anonymous namespace)::foo<false>(int)", "void foo<false>(int)"),
    ],
)
def test_normalized_names_match(trace_name: str, ncu_name: str) -> None:
    assert normalize_kernel_name(trace_name) == normalize_kernel_name(ncu_name)
    assert normalize_kernel_name(trace_name) != ""
