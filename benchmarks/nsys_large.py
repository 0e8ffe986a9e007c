"""Benchmark: read_nsys on a large Nsight Systems export built from a real one.

Role: copy a real export (default: the H200 nvFuser file in ../shared) into a temporary
directory, grow its kernel, runtime, NVTX, memcpy and memset tables by repeated doubling (rows
copied with their times and correlation ids shifted past the previous copy, so they stay
distinct), then time ``read_nsys`` in a fresh subprocess per run and report wall time, CPU
time (user + sys of the read) and peak RSS. Contenders alternate within one run: the readers
as they are now (``stdlib``: SQLite writes CSV chunks that polars parses; ``adbc``: the
optional ADBC extra) and the same readers at the commit before this work (``before-stdlib``,
``before-adbc``: Python tuples per row), extracted with ``git archive`` into a temporary
directory and put first on PYTHONPATH, and the current readers on one thread (``stdlib-1cpu``,
``adbc-1cpu``: the kernel table is otherwise read on a second thread). ``analyze`` and
``before-analyze`` time the whole ``rightsize analyze EXPORT --format json`` instead (reader,
analyzers and the JSON text; with the ADBC extra when installed): its peak RSS is the figure a
user sees.

Inputs: ``--source PATH`` (an nsys .sqlite), ``--kernels N`` (target kernel rows, default
2,000,000; runtime rows follow, NVTX is capped at ``--nvtx``). Outputs: the figures on stdout.
The source file is only read (copied); the large file is deleted afterwards unless ``--keep``.

Run: ``python benchmarks/nsys_large.py [--kernels 2000000] [--repeat 3] [--before REF]``;
keep the export and time it again with ``--keep`` then ``--reuse PATH``; the whole command before
and after the memory work: ``--reuse PATH --before fd6a4b8 --readers before-analyze,analyze``;
the frames/reader/analysis memory round: ``--reuse PATH --before b68d0d4 --readers
before-adbc,adbc,adbc-1cpu,before-analyze,analyze,before-stdlib,stdlib --repeat 3``
(ADBC readers need ``pip install -e ".[fast-sqlite]"``).
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
# The last commit before the readers stopped making Python objects per row (issue 17).
BEFORE_REF = "1ab7338"

CHILD = """
import json, os, resource, sys, time
t0 = time.perf_counter()
import rightsize.traces.nsys_db as nsys_db
assert "nsys_sqltext" in nsys_db.__dict__ or sys.argv[2].startswith("before-"), nsys_db.__file__
from rightsize.traces import nsys_adbc
from rightsize.traces.nsys import read_nsys
if sys.argv[2].endswith("-1cpu"):  # the current reader without its second thread
    import rightsize.traces.nsys as nsys_module
    nsys_module._cpus = lambda: 1
if "stdlib" in sys.argv[2]:
    nsys_adbc.available = lambda: False
elif not nsys_adbc.available() and not sys.argv[2].endswith("analyze"):
    sys.exit("adbc-driver-sqlite is not installed (pip install rightsize[fast-sqlite])")
t1, c1 = time.perf_counter(), os.times()
if sys.argv[2].endswith("analyze"):  # `rightsize analyze EXPORT --format json`, reader included
    from rightsize.pipeline import analyze_paths
    text = json.dumps(analyze_paths([sys.argv[1]]), indent=1, allow_nan=False)
    rows = {"kernels": 0, "transfers": 0, "runtime": 0, "cpu_ops": 0, "kernel_time_ns": 0}
else:
    trace = read_nsys(sys.argv[1])
    rows = {"kernels": trace.kernels.height, "transfers": trace.transfers.height,
            "runtime": trace.runtime.height, "cpu_ops": trace.cpu_ops.height,
            "kernel_time_ns": int(trace.kernels["dur_ns"].sum())}
t2, c2 = time.perf_counter(), os.times()
print(json.dumps({
    "import_s": t1 - t0, "read_s": t2 - t1,
    "cpu_s": (c2.user - c1.user) + (c2.system - c1.system),
    **rows,
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


def extract_before(ref: str, dest: Path) -> bool:
    """``rightsize/`` as of ``ref`` into ``dest/before`` (False: git or the commit is missing)."""
    (dest / "before").mkdir()
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "rightsize"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest / "before")], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def run_reader(big: Path, reader: str, before_dir: Path) -> dict:
    # The child runs in an empty directory (``python -c`` puts its working directory first on
    # sys.path), with the checkout or the extracted old package first on PYTHONPATH.
    env = dict(os.environ)
    code = before_dir / "before" if reader.startswith("before-") else REPO
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(big), reader], cwd=before_dir / "run",
                          capture_output=True, text=True, check=True, env=env)
    result = json.loads(proc.stdout)
    result["wall_s"] = time.perf_counter() - t0
    return result


