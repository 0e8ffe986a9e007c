"""Fleet scale: jobs per hour of `fleet scan`, its peak memory, and `fleet report` on 100k rows.

    python benchmarks/fleet_scale.py                     # 200 jobs of 1-3 MB, local engine
    python benchmarks/fleet_scale.py --jobs 2000 --ray   # and a two-node Ray cluster on 127.0.0.1

1. A corpus of ``--jobs`` Kineto jobs of 1-3 MB (gzip) made by benchmarks/fleet_corpus.py from
   the shared traces (or ``--corpus DIR``, reused).
2. ``rightsize fleet scan`` of it with the local engine (``--workers``, default every CPU this
   process may use), a fresh table: wall time from the command's start to its exit (discovery,
   hashing, analysis, writing), jobs per hour, and the peak of the summed RSS of the command's
   process tree (driver + pool workers, sampled every 50 ms with psutil).
3. With ``--ray``: the same on a two-node Ray cluster started on 127.0.0.1 by Ray's own
   ``ray.cluster_utils.Cluster`` (a head and one worker node, ``--ray-cpus`` CPUs each, loopback
   only: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), shut down at the end.
4. ``--report-rows`` synthetic rows (benchmarks/fleet_corpus.synthetic_rows) in a table, and
   ``rightsize fleet report`` over them as text, JSON and HTML, each timed from the command's
   start to its exit (best of ``--repeat``), with the in-process ``build`` time.

Results print as JSON and go to benchmarks/out/fleet_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.fleet_corpus import TEAMS, make_corpus, synthetic_rows


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def timed(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the CLI; wall seconds and the peak summed RSS of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rightsize", *args], cwd=REPO,
                            env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"rightsize {' '.join(args)} failed:\n{err[-3000:]}")
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(peak[0] / 2**20, 1),
            "stdout_bytes": len(out), "stderr_tail": err.strip().splitlines()[-4:]}


def _labels(path: Path) -> Path:
    path.write_text("pattern,team,project\n" + "".join(
        f"*/team-{t}/*,{t},\n" for t in TEAMS))
    return path


def scan_figures(corpus: Path, table: Path, jobs: int, extra: list[str],
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    labels = _labels(table.parent / f"{table.name}-labels.csv")
    r = timed(["fleet", "scan", str(corpus), "--table", str(table), "--labels", str(labels),
               *extra], env)
    import polars as pl

    from rightsize.fleet.table import FleetTable

    rows = FleetTable(table).rows().collect()
    r.update(jobs=rows.height, ok=int((rows["status"] == "ok").sum()),
             jobs_per_hour=round(jobs / r["wall_s"] * 3600),
             analysis_s_mean=round(float(rows["analysis_s"].mean() or 0), 3),
             analysis_s_max=round(float(rows["analysis_s"].max() or 0), 3),
             input_mb_mean=round(float(rows["bytes"].mean() or 0) / 1e6, 2),
             bounds=dict(rows.group_by(pl.col("bound").fill_null("none")).len().rows()))
    return r


def ray_figures(corpus: Path, table: Path, jobs: int, cpus: int) -> dict[str, Any]:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # stay on 127.0.0.1
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": cpus, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=cpus)
        cluster.wait_for_nodes()
        r = scan_figures(corpus, table, jobs,
                         ["--engine", "ray", "--ray-address", cluster.address],
                         {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
        r["cluster"] = f"2 nodes on {cluster.address.split(':')[0]}, {cpus} CPUs each"
        r["peak_rss_note"] = "the driver only: Ray's workers are the raylets' children"
        return r
    finally:
        cluster.shutdown()


def report_figures(work: Path, rows: int, repeat: int) -> dict[str, Any]:
    from rightsize.fleet.report import build
    from rightsize.fleet.table import FleetTable

    t0 = time.perf_counter()
    table = FleetTable.open(work / "report-table", create=True)
    table.append(synthetic_rows(rows))
    made = time.perf_counter() - t0
    out: dict[str, Any] = {"rows": rows, "files": len(table.files()),
                           "make_s": round(made, 2)}
    start = time.perf_counter()
    build(table.rows(), str(table.root))
    out["build_in_process_s"] = round(time.perf_counter() - start, 3)
    for fmt in ("text", "json", "html"):
        walls = []
        for i in range(repeat):
            args = ["fleet", "report", "--table", str(table.root), "--format", fmt, "-q"]
            if fmt == "html":
                args += ["-o", str(work / f"fleet-{i}.html")]
            walls.append(timed(args)["wall_s"])
        out[f"{fmt}_s"] = min(walls)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--ray", action="store_true")
    ap.add_argument("--ray-cpus", type=int, default=1)
    ap.add_argument("--report-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "fleet_scale.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp:
        work = Path(tmp)
        corpus = a.corpus or work / "corpus"
        result: dict[str, Any] = {
            "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                        "load_1m_at_start": os.getloadavg()[0]}}
        if a.corpus is None:
            result["corpus"] = make_corpus(corpus, a.jobs, progress=False)
        jobs = sum(1 for _ in corpus.rglob("*.json.gz"))
        workers = ["--workers", str(a.workers)] if a.workers else []
        result["local"] = scan_figures(corpus, work / "local", jobs, workers)
        result["local"]["workers"] = a.workers or result["machine"]["cpus"]
        result["rescan"] = timed(["fleet", "scan", str(corpus), "--table", str(work / "local")])
        if a.ray:
            result["ray"] = ray_figures(corpus, work / "ray", jobs, a.ray_cpus)
        if a.report_rows:
            result["report"] = report_figures(work, a.report_rows, a.repeat)
    text = json.dumps(result, indent=1)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
