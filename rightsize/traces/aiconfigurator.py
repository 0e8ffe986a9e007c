"""Reader of NVIDIA AIConfigurator's measured per-operator tables (its ``systems/`` folder).

Input: a folder laid out as ``aiconfigurator_core/systems`` is (the shared copy
``../shared/serving/aiconfigurator``, a ``--tables DIR``, or the installed
``aiconfigurator-core`` package): ``data/<system>/gemm/vllm/<ver>/gemm_perf.parquet``,
``attention/vllm/<ver>/{context,generation}_attention_perf.parquet``,
``comm/nccl/<ver>/nccl_perf.parquet`` and ``comm/vllm/<ver>/custom_allreduce_perf.parquet``
(latency in ms). Output: one :class:`SystemTables` per system with numpy arrays, latencies
converted once to µs: a dense log-latency grid per GEMM dtype over its ``m x n x k`` axes
(NaN where a shape was not measured), attention rows, and all-reduce curves per rank count.
The newest version folder of each table is read; only the columns used (polars lazy scans).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rightsize.errors import InputError

# AIConfigurator system name -> the catalog GPU it measured (the first name the catalog has).
SYSTEM_GPUS: dict[str, tuple[str, ...]] = {
    "a100_sxm": ("A100 80GB SXM",), "h100_sxm": ("H100 SXM",), "h200_sxm": ("H200 SXM",),
    "l40s": ("L40S",), "b200_sxm": ("B200",),
    "rtx_pro_6000_server": ("RTX PRO 6000 Server", "RTX PRO 6000 Blackwell Server",
                            "RTX PRO 6000"),
}
GEMM_DTYPES = ("bfloat16", "fp8")


@dataclass(frozen=True, slots=True)
class GemmGrid:
    """log(latency µs) over the measured ``m x n x k`` axes (ascending); NaN: not measured."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    log_us: np.ndarray


