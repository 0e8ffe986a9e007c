"""Per-operator times from AIConfigurator's measured tables, interpolated in log space.

:class:`TableTimer` implements :class:`~.timer.Timer` for a GPU whose tables were read
(``traces/aiconfigurator.py``): GEMMs by trilinear interpolation of log latency over log ``m``,
``n``, ``k`` per dtype (beyond the grid: time grows with the work); prefill attention by
bilinear interpolation over log batch and log prompt length at the table's heads, KV heads and
head size (nearest measured otherwise, scaled by the heads); decode attention over log batch
and log KV length; all-reduces on the fastest of NCCL and vLLM's custom all-reduce per rank
count; elementwise kernels by the per-kernel projection. int8/int4 weights (weight-only
kernels, no table): the bf16 GEMM's time scaled by the weight bytes where it is memory-bound,
never faster than the bf16 table's best throughput; fp8 without an fp8 table the same at 1
byte. :class:`Tables` finds a catalog GPU's tables, reading each system once per process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import numpy as np

from rightsize.analyzers.job import names
from rightsize.analyzers.serving.ops import Attention
from rightsize.analyzers.serving.timer import ProjectionTimer, Timer, collective_line, pairs
from rightsize.catalog import Gpu
from rightsize.traces.aiconfigurator import (
    SYSTEM_GPUS,
    AttentionRows,
    GemmGrid,
    SystemTables,
    read_system,
    systems_in,
)

WEIGHT_ONLY_BYTES = {"int8": 1.0, "int4": 0.5, "fp8": 1.0}


def _fill(grid: np.ndarray, axis_values: list[np.ndarray]) -> np.ndarray:
    """NaN cells filled from the previous measured cell along the first axis, scaled with the
    work (log latency + log ratio), then from the next one."""
    g = grid.copy()
    lm = np.log(axis_values[0])
    for i in range(1, g.shape[0]):
        hole = np.isnan(g[i])
        g[i][hole] = g[i - 1][hole] + (lm[i] - lm[i - 1])
    for i in range(g.shape[0] - 2, -1, -1):
        hole = np.isnan(g[i])
        g[i][hole] = g[i + 1][hole] - (lm[i + 1] - lm[i])
    return np.where(np.isnan(g), np.nanmax(g), g)


def _locate(axis: np.ndarray, x: np.ndarray,
            log_axis: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index of the lower neighbour, weight of the upper one, and log(x / top) above the
    top of the axis (0 inside; below the bottom the bottom's value holds)."""
    la = np.log(axis) if log_axis is None else log_axis
    lx = np.log(np.maximum(np.asarray(x, dtype=float), 1e-9))
    xc = np.minimum(np.maximum(lx, la[0]), la[-1])
    if len(la) == 1:
        return np.zeros(lx.shape, int), np.zeros(lx.shape), lx - xc
    i = np.minimum(np.searchsorted(la, xc, side="right") - 1, len(la) - 2)
    w = (xc - la[i]) / (la[i + 1] - la[i])
    return i, w, np.maximum(lx - xc, 0.0)


def interp2(grid: np.ndarray, a0: np.ndarray, a1: np.ndarray, x0: np.ndarray, x1: np.ndarray,
            slopes: tuple[float, float] = (1.0, 1.0)) -> np.ndarray:
    """exp of the bilinear interpolation of ``grid`` (log values) at log ``x0``, ``x1`` (``a0``,
    ``a1``: the log axes); beyond the top of an axis the value grows as (x / top) ** slope."""
    i, wi, bi = _locate(a0, x0, a0)
    j, wj, bj = _locate(a1, x1, a1)
    di, dj = int(len(a0) > 1), int(len(a1) > 1)
    v = ((1 - wi) * ((1 - wj) * grid[i, j] + wj * grid[i, j + dj])
         + wi * ((1 - wj) * grid[i + di, j] + wj * grid[i + di, j + dj]))
    return np.exp(v + slopes[0] * bi + slopes[1] * bj)


