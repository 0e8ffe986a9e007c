#!/usr/bin/env python3
"""Scale of ``rightsize analyze`` on a job of many big ranks: local engine and a 2-node Ray cluster.

Builds (or reuses) an N-rank job with ``make_job.py`` from the shared DLRM ranks (``--steps``
steps a rank: 190 steps make ~155 MB a rank), then times in fresh processes:

* ``single``: one rank analyzed alone (``pipeline.analyze_document`` of that file, in one process): the
  single-trace figure, MB/s and peak RSS;
* ``local``: the whole job on the local engine (``--workers``): wall time, throughput per
  worker (trace MB / wall / workers, so start-up, scheduling and the reduce count against it),
  the largest worker's peak RSS (``RUSAGE_CHILDREN`` of the driver once its pool is joined),
  the driver's own, the whole tree's (sampled every 0.2 s) and the reduce's share of the wall
  time (``job_map.reduce``: job check, job section, document);
* ``ray`` (``--ray``): the same on a two-node Ray cluster started here on 127.0.0.1 (one CPU a
  node, ``tests/ray_cluster.py``); workers' RSS sampled (they are the raylets' children), and
  the document compared with the local one.

Usage::

    python benchmarks/ranks_large.py --ranks 16 --steps 190 --job /tmp/bench/job16 --ray
    python benchmarks/ranks_large.py --ranks 32 --steps 190 --job /tmp/bench/job32 \
        --clone-to 128 --ray   # 128 ranks of 155 MB (19.8 GB): rank r replays rank r % 32
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, resource, sys, time
from rightsize import job_map
from rightsize.engine import EngineOptions
from rightsize.pipeline import analyze_document
reduce_s = []
_reduce = job_map.reduce
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return _reduce(*a, **k)
    finally:
        reduce_s.append(time.perf_counter() - t)
job_map.reduce = timed
paths, engine, workers, address, out = sys.argv[1].split(","), sys.argv[2], sys.argv[3], \
    sys.argv[4], sys.argv[5]
run = EngineOptions(engine=engine, workers=int(workers) if workers != "-" else None,
                    address=address if address != "-" else None)
t0 = time.perf_counter()
doc = analyze_document(paths, run_on=run)
wall = time.perf_counter() - t0
open(out, "w").write(json.dumps(doc.to_json()))
print(json.dumps({"wall_s": wall, "reduce_s": sum(reduce_s),
                  "driver_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "worker_peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


class Sampler:
    """The summed RSS of a process tree (and each process's largest), every 0.2 s."""

    def __init__(self, roots: Callable[[], list[psutil.Process]]) -> None:
        self.roots = roots
        self.total = 0
        self.per_pid: dict[int, int] = {}
        self.names: dict[int, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            total = 0
            for p in self.roots():
                try:
                    procs = [p, *p.children(recursive=True)]
                except psutil.Error:
                    continue
                for q in procs:
                    try:
                        rss, name = q.memory_info().rss, q.name()
                    except psutil.Error:
                        continue
                    total += rss
                    self.per_pid[q.pid] = max(self.per_pid.get(q.pid, 0), rss)
                    self.names.setdefault(q.pid, set()).add(name)
            self.total = max(self.total, total)


def run_child(paths: list[Path], engine: str, workers: int | None, address: str | None,
              out: Path, env: dict[str, str],
              extra_roots: Callable[[], list[psutil.Process]] = list) -> dict:
    cmd = [sys.executable, "-c", CHILD, ",".join(map(str, paths)), engine,
           str(workers) if workers else "-", address or "-", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, env=env)
    me = psutil.Process(proc.pid)
    with Sampler(lambda: [me, *extra_roots()]) as s:
        stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{engine} run failed: {stderr[-3000:]}")
    r = json.loads(stdout.strip().splitlines()[-1])
    r["tree_peak"] = s.total
    r["sampled"] = s.per_pid
    r["names"] = s.names
    r["driver_pid"] = proc.pid
    return r


def make(job: Path, ranks: int, steps: int) -> list[Path]:
    files = sorted(job.glob("rank*.pt.trace.json"), key=lambda p: int(p.name[4:].split(".")[0]))
    if len(files) != ranks:
        t = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "make_job.py"), str(job),
                        "--ranks", str(ranks), "--steps", str(steps),
                        "--straggler", str(ranks // 2)], check=True)
        print(f"made {ranks} ranks in {time.perf_counter() - t:.0f} s")
        files = sorted(job.glob("rank*.pt.trace.json"),
                       key=lambda p: int(p.name[4:].split(".")[0]))
    return files


_DIST = re.compile(rb'"distributedInfo": \{"backend": "nccl", "rank": (\d+), "world_size": (\d+)\}')


def clone(files: list[Path], out: Path, ranks: int) -> list[Path]:
    """``ranks`` ranks in ``out``, rank r a copy of ``files[r % len(files)]`` with its
    distributedInfo saying rank r of ``ranks`` (make_job.py writes compact JSON: the envelope's
    distributedInfo is in its first few kB, the events are copied as they are)."""
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for r in range(ranks):
        dest = out / f"rank{r}.pt.trace.json"
        made.append(dest)
        if dest.exists() and dest.stat().st_size:
            continue
        with files[r % len(files)].open("rb") as src, dest.open("wb") as dst:
            head = src.read(1 << 16)
            head, n = _DIST.subn(b'"distributedInfo": {"backend": "nccl", "rank": %d, '
                                 b'"world_size": %d}' % (r, ranks), head, count=1)
            if n != 1:
                raise SystemExit(f"{src.name}: no distributedInfo in its first 64 kB")
            dst.write(head)
            shutil.copyfileobj(src, dst, 16 << 20)
    return made


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--steps", type=int, default=190)
    p.add_argument("--job", type=Path, default=Path("/tmp/rightsize-ranks-large"))
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--ray", action="store_true")
    p.add_argument("--clone-to", type=int, default=0, metavar="N",
                   help="analyze N ranks, rank r a copy of generated rank r %% --ranks with its "
                        "distributedInfo rewritten (generating is ~15 s a rank, copying ~1 s)")
    a = p.parse_args()
    files = make(a.job, a.ranks, a.steps)
    if a.clone_to:
        t = time.perf_counter()
        files = clone(files, a.job.parent / f"{a.job.name}-x{a.clone_to}", a.clone_to)
        print(f"{a.clone_to} ranks cloned from {a.ranks} in {time.perf_counter() - t:.0f} s "
              f"(rank r replays rank r % {a.ranks}: its timeline, straggler and jitter)")
    total = sum(f.stat().st_size for f in files)
    print(f"job: {len(files)} ranks, {gb(total)} ({total / len(files) / 1e6:.0f} MB a rank), "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
    env = dict(os.environ)
    out = a.job.parent / (a.job.name + ".docs")
    out.mkdir(exist_ok=True)

    one = run_child(files[:1], "local", 1, None, out / "single.json", env)
    one_rate = files[0].stat().st_size / one["wall_s"] / 1e6
    print(f"single: {files[0].name} {files[0].stat().st_size / 1e6:.0f} MB in "
          f"{one['wall_s']:.1f} s = {one_rate:.1f} MB/s, peak RSS {gb(one['driver_peak'])}",
          flush=True)

    loc = run_child(files, "local", a.workers, None, out / "local.json", env)
    report("local", loc, total, a.workers, one_rate, one["driver_peak"], len(files))

    if a.ray:
        from tests.ray_cluster import LOOPBACK_ENV, cluster

        with cluster(memory_bytes=6_000_000_000) as address:
            dirs = [d for d in Path("/tmp").glob("rs-ray-*") if d.is_dir()]

            def raylets() -> list[psutil.Process]:
                return [q for q in psutil.process_iter(["name", "cmdline"])
                        if q.info["name"] == "raylet"
                        and any(str(d) in " ".join(q.info["cmdline"] or []) for d in dirs)]

            ray = run_child(files, "ray", None, address, out / "ray.json",
                            dict(env, **LOOPBACK_ENV), raylets)
        # Ray workers name themselves after the task they run (engine._call)
        workers = {pid: rss for pid, rss in ray["sampled"].items()
                   if any("_call" in n for n in ray["names"].get(pid, ()))}
        ray["worker_peak"] = max(workers.values(), default=0)
        report("ray (2 nodes x 1 CPU)", ray, total, 2, one_rate, one["driver_peak"],
               len(files), sampled=True)
        same = json.loads((out / "ray.json").read_text()) == \
            json.loads((out / "local.json").read_text())
        print(f"ray document == local document: {same}")


def report(label: str, r: dict, total: int, workers: int, one_rate: float, one_peak: int,
           ranks: int, sampled: bool = False) -> None:
    rate = total / r["wall_s"] / 1e6
    per = rate / workers
    how = "sampled" if sampled else "rusage"
    print(f"{label}: {ranks} ranks in {r['wall_s']:.1f} s = {rate:.1f} MB/s, {per:.1f} MB/s "
          f"per worker ({per / one_rate:.0%} of single); largest worker peak RSS "
          f"{gb(r['worker_peak'])} ({how}; {r['worker_peak'] / one_peak:.2f}x the single run's "
          f"{gb(one_peak)}), driver {gb(r['driver_peak'])}, all processes together "
          f"{gb(r['tree_peak'])} (sampled); reduce {r['reduce_s']:.2f} s = "
          f"{r['reduce_s'] / r['wall_s']:.1%} of the wall time", flush=True)


if __name__ == "__main__":
    main()
