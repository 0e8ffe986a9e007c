#!/usr/bin/env python3
"""What the fleet view costs ``rightsize serve``: the server's RSS and the ``/fleet`` page's time.

Starts ``rightsize serve`` on 127.0.0.1 (a fresh data directory, ``--workers 1``), samples the
server process's RSS (psutil; the server alone, not its analysis workers) once it answers,
uploads ``--runs`` distinct traces one after another (the test trace builder's two-step trace,
each recorded on another day with its own bytes), waits for each, then requests ``/fleet``
``--pages`` times. Reports (JSON on stdout): RSS idle after start, after the runs, after the
pages; the fleet table's rows; the page's time (median, max) and size.

Usage::

    python benchmarks/serve_fleet.py --runs 50 --pages 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fleet.jobs import GPUS, trace  # the repo's own trace builder
from tests.serve.serving import Server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pages", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data").start()
        try:
            assert server.proc is not None
            proc = psutil.Process(server.proc.pid)
            time.sleep(1.0)
            idle = proc.memory_info().rss
            for i in range(args.runs):
                doc = trace(day=i % 14, scale=1.0 + (i % 4) * 0.5, gpu=GPUS[i % 2], tag=f"{i}")
                reply = server.upload((f"job{i:04d}.pt.trace.json", json.dumps(doc).encode()))
                run = server.wait(reply.json()["id"], timeout_s=120)
                if run["status"] != "done":
                    print(f"run {i}: {run['error']}", file=sys.stderr)
                    return 1
            after_runs = proc.memory_info().rss
            times, size = [], 0
            for _ in range(args.pages):
                start = time.perf_counter()
                page = server.request("GET", "/fleet")
                times.append(time.perf_counter() - start)
                size = len(page.body)
                if page.status != 200:
                    print(f"/fleet: {page.status}", file=sys.stderr)
                    return 1
            after_pages = proc.memory_info().rss
            from rightsize.fleet.table import FleetTable

            rows = FleetTable(server.data_dir / "fleet").raw().collect().height
        finally:
            server.stop()
    mb = 1e6
    print(json.dumps({"runs": args.runs, "rows": rows,
                      "rss_mb": {"idle": round(idle / mb, 1),
                                 "after_runs": round(after_runs / mb, 1),
                                 "after_pages": round(after_pages / mb, 1)},
                      "page_s": {"median": round(statistics.median(times), 3),
                                 "max": round(max(times), 3)},
                      "page_bytes": size}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