def _monotone(g: np.ndarray) -> np.ndarray:
    """Each cell as the fastest measured at that batch and length or more (a kernel over fewer
    sequences or keys can run padded as the larger one): the small-batch noise of the tables
    (decode at batch 2 measured faster than at 1) no longer makes a step faster with more."""
    for axis in range(g.ndim):
        g = np.flip(np.minimum.accumulate(np.flip(g, axis), axis=axis), axis)
    return g


def padded_envelope(log_us: np.ndarray) -> np.ndarray:
    """Each row of the ``m`` axis (AIConfigurator's: 1-17, every 16 to 256 and every 256 to
    4,352, each with its + 1 probe) as its log time or the fastest measured at more rows.

    Why: a GEMM of ``m`` rows can always run as the kernel measured for ``m' > m`` rows with
    the rows padded (serving engines pad decode batches to captured CUDA-graph sizes anyway),
    so time never falls as rows grow. A probe (``s + 1`` after a full-tile size ``s``) is the
    table's own measurement of the kernel that runs above ``s``, so the shape between ``s``
    and the next full-tile size follows it, cell by cell: where the probe costs as much as
    the next size or more (H100 fp8 n 5120 k 8192: 257 rows 61 µs, 512 rows 55), its
    enveloped cost is the next size's and the time is flat from ``s + 1`` to it (the
    staircase of a kernel that pads to the next tile); where it costs what ``s`` does, the
    time rises from it along the log-log line to the next size (interpolation, as between
    sizes with no probe); between the two, along the measured probe."""
    return np.minimum.accumulate(log_us[::-1], axis=0)[::-1]


class GemmTable:
    """One dtype's GEMM latencies: µs at any ``m``, ``n``, ``k`` (over the padded envelope of
    the measured ``m`` axis, :func:`padded_envelope`)."""

    def __init__(self, g: GemmGrid) -> None:
        m, log_us = np.asarray(g.m, float), padded_envelope(_fill(g.log_us, [g.m, g.n, g.k]))
        self.m, self.n, self.k = m, g.n, g.k
        self.lm, self.ln, self.lk = np.log(m), np.log(g.n), np.log(g.k)
        self.log_us = log_us
        work = np.log(2 * m[:, None, None] * g.n[None, :, None] * g.k[None, None, :])
        self.best_flops_per_us = float(np.exp(np.max(work - self.log_us)))
        self.floor_us = float(np.exp(np.min(self.log_us)))

    def us(self, m: np.ndarray, n: np.ndarray | int, k: int) -> np.ndarray:
        im, wm, bm = _locate(self.m, m, self.lm)
        jn, wn, bn = _locate(self.n, np.broadcast_to(np.asarray(n, float), np.shape(m)), self.ln)
        ka, wka, bka = _locate(self.k, np.asarray([k], float), self.lk)
        kk, wk, bk = int(ka[0]), float(wka[0]), float(bka[0])
        g = self.log_us
        v = np.zeros(np.shape(m))
        for di, fi in ((0, 1 - wm), (1, wm)):
            for dj, fj in ((0, 1 - wn), (1, wn)):
                for dk, fk in ((0, 1 - wk), (1, wk)):
                    v = v + fi * fj * fk * g[np.minimum(im + di, len(self.m) - 1),
                                             np.minimum(jn + dj, len(self.n) - 1),
                                             min(kk + dk, len(self.k) - 1)]
        return np.exp(v + bm + bn + bk)


