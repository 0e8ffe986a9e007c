"""Time ``rightsize fleet metrics`` over 1,000 workloads x 7 days at 30 s from a real Prometheus.

Issue 32's goal: under 60 s on the development machine (2 cores), most of it Prometheus.

Setup (not timed in the result, reported apart): dcgm-exporter-shaped series for ``--workloads``
pods (one GPU each, labels gpu/UUID/modelName/Hostname/namespace/pod/container) of
``DCGM_FI_DEV_FB_USED``, ``DCGM_FI_DEV_GPU_UTIL`` and ``DCGM_FI_PROF_SM_ACTIVE`` every
``--step`` seconds over ``--days``: 60 million samples by default. They are written as one
OpenMetrics file per 2-hour TSDB block (promtool re-reads its whole input once per block, so one
big file costs 84 passes) and backfilled with ``promtool tsdb create-blocks-from openmetrics``,
two at a time. Prometheus then serves them on 127.0.0.1 with compaction held at 2 h blocks (no
background compaction competes with the timed queries).

Timed: the CLI end to end (``--prometheus ... --format json -o FILE``) in a subprocess, then in
this process the fetch (Prometheus evaluating the queries, HTTP and parsing, overlapped on two
threads) and the analysis apart, the analysis split into the statistics over every sample
(``stats.measure``: vectorized polars/numpy over all points at once) and the per-workload
decision (``row``: Python per workload, never per sample). ``--repeat N`` times the in-process
parts N times (the best is printed, and every run).

    python benchmarks/fleet_metrics_scale.py [--workloads 1000] [--days 7] [--step 30]
        [--data-dir DIR]   # keep the TSDB there and reuse it on the next run
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rightsize.analyzers.fleet_metrics import FleetMetrics
    from rightsize.traces.fleet_series import SeriesSet

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fleet_metrics.promserver import serve

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
BLOCK_S = 7200
LABELS = ('{{gpu="0",UUID="GPU-{w:012d}",modelName="NVIDIA A100-SXM4-80GB",'
          'Hostname="node-{node}",namespace="team-{ns}",pod="svc-{w}-5c8d7f9b6-bd2zc",'
          'container="server"}} ')


def values(metric: str, w: int, n: int, offset: int) -> np.ndarray:
    """Deterministic, workload-specific levels: memory 4-70 GiB, activity 1-90%."""
    rng = np.random.default_rng(w * 1000 + offset)
    level = (w * 7919) % 100 / 100
    if metric == "DCGM_FI_DEV_FB_USED":
        return np.round(4096 + level * 67000 + rng.uniform(0, 2048, n))
    busy = 1 + level * 89 * rng.uniform(0.5, 1.0, n)
    return busy / 100 if metric == "DCGM_FI_PROF_SM_ACTIVE" else np.round(busy)


def block_file(path: Path, block: int, workloads: int, step: int, end: int) -> Path:
    start = T0 + block * BLOCK_S
    times = np.arange(start, min(start + BLOCK_S, end + 1), step)
    stamp = np.char.add(" ", np.char.add(np.char.mod("%d", times), "\n"))
    with path.open("w") as fh:
        for metric in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE"):
            fh.write(f"# TYPE {metric} gauge\n")
            for w in range(workloads):
                head = metric + LABELS.format(w=w, node=w // 8, ns=w % 20)
                vals = np.char.mod("%.6g", values(metric, w, len(times), block))
                fh.write("".join(np.char.add(np.char.add(head, vals), stamp)))
        fh.write("# EOF\n")
    return path


def backfill(data: Path, workloads: int, days: float, step: int) -> tuple[int, float]:
    end = T0 + int(days * 86400)
    blocks = -(-(end - T0 + 1) // BLOCK_S)
    work = data.parent / "openmetrics"
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()

    def one(b: int) -> None:
        f = block_file(work / f"block{b:04d}.om", b, workloads, step, end)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(f),
                        str(data)], check=True, timeout=1800)
        f.unlink()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, range(blocks)))
    shutil.rmtree(work, ignore_errors=True)
    samples = 3 * workloads * ((end - T0) // step + 1)
    return samples, time.perf_counter() - t


def analysis_split(data: SeriesSet) -> tuple[float, float, FleetMetrics]:
    """One analysis timed whole, and the statistics over every sample inside it."""
    import importlib

    from rightsize.catalog import load_catalog

    # the module (the package's name ``analyze`` is its function)
    module = importlib.import_module("rightsize.analyzers.fleet_metrics.analyze")
    catalog = load_catalog()
    names = vars(module)
    inner = names["measure"]
    spent = []

    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t)

    names["measure"] = timed
    try:
        t = time.perf_counter()
        res = module.analyze(data, catalog)
        total = time.perf_counter() - t
    finally:
        names["measure"] = inner
    return spent[0], total, res


def same(a: SeriesSet, b: SeriesSet) -> str:
    """Whether two fetches hold the same points per series (by metric and labels)."""
    import polars as pl

    def names(d: SeriesSet) -> list[str]:
        return [f"{s.source_metric}{sorted(s.labels.items())}" for s in d.series]

    if sorted(names(a)) != sorted(names(b)):
        return "DIFFERENT series"
    rank = {k: i for i, k in enumerate(sorted(names(a)))}

    def keyed(d: SeriesSet) -> pl.DataFrame:
        lut = np.array([rank[k] for k in names(d)], dtype=np.int64)
        return pl.DataFrame({"key": lut[d.points["series"].to_numpy()],
                             "t_ns": d.points["t_ns"], "value": d.points["value"]}).sort(
            "key", "t_ns")

    x, y = keyed(a), keyed(b)
    if x.height != y.height or not x["key"].equals(y["key"]) or not x["t_ns"].equals(y["t_ns"]):
        return "DIFFERENT steps"
    va, vb = x["value"].to_numpy(), y["value"].to_numpy()
    exact = int((va == vb).sum())
    close = bool(np.allclose(va, vb, rtol=1e-12, atol=0))
    return (f"{x.height:,} points, same series and steps; values equal in {exact:,}, "
            f"{'all' if close else 'NOT all'} within 1e-12 relative")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--step", type=int, default=30)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--compare-range", action="store_true",
                    help="also time the range-query path in process and check it gives the "
                         "same points (maxima equal, means within 1e-12 relative)")
    a = ap.parse_args()
    if not shutil.which("prometheus") or not shutil.which("promtool"):
        sys.exit("needs Debian's prometheus and promtool (apt-get install prometheus)")
    root = a.data_dir or Path(tempfile.mkdtemp(prefix="rightsize-fleet-bench-"))
    data = root / "data"
    end = T0 + int(a.days * 86400)
    stamp = root / f"backfilled-{a.workloads}-{a.days:g}-{a.step}"
    if stamp.exists():
        print(f"reusing the TSDB in {data}")
    else:
        shutil.rmtree(data, ignore_errors=True)
        samples, took = backfill(data, a.workloads, a.days, a.step)
        stamp.touch()
        print(f"setup: {samples:,} samples backfilled in {took:.1f} s (not part of the result)")
    out = root / "fleet-metrics.json"
    window = ["--start", str(T0), "--end", str(end), "--step", f"{a.step}s"]
    hold = ["--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h"]
    with serve(data, root / "prometheus.log", hold) as url:
        t = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "rightsize", "fleet", "metrics",
                              "--prometheus", url, *window, "--format", "json", "-o", str(out),
                              "--force"], capture_output=True, text=True, check=False)
        cli_s = time.perf_counter() - t
        if run.returncode:
            sys.exit(run.stderr)
        print(run.stderr.strip())
        from rightsize.traces import prometheus

        got, fetches = None, []
        for _ in range(a.repeat):
            t = time.perf_counter()
            got = prometheus.fetch(prometheus.Query(url, T0, end, float(a.step)))
            fetches.append(time.perf_counter() - t)
        if a.compare_range and got is not None:
            t = time.perf_counter()
            old = prometheus.fetch_range(prometheus.Query(url, T0, end, float(a.step)))
            range_s = time.perf_counter() - t
            print(f"range-query path (the old fetch): {range_s:.1f} s; " + same(old, got))
    assert got is not None
    measures, totals = [], []
    for _ in range(a.repeat):
        m, total, res = analysis_split(got)
        measures.append(m)
        totals.append(total)
    print(f"{a.workloads} workloads x {a.days:g} days at {a.step} s: "
          f"{got.points.height:,} points in {len(got.series)} series")
    print(f"CLI end to end: {cli_s:.1f} s (goal < 60 s); in process: fetch (Prometheus + "
          f"HTTP + parse) {min(fetches):.1f} s, analysis {min(totals):.1f} s (statistics over "
          f"the samples {min(measures):.1f} s, the rest: the {a.workloads} decisions "
          f"{min(t - m for t, m in zip(totals, measures, strict=True)):.1f} s)")
    if a.repeat > 1:
        print("runs: fetch " + ", ".join(f"{x:.1f}" for x in fetches) + " s; analysis "
              + ", ".join(f"{x:.1f}" for x in totals) + " s")
    print("outcomes:", res.outcomes)
    if a.data_dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
