#!/usr/bin/env python3
"""Memory of one trace's analysis: the budget model's factors, and big traces within a budget.

Three commands:

``factors FILE...``
    For each trace, a fresh process imports what a worker of ``rightsize analyze`` imports,
    loads the catalog (its RSS then: the floor, ``base``), and runs the worker's task on the
    file (``job_map.analyze_one``: read lean, analyze as one rank, summarize, the document's
    share) with no budget; it reports the peak RSS (``ru_maxrss``), the bytes the model counts
    (uncompressed JSON; an export's size) and the events read. The factors
    ``rightsize/traces/budget.py`` uses are the largest ratios (peak - base) / bytes and
    (peak - base) / events over the files given, per format.

``budget FILE --budget 2G``
    ``rightsize analyze FILE --format json`` in a child, once without ``--memory-budget`` (unless
    ``--skip-whole``) and once with it: wall time, peak RSS (``os.wait4``) and the window of steps
    the document says it read.

``nsys-steps --out PATH --copies N``
    A big Nsight Systems export with steps, from a real one (default: the H200 nvFuser export
    of ../shared): every row of the activity tables (kernels, runtime calls, memcpy, memset,
    syncs) and of NVTX_EVENTS is copied N times, copy k shifted by k x the source's span (+1 ms)
    with correlation ids shifted by k x (the largest + 1), and one NVTX range ``step k`` spans
    copy k: N steps whose kernels still match their runtime calls. Doubling, so N is rounded up
    to a power of two. ``--no-steps``: the same export without the step ranges (a budget then
    holds by a window of time).

Usage::

    python benchmarks/make_big_trace.py --size-gb 1.02 --out /tmp/bench/k1g.json
    python benchmarks/memory_budget.py factors /tmp/bench/k1g.json /tmp/bench/n1g.sqlite
    python benchmarks/memory_budget.py nsys-steps --out /tmp/bench/n4g.sqlite --copies 4096
    python benchmarks/memory_budget.py budget /tmp/bench/n4g.sqlite --budget 2G
    python benchmarks/memory_budget.py nsys-steps --out /tmp/bench/n4g-nosteps.sqlite \
        --copies 4096 --no-steps
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO.parent / "shared" / "traces" / "nsys" / "fuser-ee4fcf3-h200-report1.sqlite"
ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
            "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from rightsize import job_map
from rightsize.analyzers.analysis import analyze_trace  # what a worker imports
from rightsize.catalog import load_catalog
from rightsize.pipeline import Options
from rightsize.traces import budget
from rightsize.traces.loader import detect
catalog = load_catalog()
reader = detect(Path(sys.argv[1]))
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
options = Options(catalog=catalog)
part = job_map.analyze_one(job_map.TraceTask(sys.argv[1], None, options.read_options(),
                                             options.context()))
t1, c1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
assert not isinstance(part, job_map.Refusal), part
print(json.dumps({
    "base_bytes": base, "peak_bytes": c1.ru_maxrss * 1024, "wall_s": t1 - t0,
    "cpu_s": c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime,
    "events": part.entry["events"], "data_bytes": budget.estimate(Path(sys.argv[1]),
                                                                  reader.memory).data_bytes,
    "format": reader.name}))
"""


def factors(files: list[Path]) -> None:
    rows = []
    for f in files:
        out = subprocess.run([sys.executable, "-c", CHILD, str(f)], capture_output=True,
                             text=True, check=True, cwd="/tmp")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["file"] = f.name
        grow = r["peak_bytes"] - r["base_bytes"]
        r["per_byte"], r["per_event"] = grow / r["data_bytes"], grow / r["events"]
        rows.append(r)
        print(f"{f.name}: {r['format']}, {r['data_bytes'] / 1e6:,.0f} MB, {r['events']:,} "
              f"events; base {r['base_bytes'] / 1e6:,.0f} MB, peak {r['peak_bytes'] / 1e6:,.0f} "
              f"MB; {r['per_byte']:.3f} x bytes, {r['per_event']:,.0f} B/event; "
              f"{r['wall_s']:.1f} s ({r['data_bytes'] / 1e6 / r['wall_s']:,.0f} MB/s), "
              f"CPU {r['cpu_s']:.1f} s", flush=True)
    for fmt in sorted({r["format"] for r in rows}):
        mine = [r for r in rows if r["format"] == fmt]
        print(f"{fmt}: base <= {max(r['base_bytes'] for r in mine) / 1e6:,.0f} MB, per_byte "
              f"<= {max(r['per_byte'] for r in mine):.3f}, per_event <= "
              f"{max(r['per_event'] for r in mine):,.0f}")