class AttentionTable:
    """Attention rows of one system, turned into (batch x length) grids per geometry."""

    def __init__(self, rows: AttentionRows, decode: bool) -> None:
        self.rows = rows
        self.decode = decode
        self._grids: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray, np.ndarray, float,
                                                   bool]] = {}

    def _pick(self, a: Attention, fp8: bool) -> tuple[np.ndarray, float, bool]:
        r = self.rows
        ok = np.ones(len(r.us), bool)
        if r.fp8_kv.any() and fp8:
            ok &= r.fp8_kv
        else:
            ok &= ~r.fp8_kv
        hd = r.head_dim[ok]
        best_hd = hd[np.argmin(np.abs(np.log(hd / a.head_dim)))] if len(hd) else a.head_dim
        ok &= r.head_dim == best_hd
        scale = a.head_dim / best_hd
        windowed = bool(a.window) and bool((ok & (r.window == a.window)).any())
        ok &= r.window == (a.window if windowed else 0)
        key_h, key_kv = (a.kv_heads, a.heads) if self.decode else (a.heads, a.kv_heads)
        h1, h2 = (r.kv_heads, r.heads) if self.decode else (r.heads, r.kv_heads)
        d1 = np.abs(np.log(h1 / key_h))
        ok &= d1 == d1[ok].min()
        ok &= np.abs(np.log(h2 / key_kv)) == np.abs(np.log(h2[ok] / key_kv)).min()
        scale *= key_h / float(h1[ok][0])
        return ok, scale, windowed

    def grid(self, a: Attention, fp8: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, float,
                                                     bool]:
        key = (a.heads, a.kv_heads, a.head_dim, a.window, float(fp8))
        got = self._grids.get(key)
        if got is None:
            ok, scale, windowed = self._pick(a, fp8)
            r = self.rows
            b, n, us = r.batch[ok], r.length[ok], r.us[ok]
            ab, an = np.unique(b), np.unique(n)
            g = np.full((len(ab), len(an)), np.nan)
            for x, y, t in zip(np.searchsorted(ab, b), np.searchsorted(an, n), us, strict=True):
                g[x, y] = np.log(t) if np.isnan(g[x, y]) else min(g[x, y], np.log(t))
            got = self._grids[key] = (_monotone(_fill(g, [ab, an])), np.log(ab), np.log(an),
                                      scale, windowed)
        return got


class TableTimer:
    """Times from one system's measured tables (see the module docstring)."""

    def __init__(self, gpu: Gpu, tables: SystemTables) -> None:
        self.gpu = gpu
        self.tables = tables
        self.projection = ProjectionTimer(gpu)
        self.gemm = {d: GemmTable(g) for d, g in tables.gemm.items()}
        self.context = AttentionTable(tables.context, False) if tables.context else None
        self.generation = AttentionTable(tables.generation, True) if tables.generation else None
        self.source = (f"AIConfigurator's measured tables for {tables.system}"
                       f" ({tables.versions}), interpolated")

    def gemm_us(self, m: np.ndarray, n: np.ndarray | int, k: int,
                precision: str) -> np.ndarray:
        m = np.asarray(m, dtype=float)
        if precision == "fp8" and "fp8" in self.gemm:
            return self.gemm["fp8"].us(m, n, k)
        base = self.gemm.get("bfloat16")
        if base is None:
            return self.projection.gemm_us(m, n, k, precision)
        t = base.us(m, n, k)
        wb = WEIGHT_ONLY_BYTES.get(precision)
        if wb is None:
            return t
        flops = 2.0 * m * np.asarray(n, float) * k
        return np.maximum(np.maximum(t * wb / 2.0, flops / base.best_flops_per_us),
                          base.floor_us)

    def context_attention_us(self, seqs: np.ndarray, new: np.ndarray, cached: np.ndarray,
                             a: Attention, kv_bytes: float) -> np.ndarray:
        if self.context is None:
            return self.projection.context_attention_us(seqs, new, cached, a, kv_bytes)
        g, ab, an, scale, windowed = self.context.grid(a, kv_bytes < 2)
        new, cached = np.asarray(new, float), np.asarray(cached, float)
        length = new + cached
        t = interp2(g, ab, an, np.maximum(seqs, 1), np.maximum(length, 1), (1.0, 2.0)) * scale
        whole = pairs(length, np.zeros_like(length), a.window if windowed else 0)
        part = pairs(new, cached, a.window)
        t = t * np.where(whole > 0, part / np.maximum(whole, 1), 0.0)
        return np.where((seqs > 0) & (new > 0), t, 0.0)

    def generation_attention_us(self, seqs: np.ndarray, kv_mean: np.ndarray, a: Attention,
                                kv_bytes: float) -> np.ndarray:
        if self.generation is None:
            return self.projection.generation_attention_us(seqs, kv_mean, a, kv_bytes)
        g, ab, an, scale, windowed = self.generation.grid(a, kv_bytes < 2)
        kv = np.asarray(kv_mean, float)
        if a.window and not windowed:
            kv = np.minimum(kv, a.window)
        t = interp2(g, ab, an, np.maximum(seqs, 1), np.maximum(kv - 1, 1)) * scale
        return np.where(seqs > 0, t, 0.0)

    def elementwise_us(self, bytes_: np.ndarray) -> np.ndarray:
        return self.projection.elementwise_us(bytes_)

    def allreduce_us(self, bytes_: np.ndarray, ranks: int) -> np.ndarray:
        curve = self.tables.allreduce.get(ranks)
        if curve is None:
            return collective_line(self.gpu, names.ALLREDUCE, ranks)(bytes_)
        size, us = curve
        b = np.maximum(np.asarray(bytes_, float), size[0])
        lb = np.log(b)
        t = np.exp(np.interp(lb, np.log(size), np.log(us)))
        return t * np.maximum(b / size[-1], 1.0)