@dataclass(frozen=True, slots=True)
class AttentionRows:
    """One row per measurement; ``length`` is the prompt (context) or the step (decode)."""

    batch: np.ndarray
    length: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray
    window: np.ndarray
    fp8_kv: np.ndarray  # bool
    us: np.ndarray
    kernels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SystemTables:
    system: str
    device: str  # the device name the tables recorded
    versions: str  # "vLLM 0.24.0, NCCL 2.29.2"
    gemm: Mapping[str, GemmGrid]
    context: AttentionRows | None
    generation: AttentionRows | None
    # ranks -> (bytes ascending, µs): the fastest of NCCL and vLLM's custom all-reduce
    allreduce: Mapping[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def _newest(folder: Path, table: str) -> Path | None:
    if not folder.is_dir():
        return None
    found = [d / table for d in folder.iterdir() if (d / table).is_file()]
    return max(found, key=lambda p: _version_key(p.parent.name)) if found else None


def _scan(path: Path, columns: list[str]):  # type: ignore[no-untyped-def]
    import polars as pl

    try:
        lf = pl.scan_parquet(path)
        have = set(lf.collect_schema().names())
        return lf.select([c for c in columns if c in have]).collect()
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(path, f"cannot read the AIConfigurator table ({exc})") from None


def _gemm(path: Path) -> tuple[dict[str, GemmGrid], str]:
    import polars as pl

    df = _scan(path, ["device", "gemm_dtype", "m", "n", "k", "latency"])
    device = str(df["device"][0]) if "device" in df.columns and df.height else ""
    out = {}
    for dtype in GEMM_DTYPES:
        sub = (df.filter(pl.col("gemm_dtype") == dtype)
               .group_by("m", "n", "k").agg(pl.col("latency").min()))
        if not sub.height:
            continue
        axes = [np.unique(sub[c].to_numpy()) for c in ("m", "n", "k")]
        grid = np.full([len(a) for a in axes], np.nan)
        idx = [np.searchsorted(a, sub[c].to_numpy()) for a, c in zip(axes, "mnk", strict=True)]
        grid[idx[0], idx[1], idx[2]] = np.log(sub["latency"].to_numpy() * 1e3)
        out[dtype] = GemmGrid(axes[0].astype(float), axes[1].astype(float),
                              axes[2].astype(float), grid)
    return out, device


def _attention(path: Path | None, length: str) -> AttentionRows | None:
    if path is None:
        return None
    cols = ["batch_size", length, "num_heads", "num_key_value_heads", "head_dim",
            "window_size", "kv_cache_dtype", "kernel_source", "latency"]
    df = _scan(path, cols)
    if "window_size" not in df.columns:
        import polars as pl
        df = df.with_columns(pl.lit(0).alias("window_size"))
    return AttentionRows(df["batch_size"].to_numpy().astype(float),
                         df[length].to_numpy().astype(float),
                         df["num_heads"].to_numpy().astype(float),
                         df["num_key_value_heads"].to_numpy().astype(float),
                         df["head_dim"].to_numpy().astype(float),
                         df["window_size"].to_numpy().astype(float),
                         (df["kv_cache_dtype"] == "fp8").to_numpy(),
                         df["latency"].to_numpy() * 1e3,
                         tuple(sorted(set(df["kernel_source"].to_list()))))


def _allreduce(nccl: Path | None, custom: Path | None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    import polars as pl

    frames = []
    if nccl is not None:
        df = _scan(nccl, ["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"])
        # message_size counts 16-bit elements, as AIConfigurator queries it (hidden x tokens):
        # x 2 bytes gives H100 8-GPU all-reduce a bus bandwidth of 445 GB/s at 512 MiB,
        # nccl-tests' figure; as bytes it would be half that
        frames.append(df.filter((pl.col("op_name") == "all_reduce")
                                & (pl.col("nccl_dtype") == "half"))
                      .select("num_gpus", (pl.col("message_size") * 2).alias("bytes"),
                              "latency"))
    if custom is not None:
        df = _scan(custom, ["num_gpus", "message_size", "latency", "backend"])
        if "backend" in df.columns:
            df = df.filter(pl.col("backend") == "vllm_graph")
        frames.append(df.select("num_gpus", (pl.col("message_size") * 2).alias("bytes"),
                                "latency"))
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if not frames:
        return out
    both = pl.concat([f.cast({"bytes": pl.Int64, "num_gpus": pl.Int64}) for f in frames])
    best = both.group_by("num_gpus", "bytes").agg(pl.col("latency").min()).sort("bytes")
    for ranks in best["num_gpus"].unique().to_list():
        sub = best.filter(pl.col("num_gpus") == ranks)
        out[int(ranks)] = (sub["bytes"].to_numpy().astype(float),
                           sub["latency"].to_numpy() * 1e3)
    return out


def read_system(root: Path, system: str) -> SystemTables | None:
    """The tables of ``system`` under ``root`` (a ``systems`` folder); None without a GEMM
    table."""
    data = root / "data" / system
    gemm_path = _newest(data / "gemm" / "vllm", "gemm_perf.parquet")
    if gemm_path is None:
        return None
    gemm, device = _gemm(gemm_path)
    att = data / "attention" / "vllm"
    ctx = _newest(att, "context_attention_perf.parquet")
    gen = _newest(att, "generation_attention_perf.parquet")
    nccl = _newest(data / "comm" / "nccl", "nccl_perf.parquet")
    custom = _newest(data / "comm" / "vllm", "custom_allreduce_perf.parquet")
    versions = f"vLLM {gemm_path.parent.name}" + (f", NCCL {nccl.parent.name}" if nccl else "")
    return SystemTables(system, device, versions, gemm, _attention(ctx, "isl"),
                        _attention(gen, "step"), _allreduce(nccl, custom))


def systems_in(root: Path) -> tuple[str, ...]:
    """The systems with data under ``root`` (a ``systems`` folder)."""
    data = root / "data"
    if not data.is_dir():
        raise InputError(root, "not an AIConfigurator systems folder (no data/ inside)")
    return tuple(sorted(d.name for d in data.iterdir() if d.is_dir()))
