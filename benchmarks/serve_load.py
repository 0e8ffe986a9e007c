#!/usr/bin/env python3
"""Load test of ``rightsize serve`` on loopback: many concurrent uploads of a large trace.

Builds one Kineto trace of about ``--size-mb`` (``make_big_trace.py`` replicating a shared HTA
trace, whole copies of its body), starts ``rightsize serve`` on 127.0.0.1 in a subprocess with a fresh data directory,
then uploads ``--uploads`` variants of it at once (each is the trace plus ``i + 1`` trailing
spaces: valid JSON with its own hash, so dedup cannot shortcut any of them) from as many
threads, streaming each body from disk. While the uploads are received the server process's
RSS (``/proc``, via psutil; the server's own process, not its analysis workers, which start
later) is sampled every 20 ms. Then it waits until every run is done or failed.

Reports (JSON on stdout, and ``--out``): server RSS before and peak while receiving and their
difference, upload wall time and throughput, the time until all runs were analyzed, the
per-run analysis seconds (median, max), and how many runs ended done. Fails (exit 1) when a run
is not done or the RSS growth reaches ``--rss-limit-mb`` (100).

Usage::

    python benchmarks/serve_load.py --shared /work/shared --out /tmp/serve_load.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
SOURCE = ("traces", "kineto", "hta-trace_diff-control-control.json.gz")
CHUNK = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_trace(shared: Path, size_mb: float, out: Path) -> Path:
    subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), "--source",
                    str(shared.joinpath(*SOURCE)), "--size-gb", str(size_mb / 1000),
                    "--out", str(out)], check=True, stdout=subprocess.DEVNULL, timeout=300)
    return out


def upload(port: int, trace: Path, padding: int, result: dict[str, Any]) -> None:
    """POST the trace plus ``padding`` spaces as one multipart file, streamed from disk."""
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"load-{padding}.json\"\r\n\r\n").encode()
    tail = b" " * padding + f"\r\n--{boundary}--\r\n".encode()

    def body():
        yield head
        with open(trace, "rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk
        yield tail

    length = len(head) + trace.stat().st_size + len(tail)
    conn = HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/api/runs", body=body(), headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(length)}, encode_chunked=False)
    resp = conn.getresponse()
    result.update(status=resp.status, reply=json.loads(resp.read()),
                  upload_s=time.perf_counter() - start)
    conn.close()


def get(port: int, path: str) -> Any:
    conn = HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    reply = json.loads(conn.getresponse().read())
    conn.close()
    return reply


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="serve-load-"))
    trace = build_trace(args.shared, args.size_mb, work / "trace.json")
    port = free_port()
    log = open(work / "server.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "rightsize", "serve", "--port", str(port), "--data-dir",
         str(work / "data"), "--workers", str(args.workers), "--max-upload-mb", "200",
         "--max-concurrent-uploads", str(args.uploads), "--max-queued", str(args.uploads)],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                get(port, "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        proc = psutil.Process(server.pid)
        rss_before = proc.memory_info().rss
        results: list[dict[str, Any]] = [{} for _ in range(args.uploads)]
        threads = [threading.Thread(target=upload, args=(port, trace, i + 1, results[i]))
                   for i in range(args.uploads)]
        peak = rss_before
        start = time.perf_counter()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.02)
        upload_wall_s = time.perf_counter() - start
        ids = [r["reply"]["id"] for r in results if r.get("status") == 201]
        runs: list[dict[str, Any]] = []
        deadline = time.monotonic() + args.timeout_s
        while time.monotonic() < deadline:
            runs = [get(port, f"/api/runs/{i}?analysis=0") for i in ids]
            if all(r["status"] in ("done", "failed") for r in runs):
                break
            time.sleep(0.5)
        all_analyzed_s = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    size = trace.stat().st_size
    analysis = [r["analysis_s"] for r in runs if r.get("analysis_s") is not None]
    return {
        "trace_bytes": size,
        "uploads": args.uploads,
        "workers": args.workers,
        "accepted_201": len(ids),
        "done": sum(r["status"] == "done" for r in runs),
        "failed": [r["error"] for r in runs if r["status"] == "failed"],
        "server_rss_before_mb": round(rss_before / 2**20, 1),
        "server_rss_peak_receiving_mb": round(peak / 2**20, 1),
        "server_rss_growth_mb": round((peak - rss_before) / 2**20, 1),
        "upload_wall_s": round(upload_wall_s, 2),
        "upload_mb_per_s": round(size * args.uploads / 2**20 / upload_wall_s, 1),
        "all_analyzed_s": round(all_analyzed_s, 2),
        "analysis_s_median": round(statistics.median(analysis), 2) if analysis else None,
        "analysis_s_max": round(max(analysis), 2) if analysis else None,
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", type=Path, required=True, help="the shared data directory")
    p.add_argument("--size-mb", type=float, default=50.0, help="trace size, MB = 1e6 bytes")
    p.add_argument("--uploads", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--rss-limit-mb", type=float, default=100.0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    figures = run(args)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    ok = figures["done"] == args.uploads and figures["server_rss_growth_mb"] < args.rss_limit_mb
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
