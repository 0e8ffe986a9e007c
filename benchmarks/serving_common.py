"""What the serving benchmarks share: the measured systems, their catalog GPUs (the RTX PRO
6000 Server, absent from the catalog, described from AIConfigurator's own system file), and
the table rows as arrays for fitting and checking."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rightsize.analyzers.serving.ops import Attention
from rightsize.catalog import Catalog, CatalogFile, load_catalog
from rightsize.traces.aiconfigurator import SYSTEM_GPUS, SystemTables, read_system

SHARED = Path(os.environ.get("RIGHTSIZE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
ROOT = SHARED / "serving" / "aiconfigurator"
# aiconfigurator-core 0.12.0 systems/rtx_pro_6000_server.yaml (Apache-2.0): mem_bw 1.792 TB/s,
# bfloat16_tc_flops 467.8 T (dense, at 2430 MHz), fp8/int8 935.6 T, 97,887 MiB.
RTX_PRO = {"name": "RTX PRO 6000 Server", "vendor": "NVIDIA", "architecture": "Blackwell (GB202)",
           "memory_gb": "95.59", "memory_bandwidth_gbs": "1792", "fp32_tflops": "117",
           "fp16_bf16_tflops_dense": "467.8", "fp8_tflops_dense": "935.6",
           "int8_tops_dense": "935.6", "sm_count": "188", "host_link": "PCIe Gen5 x16",
           "host_link_gbs_per_direction": "64", "nvlink_gbs_total": "0", "gpus_per_node": "8",
           "form_factor": "PCIe", "source": "aiconfigurator-core 0.12.0 systems/"
           "rtx_pro_6000_server.yaml (AIConfigurator's own hardware description)"}


def catalog() -> Catalog:
    return load_catalog([CatalogFile("benchmarks/serving_common.py", gpus=(RTX_PRO,))])


def systems() -> dict[str, str]:
    """system -> catalog GPU name, for the systems with tables."""
    have = {d.name for d in (ROOT / "data").iterdir()}
    return {s: names[0] for s, names in SYSTEM_GPUS.items() if s in have}


def tables(system: str) -> SystemTables:
    t = read_system(ROOT, system)
    assert t is not None
    return t


def gemm_rows(t: SystemTables, dtype: str) -> tuple[np.ndarray, ...]:
    g = t.gemm[dtype]
    mm, nn, kk = np.meshgrid(g.m, g.n, g.k, indexing="ij")
    ok = ~np.isnan(g.log_us)
    return mm[ok], nn[ok], kk[ok], np.exp(g.log_us[ok])


def attention_rows(t: SystemTables, decode: bool) -> tuple[np.ndarray, ...]:
    """bf16 KV, full attention, the prefill (decode) kernels only: batch, length, heads, kv
    heads, head size, µs."""
    r = t.generation if decode else t.context
    assert r is not None
    ok = (~r.fp8_kv) & (r.window == 0) & (r.batch * r.length >= 1)
    return r.batch[ok], r.length[ok], r.heads[ok], r.kv_heads[ok], r.head_dim[ok], r.us[ok]


def attention_of(heads: float, kv: float, hd: float) -> Attention:
    return Attention(int(heads), int(kv), int(hd), int(hd))
