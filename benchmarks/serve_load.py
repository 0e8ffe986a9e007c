#!/usr/bin/env python3
"""Load test of ``rightsize serve`` on loopback: many concurrent uploads of a large trace.

Builds one Kineto trace of about ``--size-mb`` (``make_big_trace.py`` replicating a shared HTA
trace, whole copies of its body), starts ``rightsize serve`` on 127.0.0.1 in a subprocess with a fresh data directory,
then uploads ``--uploads`` variants of it at once (each is the trace plus ``i + 1`` trailing
spaces: valid JSON with its own hash, so dedup cannot shortcut any of them) from as many
threads, streaming each body from disk. While the uploads are received the server process's
RSS (``/proc``, via psutil; the server's own process, not its analysis workers, which start
later) is sampled every 20 ms. Then it waits until every run is done or failed.

With ``--slow-clients N`` an attack runs beside the uploads for as long as they last (issue
29): N loopback connections, half sending a request head one byte a second (slowloris), half
an upload body one byte a second (holding an upload slot), each reopened as soon as the server
cuts it. Uploads answered 503 retry after ``Retry-After``, counted.

With ``--attacks bombs,names,slow-readers,smuggle`` issue 40's attacks run beside them
(:mod:`serve_attacks`: gzip bombs, 20 MB names, slow readers of a 40 MB stored document,
request smuggling) from before the first upload until every upload is analyzed. A prober
process asks /healthz every 50 ms throughout, with or without attacks (median, p99, max and
the count over 100 ms, while uploading and while analyzing).

Reports (JSON on stdout, and ``--out``): server RSS before, peak while receiving, peak over
the whole run and after all runs were analyzed; upload wall time, uploads per second and
throughput; per-upload
latency (p50, p99, from the first try to the 201, retries included); 503 retries; the attack's
connections opened and cut; the time until all runs were analyzed, the per-run analysis
seconds (median, max), and how many runs ended done. Fails (exit 1) when a run is not done or
the RSS growth reaches ``--rss-limit-mb`` (100). Also: the load average before and after,
the time it ended and the command. The work folder is removed unless ``--keep``.

Usage::

    python benchmarks/serve_load.py --shared /work/shared --out /tmp/serve_load.json
    python benchmarks/serve_load.py --shared /work/shared --slow-clients 16
    python benchmarks/serve_load.py --shared /work/shared --attacks bombs,names,slow-readers,smuggle
    python benchmarks/serve_load.py --shared /work/shared --attacks bombs,names,slow-readers,smuggle --boost 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_attacks

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


def upload(port: int, trace: Path, padding: int, result: dict[str, Any],
           deadline: float) -> None:
    """POST the trace (and ``padding`` spaces), retrying 503s after Retry-After until
    ``deadline``; the last answer, the tries and the seconds from the first try."""
    start = time.perf_counter()
    tries = 0
    while True:
        tries += 1
        one: dict[str, Any] = {}
        try:
            _upload_once(port, trace, padding, one)
        except OSError as exc:  # cut while sending: the server refused early
            one = {"status": 0, "reply": {"error": str(exc)}, "retry_after": 1}
        if one["status"] != 503 and one["status"] != 0 or time.monotonic() > deadline:
            break
        time.sleep(float(one.get("retry_after") or 1))
    result.update(one, tries=tries, latency_s=time.perf_counter() - start)


def _upload_once(port: int, trace: Path, padding: int, result: dict[str, Any]) -> None:
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
                  upload_s=time.perf_counter() - start, retry_after=resp.getheader("retry-after"))
    conn.close()


class SlowClients:
    """``n`` slow connections kept open against the server until :meth:`stop` (see the module
    docstring): each sends one byte a second and is reopened when the server cuts it."""

    def __init__(self, port: int, n: int) -> None:
        self.port, self.n = port, n
        self.opened = self.cut = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                         for i in range(n)]

    def start(self) -> SlowClients:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)

    def _client(self, i: int) -> None:
        head = f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
        body_head = (head + "Content-Type: multipart/form-data; boundary=b\r\n"
                     "Content-Length: 100000000\r\n\r\n--b\r\nContent-Disposition: "
                     "form-data; name=\"file\"; filename=\"slow.json\"\r\n\r\n{")
        first = head if i % 2 == 0 else body_head  # slowloris head, or a trickling body
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    self.opened += 1
                    sock.sendall(first.encode())
                    while not self._stop.wait(1.0):
                        sock.sendall(b"a" if i % 2 == 0 else b" ")
            except OSError:
                self.cut += 1
                self._stop.wait(0.1)


def get(port: int, path: str) -> Any:
    conn = HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    reply = json.loads(conn.getresponse().read())
    conn.close()
    return reply


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = round(os.getloadavg()[0], 1)
    work = Path(tempfile.mkdtemp(prefix="serve-load-"))
    trace = build_trace(args.shared, args.size_mb, work / "trace.json")
    port = free_port()
    log = open(work / "server.log", "w")  # noqa: SIM115 - closed below
    server = serve_attacks.start_boosted(
        [sys.executable, "-m", "rightsize", "serve", "--port", str(port), "--data-dir",
         str(work / "data"), "--workers", str(args.workers), "--max-upload-mb", "200",
         "--max-concurrent-uploads", str(args.uploads), "--max-queued", str(args.uploads)],
        args.boost, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                get(port, "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        proc = psutil.Process(server.pid)
        seed_id = serve_attacks.seed(port, work / "data") if args.attacks else ""
        probe = serve_attacks.Prober(port, args.boost)
        rss_before = proc.memory_info().rss
        results: list[dict[str, Any]] = [{} for _ in range(args.uploads)]
        give_up = time.monotonic() + args.timeout_s
        threads = [threading.Thread(target=upload, args=(port, trace, i + 1, results[i],
                                                         give_up))
                   for i in range(args.uploads)]
        attack = SlowClients(port, args.slow_clients).start() if args.slow_clients else None
        attacks = serve_attacks.Attacks(port, seed_id, args.attacks).start() \
            if args.attacks else None
        if attack is not None or attacks is not None:
            time.sleep(2.0)  # the attack holds its connections before the first upload
        peak = rss_before
        start = time.perf_counter()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.02)
        upload_wall_s = time.perf_counter() - start
        uploaded_at = time.time()
        ids = [r["reply"]["id"] for r in results if r.get("status") == 201]
        # the attacks and the prober go on while the uploads are analyzed
        runs: list[dict[str, Any]] = []
        peak_all = peak
        deadline = time.monotonic() + args.timeout_s
        while time.monotonic() < deadline:
            runs = [get(port, f"/api/runs/{i}?analysis=0") for i in ids]
            if all(r["status"] in ("done", "failed") for r in runs):
                break
            for _ in range(25):
                peak_all = max(peak_all, proc.memory_info().rss)
                time.sleep(0.02)
        all_analyzed_s = time.perf_counter() - start
        if attack is not None:
            attack.stop()
        attacked = attacks.stop() if attacks is not None else {}
        healthz = probe.stop(split=uploaded_at)
        survived = serve_attacks.seed_survived(port, seed_id) if seed_id else None
        time.sleep(1.0)
        rss_after = proc.memory_info().rss
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        size = trace.stat().st_size
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)  # the trace and 20 stored copies of it
    analysis = [r["analysis_s"] for r in runs if r.get("analysis_s") is not None]
    latency = sorted(r["latency_s"] for r in results if r.get("status") == 201)
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
        "server_rss_peak_mb": round(peak_all / 2**20, 1),
        "server_rss_after_mb": round(rss_after / 2**20, 1),
        "upload_wall_s": round(upload_wall_s, 2),
        "uploads_per_s": round(len(ids) / upload_wall_s, 2),
        "upload_mb_per_s": round(size * args.uploads / 2**20 / upload_wall_s, 1),
        "upload_latency_s_p50": round(_quantile(latency, 0.5), 2) if latency else None,
        "upload_latency_s_p99": round(_quantile(latency, 0.99), 2) if latency else None,
        "retries_503": sum(r.get("tries", 1) - 1 for r in results),
        "slow_clients": args.slow_clients,
        "slow_connections_opened": attack.opened if attack else 0,
        "slow_connections_cut": attack.cut if attack else 0,
        "all_analyzed_s": round(all_analyzed_s, 2),
        "analysis_s_median": round(statistics.median(analysis), 2) if analysis else None,
        "analysis_s_max": round(max(analysis), 2) if analysis else None,
        "attacks": attacked,
        "seed_run_survived_smuggling": survived,
        "healthz_while_uploading": healthz["before"],
        "healthz_while_analyzing": healthz["after"],
        "load_average_1m_5m_15m_after": [round(x, 1) for x in os.getloadavg()],
        "load_average_1m_before": load_before,
        "cpus": os.cpu_count(),
        "boost": args.boost,
        "finished_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(["python", "benchmarks/serve_load.py", *sys.argv[1:]]),
    }


def _quantile(values: list[float], q: float) -> float:
    """The q-quantile of sorted ``values``, linear between the closest ranks."""
    at = (len(values) - 1) * q
    low = int(at)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (at - low)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", type=Path, required=True, help="the shared data directory")
    p.add_argument("--size-mb", type=float, default=50.0, help="trace size, MB = 1e6 bytes")
    p.add_argument("--uploads", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--rss-limit-mb", type=float, default=100.0)
    p.add_argument("--slow-clients", type=int, default=0,
                   help="slow connections (half slowloris heads, half trickling bodies) "
                        "kept open beside the uploads")
    p.add_argument("--attacks", type=lambda s: tuple(a for a in s.split(",") if a),
                   default=(), help=f"issue 40's attacks beside the uploads: "
                                    f"{','.join(serve_attacks.ATTACKS)}")
    p.add_argument("--boost", type=int, default=0,
                   help="root only: the server and the /healthz prober this many steps of "
                        "niceness (and kernel scheduling group) above the other processes, "
                        "as the serve tests run them")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--keep", action="store_true",
                   help="keep the work folder (trace, data directory, server log)")
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
