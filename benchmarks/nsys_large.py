"""Benchmark: read_nsys on a large Nsight Systems export built from a real one.

Role: copy a real export (default: the H200 nvFuser file in ../shared) into a temporary
directory, grow its kernel, runtime, NVTX, memcpy and memset tables by repeated doubling (rows
copied with their times and correlation ids shifted past the previous copy, so they stay
distinct), then time ``read_nsys`` in a fresh subprocess and report wall time and peak RSS.

Inputs: ``--source PATH`` (an nsys .sqlite), ``--kernels N`` (target kernel rows, default
2,000,000; runtime rows follow, NVTX is capped at ``--nvtx``). Outputs: the figures on stdout.
The source file is only read (copied); the large file is deleted afterwards unless ``--keep``.

Run: ``python benchmarks/nsys_large.py [--kernels 2000000] [--repeat 3]``: the stdlib reader
and the ADBC one (``pip install -e ".[fast-sqlite]"``) alternate, one subprocess per run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "traces" / "nsys" / "fuser-ee4fcf3-h200-report1.sqlite"

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from rightsize.traces import nsys_adbc
from rightsize.traces.nsys import read_nsys
if sys.argv[2] == "stdlib":
    nsys_adbc.available = lambda: False
elif not nsys_adbc.available():
    sys.exit("adbc-driver-sqlite is not installed (pip install rightsize[fast-sqlite])")
t1 = time.perf_counter()
trace = read_nsys(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({
    "import_s": t1 - t0, "read_s": t2 - t1,
    "kernels": trace.kernels.height, "transfers": trace.transfers.height,
    "runtime": trace.runtime.height, "cpu_ops": trace.cpu_ops.height,
    "kernel_time_ns": int(trace.kernels["dur_ns"].sum()),
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def _grow(conn: sqlite3.Connection, table: str, target_rows: int) -> int:
    """Double ``table`` (shifting start/end/correlationId) until it has >= target_rows rows."""
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    if not cols:
        return 0
    (rows,) = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    while 0 < rows < target_rows:
        lo, hi = conn.execute(
            f'SELECT min(start), max(coalesce(end, start)) FROM "{table}"'
        ).fetchone()
        shift = hi - lo + 1000
        (corr,) = conn.execute(
            f'SELECT coalesce(max(correlationId), 0) + 1 FROM "{table}"'
            if "correlationId" in cols
            else "SELECT 0"
        ).fetchone()
        exprs = []
        for c in cols:
            if c in ("start", "end"):
                exprs.append(f'"{c}" + {shift}')
            elif c == "correlationId":
                exprs.append(f'"{c}" + {corr}')
            else:
                exprs.append(f'"{c}"')
        names = ", ".join(f'"{c}"' for c in cols)
        conn.execute(f'INSERT INTO "{table}" ({names}) SELECT {", ".join(exprs)} FROM "{table}"')
        (rows,) = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    conn.commit()
    return rows


def build(source: Path, dest: Path, kernels: int, nvtx: int) -> dict[str, int]:
    shutil.copyfile(source, dest)
    conn = sqlite3.connect(dest)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    counts = {
        "CUPTI_ACTIVITY_KIND_KERNEL": _grow(conn, "CUPTI_ACTIVITY_KIND_KERNEL", kernels),
        "CUPTI_ACTIVITY_KIND_RUNTIME": _grow(conn, "CUPTI_ACTIVITY_KIND_RUNTIME", kernels),
        "CUPTI_ACTIVITY_KIND_MEMCPY": _grow(conn, "CUPTI_ACTIVITY_KIND_MEMCPY", kernels // 20),
        "CUPTI_ACTIVITY_KIND_MEMSET": _grow(conn, "CUPTI_ACTIVITY_KIND_MEMSET", kernels // 20),
        "NVTX_EVENTS": _grow(conn, "NVTX_EVENTS", nvtx),
    }
    conn.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--kernels", type=int, default=2_000_000)
    parser.add_argument("--nvtx", type=int, default=1_000_000)
    parser.add_argument(
        "--keep", action="store_true", help="keep the large file and print its path"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per reader, alternated")
    parser.add_argument("--readers", default="stdlib,adbc",
                        help="stdlib (sqlite3 rows) and/or adbc (rightsize[fast-sqlite])")
    args = parser.parse_args()
    if not args.source.exists():
        sys.exit(f"{args.source} is absent (it lives in ../shared beside a developer checkout)")
    tmp = Path(tempfile.mkdtemp(prefix="rightsize-nsys-bench-"))
    big = tmp / "large.sqlite"
    t0 = time.perf_counter()
    counts = build(args.source, big, args.kernels, args.nvtx)
    built_s = time.perf_counter() - t0
    print(f"source: {args.source.name}")
    print(
        f"built {big.stat().st_size / 2**20:.0f} MiB in {built_s:.1f} s: "
        + ", ".join(f"{t}={n:,}" for t, n in counts.items())
    )
    size_mib = big.stat().st_size / 2**20
    runs: dict[str, list[dict]] = {r: [] for r in args.readers.split(",")}
    for _ in range(args.repeat):
        for reader, rs in runs.items():
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", CHILD, str(big), reader],
                                  capture_output=True, text=True, check=True)
            result = json.loads(proc.stdout)
            result["wall_s"] = time.perf_counter() - t0
            rs.append(result)
            print(f"  {reader:<6} read_nsys {result['read_s']:6.2f} s, process "
                  f"{result['wall_s']:6.2f} s, peak RSS {result['peak_rss_mib']:6.0f} MiB")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for reader, rs in runs.items():
        read_s = statistics.median(r["read_s"] for r in rs)
        rss = max(r["peak_rss_mib"] for r in rs)
        r0 = rs[0]
        print(f"{reader}: read_nsys median {read_s:.2f} s = {size_mib / read_s:.0f} MiB/s, "
              f"peak RSS {rss:.0f} MiB ({rss / size_mib:.2f}x the file); rows: "
              f"kernels={r0['kernels']:,} transfers={r0['transfers']:,} "
              f"runtime={r0['runtime']:,} cpu_ops={r0['cpu_ops']:,}")
    if len(runs) == 2:
        a, b = (statistics.median(r["read_s"] for r in rs) for rs in runs.values())
        first, second = runs
        print(f"speedup of {second} over {first}: {a / b:.1f}x")
    if args.keep:
        print(f"kept {big}")
    else:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