def report(runs: dict[str, list[dict]], size_mib: float) -> None:
    medians = {}
    for reader, rs in runs.items():
        read_s = statistics.median(r["read_s"] for r in rs)
        cpu_s = statistics.median(r["cpu_s"] for r in rs)
        rss = max(r["peak_rss_mib"] for r in rs)
        medians[reader] = (read_s, cpu_s)
        r0 = rs[0]
        what = "analyze" if reader.endswith("analyze") else "read_nsys"
        rows = "" if what == "analyze" else (
            f"; rows: kernels={r0['kernels']:,} transfers={r0['transfers']:,} "
            f"runtime={r0['runtime']:,} cpu_ops={r0['cpu_ops']:,}")
        print(f"{reader:<14} {what} median {read_s:6.2f} s = {size_mib / read_s:4.0f} MiB/s; "
              f"CPU {cpu_s:6.2f} s = {size_mib / cpu_s:4.0f} MiB per CPU-s; peak RSS "
              f"{rss:5.0f} MiB ({rss / size_mib:.2f}x the file){rows}")
    for reader in ("stdlib", "adbc"):
        if reader in medians and f"before-{reader}" in medians:
            (a, ca), (b, cb) = medians[f"before-{reader}"], medians[reader]
            print(f"{reader}: {a / b:.1f}x faster than before (wall), {ca / cb:.1f}x (CPU)")
        if reader in medians and f"{reader}-1cpu" in medians:
            one, two = medians[f"{reader}-1cpu"][0], medians[reader][0]
            print(f"{reader}: the second thread saves {1 - two / one:.0%} of the wall time")
    if "stdlib" in medians and "adbc" in medians:
        print(f"adbc over stdlib now: {medians['stdlib'][0] / medians['adbc'][0]:.1f}x (wall)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--kernels", type=int, default=2_000_000)
    parser.add_argument("--nvtx", type=int, default=1_000_000)
    parser.add_argument(
        "--keep", action="store_true", help="keep the large file and print its path"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per reader, alternated")
    parser.add_argument("--readers",
                        default="before-stdlib,stdlib,stdlib-1cpu,before-adbc,adbc,adbc-1cpu",
                        help="stdlib, adbc (rightsize[fast-sqlite]), the same at --before, "
                             "and the current ones without their second thread (-1cpu)")
    parser.add_argument("--reuse", type=Path, help="time this export (a kept one) instead of building")
    parser.add_argument("--before", default=BEFORE_REF, help="git ref of the 'before' readers")
    args = parser.parse_args()
    if args.reuse is None and not args.source.exists():
        sys.exit(f"{args.source} is absent (it lives in ../shared beside a developer checkout)")
    tmp = Path(tempfile.mkdtemp(prefix="rightsize-nsys-bench-"))
    (tmp / "run").mkdir()
    big = args.reuse or tmp / "large.sqlite"
    if args.reuse is None:
        t0 = time.perf_counter()
        counts = build(args.source, big, args.kernels, args.nvtx)
        built_s = time.perf_counter() - t0
        print(f"source: {args.source.name}")
        print(
            f"built {big.stat().st_size / 2**20:.0f} MiB in {built_s:.1f} s: "
            + ", ".join(f"{t}={n:,}" for t, n in counts.items())
        )
    size_mib = big.stat().st_size / 2**20
    readers = args.readers.split(",")
    if any(r.startswith("before-") for r in readers) and not extract_before(args.before, tmp):
        print(f"cannot extract {args.before} with git: the 'before' readers are skipped")
        readers = [r for r in readers if not r.startswith("before-")]
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    runs: dict[str, list[dict]] = {r: [] for r in readers}
    for _ in range(args.repeat):
        for reader, rs in runs.items():
            result = run_reader(big, reader, tmp)
            rs.append(result)
            print(f"  {reader:<14} {result['read_s']:6.2f} s, CPU {result['cpu_s']:6.2f}"
                  f" s, process {result['wall_s']:6.2f} s, peak RSS "
                  f"{result['peak_rss_mib']:6.0f} MiB", flush=True)
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.repeat > 0:
        report(runs, size_mib)
    if args.keep and args.reuse is None:
        print(f"kept {big}")
        shutil.rmtree(tmp / "before", ignore_errors=True)
    else:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