class Tables:
    """The measured tables under ``root`` (an AIConfigurator ``systems`` folder; None: no
    tables), each system read on first use."""

    def __init__(self, root: Path | None = None, origin: str = "") -> None:
        self.root = root
        self.origin = origin or (str(root) if root else "none")
        self._systems = systems_in(root) if root is not None else ()
        self._timers: dict[str, Timer | None] = {}

    @property
    def systems(self) -> tuple[str, ...]:
        return self._systems

    def system_for(self, gpu: Gpu) -> str | None:
        for system, gpus in SYSTEM_GPUS.items():
            if system in self._systems and gpu.name in gpus:
                return system
        return None

    def system_tables(self, system: str) -> SystemTables | None:
        return _read(self.root, system) if self.root is not None else None

    def timer_for(self, gpu: Gpu) -> Timer | None:
        if gpu.name not in self._timers:
            system = self.system_for(gpu)
            tables = self.system_tables(system) if system else None
            self._timers[gpu.name] = TableTimer(gpu, tables) if tables else None
        return self._timers[gpu.name]


@cache
def _read(root: Path, system: str) -> SystemTables | None:
    return read_system(root, system)


TABLES_ENV = "RIGHTSIZE_TABLES"


def find_tables_root(env: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """Where the tables are: ``$RIGHTSIZE_TABLES``, else ``$RIGHTSIZE_SHARED`` or the
    ``shared`` folder beside a developer checkout (``serving/aiconfigurator``), else the
    installed ``aiconfigurator-core`` package's ``systems``; (None, why) when none is."""
    env = os.environ if env is None else env
    if env.get(TABLES_ENV):
        return Path(env[TABLES_ENV]), f"${TABLES_ENV}"
    shared = Path(env["RIGHTSIZE_SHARED"]) if env.get("RIGHTSIZE_SHARED") else \
        Path(__file__).resolve().parents[3] / "shared"
    here = shared / "serving" / "aiconfigurator"
    if (here / "data").is_dir():
        return here, str(here)
    try:
        import importlib.util
        spec = importlib.util.find_spec("aiconfigurator_core")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        pkg = Path(next(iter(spec.submodule_search_locations))) / "systems"
        if (pkg / "data").is_dir():
            return pkg, "the aiconfigurator-core package"
    return None, "no AIConfigurator tables found"


@cache
def default_tables() -> Tables:
    """The tables found at run time (:func:`find_tables_root`), once per process."""
    root, origin = find_tables_root()
    return Tables(root, origin)
