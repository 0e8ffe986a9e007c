"""Issue 40's attacks, run beside ``serve_load.py``'s uploads (``--attacks``), and a /healthz
prober.

Four attacks, each a thread that repeats it for as long as the load lasts:

- ``bombs``: a 1 MB gzip of 1 GiB of spaces, uploaded again and again (the server inflates
  up to its cap, off the event loop, and answers 413);
- ``names``: a 20 kB gzip Kineto trace naming its device with 20 MB of characters, each with
  its own bytes (analyzed: the name is cut at 512 characters by the readers);
- ``slow-readers``: 8 clients reading a 40 MB stored analysis document a byte every 2 s
  (reopened when the server cuts them);
- ``smuggle``: requests with both Content-Length and Transfer-Encoding whose chunked body
  hides a DELETE of a seed run (refused with 400 and closed; the seed run must survive).

:class:`Prober` asks /healthz every 50 ms from a process of its own and reports the latencies.
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
import tempfile
import threading
import time
import uuid
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serve.serving import PROBE, smuggled_delete, start_boosted

ATTACKS = ("bombs", "names", "slow-readers", "smuggle")
class Prober:
    def __init__(self, port: int, boost: int = 0) -> None:
        self.out = Path(tempfile.mkstemp(prefix="healthz-", suffix=".txt")[1])
        self.proc = start_boosted([sys.executable, "-c", PROBE, str(port), str(self.out), "0.05"],
                                  boost)

    def stop(self, split: float | None = None) -> dict[str, Any]:
        """The latencies (median, p99, max, how many over 100 ms): all of them, or with
        ``split`` (a ``time.time()``) those before it and those from it on."""
        self.proc.terminate()
        self.proc.wait(timeout=10)
        rows = [line.split() for line in self.out.read_text().splitlines()]
        probes = [(float(row[0]), float(row[1])) for row in rows if len(row) == 3]
        self.out.unlink(missing_ok=True)
        if split is None:
            return latencies([ms for _, ms in probes])
        return {"before": latencies([ms for t, ms in probes if t < split]),
                "after": latencies([ms for t, ms in probes if t >= split])}


def latencies(values: list[float]) -> dict[str, float | int]:
    """Median, p99, max and the count over 100 ms of probe latencies (ms)."""
    ms = sorted(values)
    if not ms:
        return {"probes": 0}
    return {"probes": len(ms), "median_ms": round(ms[len(ms) // 2], 1),
            "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
            "max_ms": round(ms[-1], 1), "over_100_ms": sum(m > 100 for m in ms)}


def _post(port: int, name: str, data: bytes) -> int:
    boundary = uuid.uuid4().hex
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{name}"\r\n\r\n').encode() + data + f"\r\n--{boundary}--\r\n".encode()
    conn = HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/api/runs", body, {
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        reply = conn.getresponse()
        reply.read()
        return reply.status
    finally:
        conn.close()


def _trace(device: str) -> bytes:
    events = [{"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0,
               "tid": 7, "ts": s * 100, "dur": 50,
               "args": {"device": 0, "stream": 7, "correlation": s + 1}} for s in range(3)]
    doc = {"traceEvents": events, "deviceProperties": [
        {"id": 0, "name": device, "totalGlobalMem": 85899345920, "computeMajor": 8,
         "computeMinor": 0, "numSms": 108}]}
    return gzip.compress(json.dumps(doc).encode(), compresslevel=9)


def seed(port: int, data_dir: Path) -> str:
    """A finished run whose stored document is made 40 MB (what an older server wrote); its
    id. The slow readers read it; the smuggled DELETE aims at it."""
    boundary = uuid.uuid4().hex
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="seed.json.gz"\r\n\r\n').encode() + _trace("NVIDIA A100-SXM4-80GB") \
        + f"\r\n--{boundary}--\r\n".encode()
    conn = HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/api/runs", body,
                 {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    run_id = json.loads(conn.getresponse().read())["id"]
    conn.close()
    while True:
        conn = HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", f"/api/runs/{run_id}?analysis=0")
        status = json.loads(conn.getresponse().read())["status"]
        conn.close()
        if status in ("done", "failed"):
            break
        time.sleep(0.2)
    path = data_dir / "runs" / run_id / "analysis.json"
    doc = json.loads(path.read_text())
    doc["padding"] = ["x" * 100] * 400_000
    path.write_text(json.dumps(doc))
    return run_id


class Attacks:
    """The chosen attacks, each repeated on a thread until :meth:`stop`; counts of what each
    did."""

    def __init__(self, port: int, seed_id: str, which: tuple[str, ...]) -> None:
        self.port, self.seed_id = port, seed_id
        self.counts: dict[str, dict[str, int]] = {a: {} for a in which}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=getattr(self, "_" + a.replace("-", "_")),
                                          daemon=True) for a in which
                         if a != "slow-readers"]
        if "slow-readers" in which:
            self._threads += [threading.Thread(target=self._slow_reader, daemon=True)
                              for _ in range(8)]

    def start(self) -> Attacks:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> dict[str, dict[str, int]]:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        return self.counts

    def _count(self, attack: str, outcome: str) -> None:
        c = self.counts[attack]
        c[outcome] = c.get(outcome, 0) + 1

    def _bombs(self) -> None:
        member = gzip.compress(b" " * (1 << 20), compresslevel=9, mtime=0)
        bomb = member * 1024  # 1 GiB of spaces, one member per MiB, about 1 MB
        while not self._stop.is_set():
            self._count("bombs", str(_post(self.port, "bomb.json.gz", bomb)))

    def _names(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            data = _trace(f"NVIDIA {n:06d}" + "x" * 20_000_000)
            self._count("names", str(_post(self.port, f"name{n}.json.gz", data)))
            self._stop.wait(1.0)

    def _slow_reader(self) -> None:
        request = (f"GET /api/runs/{self.seed_id} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}"
                   "\r\n\r\n").encode()
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                    s.sendall(request)
                    self._count("slow-readers", "opened")
                    while not self._stop.is_set() and s.recv(1):
                        self._stop.wait(2.0)
                    if not self._stop.is_set():
                        self._count("slow-readers", "cut")
            except OSError:
                self._count("slow-readers", "cut")

    def _smuggle(self) -> None:
        request = smuggled_delete(self.port, self.seed_id)
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                    s.sendall(request)
                    answer = b""
                    while chunk := s.recv(4096):
                        answer += chunk
                self._count("smuggle", answer.split(b" ", 2)[1].decode() if answer else "0")
            except OSError:
                self._count("smuggle", "error")
            self._stop.wait(0.2)


def seed_survived(port: int, seed_id: str) -> bool:
    conn = HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"/api/runs/{seed_id}?analysis=0")
    ok = conn.getresponse().status == 200
    conn.close()
    return ok


def summary(counts: dict[str, Any]) -> str:
    return json.dumps(counts, sort_keys=True)
