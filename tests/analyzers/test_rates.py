"""Achievable-rate kernel model: exact times, the projection ratio, floors, fallbacks, the
shipped table, and kernels grouped by shape from classified work."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from rightsize.analyzers.sizing.kernels_projection import kernel_work, project_kernels_ms
from rightsize.analyzers.sizing.rates import (
    GEMM,
    STREAM,
    Rates,
    RatesTable,
    kernel_s,
    load_rates,
    parse_rates,
    project_kernel_s,
    rate_key,
    same_chip,
)
from rightsize.catalog import Gpu, load_catalog

A = Gpu("A", "NVIDIA", "Test", 80, 2000, fp32_tflops=50, fp16_bf16_tflops_dense=1000)
B = Gpu("B", "NVIDIA", "Test", 80, 1000, fp32_tflops=25, fp16_bf16_tflops_dense=250)
RA = Rates("A", "NVIDIA", 2.0, 0.8, {"fp16": 0.6}, {"fp16": 1e9})
RB = Rates("B", "NVIDIA", 4.0, 0.5, {"fp16": 0.8}, {"fp16": 1e9})


def test_kernel_time_is_the_largest_of_floor_flops_and_bytes():
    # GEMM 1e12 FLOPs: 1e12 / (1000e12 x 0.6 x 1e12 / (1e12 + 1e9)) s
    assert kernel_s(A, RA, 1e12, 1e6, "bf16") == pytest.approx(1e12 / (1e15 * 0.6 * 1e12
                                                                       / (1e12 + 1e9)))
    # streaming 1.6e9 bytes at 2000 GB/s x 0.8 = 1 ms; its FLOPs are not timed
    assert kernel_s(A, RA, 1e12, 1.6e9, "bf16", kind=STREAM) == pytest.approx(1e-3)
    assert kernel_s(A, RA, 10, 10, "bf16") == pytest.approx(2e-6)  # the floor
    assert kernel_s(A, RA, 10, 10, "bf16", kernels=3) == pytest.approx(6e-6)


def test_bytes_that_fit_l2_stream_at_the_l2_fraction():
    l4ish = Gpu("C", "NVIDIA", "Test", 24, 300, fp32_tflops=30, l2_mb=48)
    r = Rates("C", "NVIDIA", 2.0, 0.75, {"fp32": 0.5}, {"fp32": 1e9}, l2_fraction=2.0)
    mib = 2**20
    # 48 MiB fits: 48 MiB / (300 GB/s x 2.0); one byte more is DRAM: / (300 GB/s x 0.75)
    assert kernel_s(l4ish, r, 0, 48 * mib, "fp32", kind=STREAM) == pytest.approx(
        48 * mib / 600e9)
    assert kernel_s(l4ish, r, 0, 48 * mib + 1, "fp32", kind=STREAM) == pytest.approx(
        (48 * mib + 1) / 225e9)
    # per kernel: two kernels of 40 MiB each fit
    assert kernel_s(l4ish, r, 0, 80 * mib, "fp32", kernels=2, kind=STREAM) == pytest.approx(
        80 * mib / 600e9)
    assert RA.bandwidth_fraction(A, 1.0) == 0.8  # no l2_fraction: the DRAM fraction


def test_projection_scales_what_the_kernel_achieved():
    got = project_kernel_s(2e-3, (A, RA), (B, RB), "bf16", 0.0, 1.6e9, STREAM)
    assert got == pytest.approx(2e-3 * (1.6e9 / (1000e9 * 0.5)) / (1.6e9 / (2000e9 * 0.8)))
    # unknown size: floor + the rest at the bandwidth ratio; a floor-bound kernel stays so
    assert project_kernel_s(12e-6, (A, RA), (B, RB), "bf16") == pytest.approx(
        4e-6 + 10e-6 * (2000 * 0.8) / (1000 * 0.5))
    assert project_kernel_s(1e-6, (A, RA), (B, RB), "bf16") == pytest.approx(2e-6)
    # unknown-size GEMM: the large-GEMM rate ratio at the typical size
    f = 1e10
    ratio = (1000 * 0.6 * f / (f + 1e9)) / (250 * 0.8 * f / (f + 1e9))
    assert project_kernel_s(102e-6, (A, RA), (B, RB), "bf16", kind=GEMM) == pytest.approx(
        4e-6 + 100e-6 * ratio)


def test_carry_keeps_only_the_fitted_share_of_the_sources_deviation():
    # a GEMM that took 2x the model's time on A: with carry 0.5 the target gets 2 ** 0.5 x its
    # own model time; carry 1 (absent) keeps the plain ratio, carry 0 the target's model alone
    f, b = 1e12, 1e6
    model_a, model_b = kernel_s(A, RA, f, b, "bf16"), kernel_s(B, RB, f, b, "bf16")
    half = replace(RA, carry={GEMM: 0.5})
    assert project_kernel_s(2 * model_a, (A, half), (B, RB), "bf16", f, b, GEMM) == (
        pytest.approx(model_b * 2**0.5))
    assert project_kernel_s(2 * model_a, (A, RA), (B, RB), "bf16", f, b, GEMM) == (
        pytest.approx(2 * model_b))
    none = replace(RA, carry={GEMM: 0.0, STREAM: 1.0})
    assert project_kernel_s(2 * model_a, (A, none), (B, RB), "bf16", f, b, GEMM) == (
        pytest.approx(model_b))
    # onto the GPU it was measured on, a kernel keeps its time whatever the carry
    assert project_kernel_s(2 * model_a, (A, none), (A, none), "bf16", f, b, GEMM) == (
        2 * model_a)
    # between GPUs of one chip (architecture and SM count) the whole deviation carries over
    a1 = Gpu("A1", "NVIDIA", "Chip", 80, 2000, fp16_bf16_tflops_dense=1000, sm_count=100)
    a2 = Gpu("A2", "NVIDIA", "Chip", 40, 1000, fp16_bf16_tflops_dense=1000, sm_count=100)
    other = Gpu("A3", "NVIDIA", "Chip", 40, 1000, fp16_bf16_tflops_dense=1000, sm_count=90)
    assert same_chip(a1, a2) and not same_chip(a1, other) and not same_chip(A, B)
    m1, m2 = kernel_s(a1, RA, f, 1e10, "bf16"), kernel_s(a2, RA, f, 1e10, "bf16")
    assert project_kernel_s(2 * m1, (a1, none), (a2, RA), "bf16", f, 1e10, GEMM) == (
        pytest.approx(2 * m2))
    assert project_kernel_s(2 * m1, (a1, none), (other, RA), "bf16", f, 1e10, GEMM) == (
        pytest.approx(kernel_s(other, RA, f, 1e10, "bf16")))


def test_gemm_shape_is_a_hill_exponent_of_the_efficiency_curve():
    # gemm_max x F^s / (F^s + half^s): at F = half always gemm_max / 2; s < 1 rises more slowly
    slow = replace(RA, gemm_shape={"fp16": 0.5})
    assert slow.gemm_fraction("bf16", 1e9) == pytest.approx(0.3)
    assert slow.gemm_fraction("bf16", 1e11) == pytest.approx(0.6 * 10 / 11)
    assert RA.gemm_fraction("bf16", 1e11) == pytest.approx(0.6 * 100 / 101)


def test_parse_rates_reads_carry_and_shape():
    doc = {"error_pct": 10.0, "procedure": "p", "carry": {"gemm": 0.4, "stream": 0.8},
           "gpus": {"A": {"vendor": "NVIDIA", "floor_us": 2.0, "stream_fraction": 0.8,
                          "gemm_max": {"fp16": 0.6}, "gemm_half_flops": {"fp16": 1e9},
                          "gemm_shape": {"fp16": 0.75}}}}
    r = parse_rates(doc).rates["A"]
    assert r.carry == {"gemm": 0.4, "stream": 0.8} and r.gemm_shape == {"fp16": 0.75}
    # an unfitted GPU takes the table's carry and the median shape
    other = parse_rates(doc).for_gpu(B)
    assert other.carry == r.carry and other.gemm_shape == {"fp16": 0.75}


def test_unfitted_gpu_gets_its_vendors_median():
    table = RatesTable({"A": RA, "B": RB}, 20.0, "test")
    other = table.for_gpu(Gpu("C", "NVIDIA", "Test", 24, 300))
    assert not other.fitted and other.floor_us == 3.0 and other.stream_fraction == 0.65
    assert other.gemm_max == {"fp16": 0.7}
    assert table.for_gpu(A) is RA
    assert rate_key("bf16") == rate_key("fp16") == "fp16" and rate_key("fp32") == "fp32"


# GPUs the timings measured that the catalog lacks (benchmarks/data/fit_gpus.csv): fitted, and
# used through their vendor's median
FIT_ONLY = {"MI100", "MI210", "MI250 (one GCD)"}


def test_shipped_rates_cover_the_measured_gpus():
    table = load_rates()
    catalog = {g.name for g in load_catalog().gpus}
    assert set(table.rates) <= catalog | FIT_ONLY
    assert {"H100 SXM", "MI300X", "A100 80GB SXM", "L4", "T4"} | FIT_ONLY <= set(table.rates)
    for r in table.rates.values():
        assert 0 < r.stream_fraction <= 1 and r.floor_us > 0
        assert all(0 < v <= 1 for v in r.gemm_max.values())
        assert set(r.gemm_shape) == set(r.gemm_max)
        assert r.carry == table.rates["H100 SXM"].carry
        assert all(0 < v <= 1 for v in r.class_fraction.values())
    # the share of a deviation that recurs on another GPU, fitted (fit_rates.fit_carry), per
    # class within a vendor and between vendors (NeuSight's MI-series against its NVIDIA GPUs)
    h100 = table.rates["H100 SXM"]
    assert {GEMM, STREAM, "bmm", "softmax", "norm", "elementwise"} <= set(h100.carry)
    assert {GEMM, STREAM, "bmm", "softmax", "norm", "elementwise"} <= set(h100.carry_cross_vendor)
    assert all(0 <= v <= 1 for v in (*h100.carry.values(), *h100.carry_cross_vendor.values()))
    # fused attention has its own rate on the GPUs that ran it; the MI300X's strided
    # elementwise kernels reach about half its vectorized bandwidth
    assert 0 < table.rates["MI300X"].attention_ratio < table.rates["H100 SXM"].attention_ratio
    assert table.rates["MI300X"].class_fraction["strided"] < \
        table.rates["MI300X"].class_fraction["elementwise"]
    assert 0 < table.error_pct < table.error_pct_cross_vendor < 100
    assert "fit_rates.py" in table.procedure


def test_kernel_work_groups_ops_by_shape_and_classes_the_rest():
    work = pl.DataFrame({
        "name": ["gemm_k", "gemm_k", "splitk_reduce", "ew", "attn_fwd", "nccl"],
        "ts_ns": [0, 100, 150, 200, 300, 400],
        "dur_ns": [40, 40, 10, 6, 30, 500],
        "external_id": [1, 2, 2, None, None, None],
        "op": ["aten::mm", "aten::mm", "aten::mm", None, None, None],
        "flops": [1e9, 1e9, 1e9, None, None, None],
        "bytes": [1e6, 1e6, 1e6, None, None, None],
        "precision": ["bf16"] * 3 + [None] * 3,
        "group": ["gemm", "gemm", "gemm", "elementwise", "attention", "collective"],
        "work": ["compute", "compute", "compute", "memory", "memory", "communication"],
    }, schema_overrides={"external_id": pl.Int64})
    items = kernel_work(work, steps=2)
    got = [(k.name, k.kind, k.flops, k.dur_ns, k.count, k.kernels) for k in items]
    assert got == [
        ("gemm_k", GEMM, 1e9, 25.0, 0.5, 2),  # op 2: gemm + split-K reduce, 50 ns
        ("gemm_k", GEMM, 1e9, 20.0, 0.5, 1),
        ("attention", "attention", None, 15.0, 0.5, 1),  # by name, though classed memory
        ("elementwise", "elementwise", None, 3.0, 0.5, 1),
    ]
    measured, projected = project_kernels_ms(items, (A, RA), (A, RA))
    assert measured == pytest.approx(63e-6) and projected == pytest.approx(63e-6)


def test_unsized_matrix_kernels_take_the_shape_of_the_same_kernel_nearest_in_time():
    """The Qwen traces' GEMMs and attention kernels launched outside the recorded ops: each
    takes the FLOPs, bytes and precision of the one-kernel op of its name nearest its time;
    an elementwise kernel (many shapes under one name) and a name never sized stay unsized."""
    work = pl.DataFrame({
        "name": ["gemm_k", "gemm_k", "gemm_k", "gemm_k", "gemm_k", "ew", "ew", "attn_fwd"],
        "ts_ns": [0, 100, 200, 300, 400, 500, 600, 700],
        "dur_ns": [40, 150, 140, 50, 100, 10, 12, 30],
        "external_id": [1, 2, None, None, None, 3, None, None],
        "op": ["aten::mm", "aten::mm", None, None, None, "aten::add", None, None],
        "flops": [1e9, 4e9, None, None, None, 1e6, None, None],
        "bytes": [1e6, 2e6, None, None, None, 3e6, None, None],
        "precision": ["bf16", "bf16", None, None, None, "fp32", None, None],
        "group": ["gemm"] * 5 + ["elementwise", "elementwise", "attention"],
        "work": ["compute"] * 5 + ["memory", "memory", "memory"],
    }, schema_overrides={"external_id": pl.Int64})
    items = kernel_work(work, steps=1)
    got = sorted((k.name, k.kind, k.flops, k.bytes, k.precision, k.dur_ns, k.count, k.borrowed)
                 for k in items)
    assert got == [
        ("attention", "attention", None, None, "fp32", 30.0, 1.0, False),
        ("elementwise", "elementwise", None, None, "fp32", 12.0, 1.0, False),
        ("ew", "elementwise", 1e6, 3e6, "fp32", 10.0, 1.0, False),
        ("gemm_k", GEMM, 1e9, 1e6, "bf16", 40.0, 1.0, False),
        ("gemm_k", GEMM, 1e9, 1e6, "bf16", 50.0, 1.0, True),  # |ln 50/40| < |ln 50/150|
        ("gemm_k", GEMM, 4e9, 2e6, "bf16", 150.0, 1.0, False),
        ("gemm_k", GEMM, 4e9, 2e6, "bf16", 240.0, 2.0, True),  # 140 and 100 ns: nearer 150
    ]
