"""Precision detection: kernel-name rules, op dtypes, TF32 on tensor cores, the time-weighted
mix, and the shared traces (bf16 BERT on H100, TF32 GEMMs on A100, fp32 V100-era names)."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.analyzers.metrics.precision import (
    kernel_precision,
    name_precision,
    precision_mix,
    with_precision,
)


@pytest.mark.parametrize(("name", "want"), [
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>",
     "bf16"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64", "bf16"),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
    ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn", "fp16"),
    ("ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn", "fp16"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4>", "tf32"),
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16", "tf32"),
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n", "fp8"),
    ("volta_sgemm_128x64_tn", "fp32"),
    ("ampere_sgemm_128x64_tn", "fp32"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_ffma", "fp32"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", None),
    # Tensile (rocBLAS/hipBLASLt) names, from the MI300X Qwen and bert-small traces
    ("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1", "bf16"),
    ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1", "bf16"),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1", "fp16"),
    ("Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB1", None),
])
def test_kernel_names(name, want):
    assert name_precision(name) == want


def test_fp32_op_on_tensor_cores_is_tf32_from_ampere_on():
    assert name_precision("void xmma_gemm_tn_kernel") is None
    assert kernel_precision("void xmma_gemm_tn_kernel", "fp32", "Ampere (GA100)") == "tf32"
    assert kernel_precision("void xmma_gemm_tn_kernel", "fp32", "Volta (GV100)") == "fp32"
    assert kernel_precision("void at::native::elementwise_kernel", "fp32", "Hopper") == "fp32"
    assert kernel_precision("ampere_sgemm_128x64_tn", "bf16") == "fp32"  # the name wins


def test_mix_is_time_weighted_and_leaves_collectives_out():
    work = pl.DataFrame({
        "name": ["ampere_sgemm_128x64_tn", "sm80_xmma_gemm_bf16bf16_tn", "elementwise_kernel",
                 "ncclKernel_AllReduce_RING_LL_Sum_int8_t", "mystery"],
        "dur_ns": [100, 300, 50, 1000, 50],
        "group": ["gemm", "gemm", "elementwise", "collective", "other"],
        "work": ["compute", "compute", "memory", "communication", "memory"],
        "precision": [None, None, "bf16", None, None],
    })
    mix = precision_mix(work, "Ampere (GA100)")
    assert mix.workload == "bf16"
    assert mix.time_pct == pytest.approx({"bf16": 100 * 350 / 450, "fp32": 100 * 100 / 450})
    assert mix.unknown_pct == pytest.approx(100 * 50 / 500)
    assert [(g.group, g.precision, g.time_ms) for g in mix.groups] == [
        ("gemm", "bf16", 300e-6), ("gemm", "fp32", 100e-6), ("elementwise", "bf16", 50e-6),
        ("other", None, 50e-6)]
    assert precision_mix(work.clear()).workload is None


def test_with_precision_per_row_keeps_order_and_columns():
    # Keyed per distinct (name, op dtype) through categoricals: the same answer as row by row,
    # nulls matched as keys, rows in their order, only kernel_precision added.
    names = ["sm80_xmma_gemm_f32f32_tn", "mystery", "sm80_xmma_gemm_f32f32_tn", None, "mystery"]
    ops = ["fp32", None, None, "bf16", "fp16"]
    work = pl.DataFrame({"name": names, "dur_ns": [1, 2, 3, 4, 5], "precision": ops})
    out = with_precision(work, "Ampere (GA100)")
    assert out.columns == ["name", "dur_ns", "precision", "kernel_precision"]
    assert out["dur_ns"].to_list() == [1, 2, 3, 4, 5]
    assert out["kernel_precision"].to_list() == ["tf32", None, None, "bf16", "fp16"]
    assert with_precision(work.drop("precision"))["kernel_precision"].to_list() == [None] * 5


@pytest.mark.parametrize(("trace", "workload", "share"), [
    ("tracelens-h100-gaunernst_bert-small-uncased__1016001.json.gz", "bf16", {"bf16": 100.0}),
    ("hta-nccl_parser_config-nccl_data.json.gz", "tf32", None),  # A100: cutlass s1688gemm
    ("hta-df_index_resolver-df_index_resolver.json.gz", "fp32", {"fp32": 100.0}),  # volta_sgemm
])
def test_shared_traces(shared, trace, workload, share):
    from rightsize.analyzers.analysis import Context, analyze_trace
    from rightsize.catalog import load_catalog
    from rightsize.traces.loader import ReadOptions, load

    path = shared / "traces" / "kineto" / trace
    rank = analyze_trace(load([path], None, ReadOptions()).traces[0],
                         Context(catalog=load_catalog()))
    gpu = rank.device_match.gpu
    mix = precision_mix(rank.work, gpu.architecture)
    assert mix.workload == workload
    if share is not None:
        assert mix.time_pct == share
    gemm = next(g for g in mix.groups if g.group == "gemm")
    assert gemm.precision == workload
