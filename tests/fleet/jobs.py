"""Small fleets for the fleet tests: Kineto traces made with the test trace builder.

Each job is the hand-built two-step trace of tests/tracebuilder.py (its numbers are worked out
in tests/analyzers/test_metrics.py), varied by job: the day it was recorded, a time scale, the
GPU. Bad inputs are files a reader refuses, each with the loader's one-line reason.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.tracebuilder import BASE_NS, H100, TraceBuilder, two_step_trace

DAY_NS = 86_400 * 10**9
A100 = {**H100, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "numSms": 108}
GPUS = (H100, A100)


def trace(day: int = 0, scale: float = 1.0, gpu: dict[str, Any] = H100,
          rank: int | None = None, world: int | None = None,
          tag: str | None = None) -> dict[str, Any]:
    """The two-step trace recorded ``day`` days after BASE_NS, every time times ``scale``
    (``tag``: a top-level key that makes the bytes, not the analysis, differ)."""
    b: Any = TraceBuilder(base_ns=BASE_NS + day * DAY_NS, devices=[gpu])
    two_step_trace(b)
    for e in b.events:
        if "dur" in e:
            e["dur"] = e["dur"] * scale
        e["ts"] = e["ts"] * scale
    if rank is None:
        b.extra.pop("distributedInfo", None)
    else:
        b.extra["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    if tag is not None:
        b.extra["trace_id"] = tag
    doc: dict[str, Any] = b.document()
    return doc


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc).encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


def fleet(root: Path, n: int, days: int = 3) -> list[Path]:
    """``n`` single-trace jobs under ``root/team-*/``, spread over ``days`` days."""
    out = []
    for i in range(n):
        team = "vision" if i % 2 == 0 else "nlp"
        out.append(write(root / f"team-{team}" / f"job{i:03d}.pt.trace.json.gz",
                         trace(day=i % days, scale=1.0 + (i % 4) * 0.5, gpu=GPUS[i % 2],
                               tag=f"job{i}")))
    return out


BAD = {  # file name -> (content, the reason's end)
    "empty.json": (b"", "the file is empty"),
    "broken.json.gz": (b"\x1f\x8b\x08\x00garbage", "corrupt or truncated gzip data"),
    # a .csv that is no table (a well-formed one that is no GPU log is not an input at all)
    "notes.csv": (b"\xff\xfe\x00garbage\x00", "not a supported format"),
}


def bad_inputs(root: Path) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    for name, (data, _) in BAD.items():
        (root / name).write_bytes(data)
    return {name: why for name, (_, why) in BAD.items()}


def rightsize_popen(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The real CLI in its own process group (so the test can kill it and its workers)."""
    return subprocess.Popen([sys.executable, "-m", "rightsize", *map(str, args)], cwd=REPO,
                            env=dict(os.environ, PYTHONWARNINGS="ignore", **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process this test started and the workers in its group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
