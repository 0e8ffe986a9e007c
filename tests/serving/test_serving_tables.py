"""AIConfigurator's measured tables (../shared/serving/aiconfigurator) read and interpolated:
on a measured point the timer returns the measurement (unless a larger size measured faster:
the padded envelope); between points it lies between them; between a full-tile size and the next
the shape follows the tile-boundary probe (flat where it costs what the next size does)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from rightsize.analyzers.serving.ops import Attention
from rightsize.analyzers.serving.tables import Tables, padded_envelope
from rightsize.catalog import load_catalog
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def h100():
    root = shared_path("serving", "aiconfigurator")
    timer = Tables(root).timer_for(load_catalog().gpu("H100 SXM"))
    assert timer is not None
    return timer, root / "data" / "h100_sxm"


def _ms(path, **eq):
    df = pl.read_parquet(path)
    for k, v in eq.items():
        df = df.filter(pl.col(k) == v)
    return float(df["latency"].min())


@pytest.mark.shared
def test_gemm_on_and_between_measured_points(h100):
    timer, data = h100
    gemm = data / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    t = _ms(gemm, gemm_dtype="bfloat16", m=4096, n=4096, k=4096)
    assert timer.gemm_us(np.array([4096.0]), 4096, 4096, "bf16")[0] == pytest.approx(t * 1e3)
    lo, hi = (_ms(gemm, gemm_dtype="bfloat16", m=m, n=4096, k=4096) for m in (3072, 4096))
    mid = timer.gemm_us(np.array([3500.0]), 4096, 4096, "bf16")[0]
    assert lo * 1e3 < mid < hi * 1e3
    f8 = _ms(gemm, gemm_dtype="fp8", m=4096, n=4096, k=4096)
    assert timer.gemm_us(np.array([4096.0]), 4096, 4096, "fp8")[0] == pytest.approx(f8 * 1e3)


@pytest.mark.shared
def test_attention_on_measured_points(h100):
    timer, data = h100
    att = data / "attention" / "vllm" / "0.24.0"
    a = Attention(heads=32, kv_heads=8, head_dim=128, v_head_dim=128)
    ctx = _ms(att / "context_attention_perf.parquet", batch_size=8, isl=1024, num_heads=32,
              num_key_value_heads=8, head_dim=128, window_size=0, kv_cache_dtype="bfloat16")
    got = timer.context_attention_us(np.array([8.0]), np.array([1024.0]), np.array([0.0]), a, 2)
    assert got[0] == pytest.approx(ctx * 1e3)
    # decode over 1024 cached tokens is the table's step 1023
    gen = _ms(att / "generation_attention_perf.parquet", batch_size=64, step=1023,
              num_heads=32, num_key_value_heads=8, head_dim=128, window_size=0,
              kv_cache_dtype="bfloat16")
    got = timer.generation_attention_us(np.array([64.0]), np.array([1024.0]), a, 2)
    assert got[0] == pytest.approx(gen * 1e3)


@pytest.mark.shared
def test_allreduce_is_the_faster_of_nccl_and_custom(h100):
    timer, data = h100
    nccl = max((data / "comm" / "nccl").glob("*/nccl_perf.parquet"))
    custom = data / "comm" / "vllm" / "0.24.0" / "custom_allreduce_perf.parquet"
    n = _ms(nccl, op_name="all_reduce", nccl_dtype="half", num_gpus=2, message_size=1048576)
    c = _ms(custom, backend="vllm_graph", num_gpus=2, message_size=1048576)
    # message_size counts 16-bit elements: 1,048,576 of them are 2 MiB
    got = timer.allreduce_us(np.array([2.0 * 1048576]), 2)[0]
    assert got == pytest.approx(min(n, c) * 1e3)


def test_padded_envelope_keeps_probes_and_never_falls_with_rows():
    # H100 fp8 n=5120 k=8192 as measured (µs): 129 rows open vLLM's next kernel (39), the
    # (128, 256] kernel gets faster with rows (37 -> 32), 257 opens the next again (61)
    # at m = 128, 129, 160, 192, 256, 257, 512
    us = np.array([25.0, 39.0, 37.0, 33.0, 32.0, 61.0, 55.0])
    env = padded_envelope(np.log(us))
    # 129-256 rows run as fast as the 256-row kernel (padded): min(39, 37, 33, 32, 61, 55) = 32;
    # the 257-row probe as fast as 512 rows: min(61, 55) = 55, flat from 257 to 512
    assert np.exp(env).tolist() == pytest.approx([25.0, 32.0, 32.0, 32.0, 32.0, 55.0, 55.0])


@pytest.mark.shared
def test_between_full_tile_sizes_the_probe_decides_the_shape(h100):
    timer, data = h100
    gemm = data / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    # fp8 n=5120 k=8192: 257 rows cost more than 512 (the kernel above 256 pads to 512), so
    # every size from 257 to 512 costs the 512-row time: the staircase
    at256, at257, at512 = (_ms(gemm, gemm_dtype="fp8", m=m, n=5120, k=8192) * 1e3
                           for m in (256, 257, 512))
    assert at257 > at512
    t = timer.gemm_us(np.array([256.0, 257.0, 300.0, 384.0, 512.0]), 5120, 8192, "fp8")
    assert t[0] == pytest.approx(at256)
    assert t[1:].tolist() == pytest.approx([at512] * 4)
    # bf16 n=2048 k=10240: 257 rows cost what 256 do (30.12 and 30.11 µs, 512: 45.98), so
    # between them the time rises along the log-log line from the probe to 512 rows
    lo, probe, hi = (_ms(gemm, gemm_dtype="bfloat16", m=m, n=2048, k=10240) * 1e3
                     for m in (256, 257, 512))
    assert probe < hi and probe / lo < 1.01
    t = timer.gemm_us(np.array([256.0, 257.0, 384.0, 512.0]), 2048, 10240, "bf16")
    want = probe * (hi / probe) ** (np.log(384 / 257) / np.log(512 / 257))
    assert t.tolist() == pytest.approx([lo, probe, want, hi])