def analyze_child(path: Path, budget: str | None) -> dict:
    cmd = [sys.executable, "-m", "rightsize", "analyze", str(path), "--format", "json", "-q",
           "--no-report"]
    if budget:
        cmd += ["--memory-budget", budget]
    t0 = time.perf_counter()
    with open("/tmp/memory_budget.out.json", "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, cwd="/tmp")
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"analyze failed: {err[-2000:]}")
    doc = json.loads(Path("/tmp/memory_budget.out.json").read_text())
    diagnosis = doc.get("diagnosis") or {}
    return {"wall_s": wall, "peak_bytes": usage.ru_maxrss * 1024,
            "window": doc["inputs"][0].get("window"), "steps": doc["steps"]["count"],
            "step_ms": doc["steps"]["mean_ms"], "bound": diagnosis.get("bound"),
            "confidence": diagnosis.get("confidence"),
            "shares_pct": diagnosis.get("shares_pct"), "warnings": err.strip()}


def budget_run(path: Path, budget: str, skip_whole: bool) -> None:
    size = path.stat().st_size
    for label, b in ((("whole", None),) if not skip_whole else ()) + (("budget", budget),):
        r = analyze_child(path, b)
        w = r["window"]
        unit = "time slices" if w and w.get("by") == "time" else "steps"
        where = f"{unit} {w['first_step']}-{w['last_step']} of {w['steps_in_trace']} " \
            f"(estimated whole {w['need_bytes'] / 1e9:.2f} GB, window " \
            f"{w['window_need_bytes'] / 1e9:.2f} GB)" if w else f"all {r['steps']} steps"
        shares = {k: round(v, 1) for k, v in (r["shares_pct"] or {}).items()}
        print(f"{path.name} ({size / 1e9:.2f} GB on disk) {label}"
              f"{' ' + b if b else ''}: {r['wall_s']:.1f} s, peak RSS "
              f"{r['peak_bytes'] / 1e9:.2f} GB; {where}; mean step {r['step_ms']} ms; "
              f"verdict {r['bound']} ({r['confidence']}); shares % {shares}"
              + (f"; stderr: {r['warnings']}" if r["warnings"] else ""), flush=True)


def nsys_steps(out: Path, copies: int, source: Path, steps: bool = True) -> None:
    shutil.copyfile(source, out)
    os.chmod(out, 0o644)
    conn = sqlite3.connect(out)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    tables = [t for t in ACTIVITY if conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]
    lo = min(conn.execute(f'SELECT min(start) FROM "{t}"').fetchone()[0] for t in tables)
    hi = max(conn.execute(f'SELECT max(coalesce("end", start)) FROM "{t}"').fetchone()[0]
             for t in tables)
    period = hi - lo + 1_000_000
    corr = 1 + max(conn.execute(f'SELECT coalesce(max(correlationId), 0) FROM "{t}"').fetchone()[0]
                   for t in tables if "correlationId" in _cols(conn, t))
    tid = conn.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                       "GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    n = 1
    while n < copies:  # double: copies n..2n-1 are copies 0..n-1 shifted by n periods
        for t in tables:
            cols = _cols(conn, t)
            exprs = [f'"{c}" + {n * period}' if c in ("start", "end") else
                     f'"{c}" + {n * corr}' if c == "correlationId" else f'"{c}"' for c in cols]
            names = ", ".join(f'"{c}"' for c in cols)
            conn.execute(f'INSERT INTO "{t}" ({names}) SELECT {", ".join(exprs)} FROM "{t}"')
        n *= 2
        conn.commit()
        print(f"{n} copies, {out.stat().st_size / 1e9:.2f} GB", flush=True)
    if steps:
        conn.executemany(
            "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) "
            "VALUES (?, ?, 59, ?, ?)",
            [(lo + k * period, lo + k * period + (hi - lo), f"step {k}", tid) for k in range(n)])
    conn.commit()
    conn.close()
    print(f"{out}: {n if steps else 'no'} steps, {out.stat().st_size / 1e9:.2f} GB")


def _cols(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("factors")
    f.add_argument("files", type=Path, nargs="+")
    b = sub.add_parser("budget")
    b.add_argument("file", type=Path)
    b.add_argument("--budget", default="2G")
    b.add_argument("--skip-whole", action="store_true", help="only the run within the budget")
    s = sub.add_parser("nsys-steps")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--copies", type=int, default=1024)
    s.add_argument("--source", type=Path, default=SOURCE)
    s.add_argument("--no-steps", action="store_true", help="no NVTX step ranges")
    a = p.parse_args()
    if a.cmd == "factors":
        factors(a.files)
    elif a.cmd == "budget":
        budget_run(a.file, a.budget, a.skip_whole)
    else:
        nsys_steps(a.out, a.copies, a.source, steps=not a.no_steps)


if __name__ == "__main__":
    main()
