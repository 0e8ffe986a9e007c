"""GPU counter logs read per GPU: when the job ran, each GPU's busy power, and stalls.

Input: GPU_SAMPLES rows (nvidia-smi, DCGM, NVML: ``t_ns``, ``gpu_index``, ``gpu_util_pct``,
``mem_used_bytes``, ``power_w``). Output: the samples while a job ran (with a ``spin`` flag),
the words about the time it did not, one :class:`GpuSummary` per GPU and the
:class:`Stall` periods, for ``counters.diagnose_counters``. Pure.

* **Not running**: a sample at 0% busy with under ``SIGNALS.not_running_memory_gib`` used is
  the GPU with no job on it (the log's minutes before and after the job): left out, and said,
  instead of being read as the job waiting on its host.
* **Spinning**: ``utilization.gpu`` is the share of time *a* kernel ran, and a collective
  waiting for a late peer is a kernel. A sample at 90% or more busy drawing under
  ``SIGNALS.spin_power_fraction`` of that GPU's busy power (``busy_power_quantile`` of its
  power over its 90%+ busy samples) is spinning, not computing.
* **Stall**: consecutive samples where at least ``stall_gpus_share`` of the GPUs spin: they wait
  for the same peer. The GPUs of the log that do not spin then and sit under 10% busy are the
  ones they wait for (the straggler); none such: the peer is outside this log (another node).
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass

import numpy as np
import polars as pl

from rightsize.analyzers.thresholds import SIGNALS

BUSY_PCT = 90.0  # a sample this busy counts towards the busy power, and may spin
STRAGGLER_PCT = 10.0  # a GPU under this while the others spin is the one they wait for


@dataclass(frozen=True, slots=True)
class GpuSummary:
    gpu: int
    samples: int
    busy_pct: float  # mean utilization.gpu over its running samples
    spin_pct: float  # share of its running samples spent spinning, % (of time)
    power_w: float | None  # mean power over its running samples
    busy_power_w: float | None
    mem_peak_bytes: float | None


@dataclass(frozen=True, slots=True)
class Stall:
    start_ns: int | None
    seconds: float
    spinning: tuple[int, ...]
    stragglers: tuple[int, ...]
    spin_power_w: float
    busy_power_w: float
    spin_util_pct: float


def gpu_list(gpus: list[int] | tuple[int, ...]) -> str:
    """'0-4, 6, 7': GPU numbers with runs of three or more folded."""
    out: list[str] = []
    run: list[int] = []
    for g in sorted(gpus) + [None]:  # type: ignore[list-item]
        if run and (g is None or g != run[-1] + 1):
            out.append(f"{run[0]}-{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
            run = []
        if g is not None:
            run.append(g)
    return ", ".join(out)


def clock(t_ns: int | None) -> str:
    """An epoch ns as the log's wall-clock time (UTC unless --timezone placed it)."""
    if t_ns is None:
        return "?"
    return dt.datetime.fromtimestamp(t_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def running(s: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """The samples while a job held the GPU, and the words about the rest ("" when none)."""
    if "mem_used_bytes" not in s.columns or s["mem_used_bytes"].null_count() == s.height:
        return s, ""
    idle = (pl.col("gpu_util_pct") <= 0) & (pl.col("mem_used_bytes")
                                            < SIGNALS.not_running_memory_gib * 2**30)
    off = s.filter(idle)
    if off.height == 0:
        return s, ""
    on = s.filter(~idle)
    words = (f"not running in {off.height} of {s.height} samples (0% busy with under "
             f"{SIGNALS.not_running_memory_gib:g} GiB used: no job on the GPU")
    if on.height and "t_ns" in s.columns and on["t_ns"].null_count() == 0 \
            and off["t_ns"].null_count() == 0:
        first, last = int(on["t_ns"].min()), int(on["t_ns"].max())  # type: ignore[arg-type]
        before = off.filter(pl.col("t_ns") < first).height
        after = off.filter(pl.col("t_ns") > last).height
        words += (f"; {before} before the job, until {clock(first)}, and {after} after it, "
                  f"from {clock(last)}")
    return on, words + "): left out of the shares"


def with_spin(s: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, float]]:
    """``s`` with ``spin`` (bool) and each GPU's busy power (GPUs without power: none)."""
    if "power_w" not in s.columns or s["power_w"].null_count() == s.height:
        return s.with_columns(spin=pl.lit(False)), {}
    busy = (s.filter((pl.col("gpu_util_pct") >= BUSY_PCT) & pl.col("power_w").is_not_null())
            .group_by("gpu_index")
            .agg(pl.col("power_w").quantile(SIGNALS.busy_power_quantile, "linear")))
    power = {int(g): float(w) for g, w in zip(busy["gpu_index"], busy["power_w"], strict=True)}
    limit = pl.col("gpu_index").replace_strict(power, default=None, return_dtype=pl.Float64)
    spin = ((pl.col("gpu_util_pct") >= BUSY_PCT)
            & (pl.col("power_w") < SIGNALS.spin_power_fraction * limit)).fill_null(False)
    return s.with_columns(spin=spin), power


def summaries(s: pl.DataFrame, power: dict[int, float]) -> tuple[GpuSummary, ...]:
    """One summary per GPU over its running samples (``s`` has ``spin``)."""
    has = {c: c in s.columns and s[c].null_count() < s.height
           for c in ("power_w", "mem_used_bytes")}
    by = s.group_by("gpu_index").agg(
        n=pl.len(), busy=pl.col("gpu_util_pct").mean(), spin=pl.col("spin").mean() * 100,
        power=pl.col("power_w").mean() if has["power_w"] else pl.lit(None),
        mem=pl.col("mem_used_bytes").max() if has["mem_used_bytes"] else pl.lit(None),
    ).sort("gpu_index")
    return tuple(GpuSummary(int(r["gpu_index"]), int(r["n"]), float(r["busy"]), float(r["spin"]),
                            r["power"], power.get(int(r["gpu_index"])), r["mem"])
                 for r in by.to_dicts())


def stalls(s: pl.DataFrame, power: dict[int, float]) -> tuple[Stall, ...]:
    """Consecutive sampling rounds where most GPUs spin (see the module docstring)."""
    gpus = s["gpu_index"].n_unique()
    if gpus < 2 or not power or "t_ns" not in s.columns or s["t_ns"].null_count():
        return ()
    step = _round_ns(s)
    # a GPU's k-th sample is round k (every GPU is read once a round): no clock drift matters
    rounds = (s.sort("t_ns").with_columns(r=pl.int_range(pl.len()).over("gpu_index"))
              .group_by("r").agg(n=pl.col("spin").sum(), t=pl.col("t_ns").min(),
                                 spin=pl.col("gpu_index").filter(pl.col("spin")),
                                 low=pl.col("gpu_index").filter(~pl.col("spin") & (
                                     pl.col("gpu_util_pct") < STRAGGLER_PCT)),
                                 w=pl.col("power_w").filter(pl.col("spin")).mean(),
                                 u=pl.col("gpu_util_pct").filter(pl.col("spin")).mean())
              .sort("r"))
    hit = rounds.filter(pl.col("n") >= SIGNALS.stall_gpus_share * gpus)
    out: list[Stall] = []
    for part in _runs(hit):
        spinning = sorted({g for row in part["spin"].to_list() for g in row})
        low = sorted({g for row in part["low"].to_list() for g in row})
        out.append(Stall(int(part["t"][0]), part.height * step / 1e9, tuple(spinning),
                         tuple(low), float(part["w"].mean()),  # type: ignore[arg-type]
                         float(np.mean([power[g] for g in spinning if g in power])),
                         float(part["u"].mean())))  # type: ignore[arg-type]
    return tuple(sorted(out, key=lambda x: -x.seconds))


def _round_ns(s: pl.DataFrame) -> int:
    """The sampling period: the median gap between distinct times of one GPU."""
    g = s.filter(pl.col("gpu_index") == s["gpu_index"][0]).sort("t_ns")["t_ns"].to_numpy()
    gaps = np.diff(g)
    gaps = gaps[gaps > 0]
    return int(np.median(gaps)) if len(gaps) else 1_000_000_000


def _runs(hit: pl.DataFrame) -> list[pl.DataFrame]:
    """``hit``'s rows cut where its rounds are not consecutive."""
    if hit.height == 0:
        return []
    r = hit["r"].to_numpy()
    cuts = np.nonzero(np.diff(r) > 1)[0] + 1
    bounds = [0, *cuts.tolist(), hit.height]
    return [hit.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
