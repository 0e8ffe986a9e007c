"""Issue 29, 8: every value the readers produce is one the document codec accepts.

The document of every shared trace and of deliberately sparse captures (a Kineto memcpy named
``Memcpy HtoD`` without ``(src -> dst)``, a bare ``Memcpy``, an nsys export whose StringIds
table is empty, a metrics log alone, an ncu CSV alone) is written as JSON, read back by the
codec and written again unchanged; its text and HTML reports render; and the sparse ones are
analyzed through the server (they failed there with ``expected str, found None``).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from rightsize.analyzers.document import Document
from rightsize.pipeline import analyze_paths
from rightsize.reports.render import render
from tests.conftest import SHARED, shared_path
from tests.nsys_handmade import make_export
from tests.serve.serving import Server

SHARED_TRACES = [("traces", "kineto", p.name)
                 for p in sorted((SHARED / "traces" / "kineto").glob("*.json.gz"))] + [
    ("traces", "nsys", "fuser-8fa9ec2-h100-report1.sqlite"),
    ("traces", "nsys", "fuser-ee4fcf3-h200-report1.sqlite"),
    ("traces", "nsys", "extrap-concurrent_example-concurrent.s1-profile1.sqlite"),
    ("traces", "nsys", "extrap-sampled_callchains-ex-gpu.s10.sqlite"),
    ("traces", "ncu", "llmperfopt-dsocr-kernel_0016-gemm-ncu.details.csv"),
    ("traces", "dcgm", "datadog-integrations-core-dcgm-tests-docker-serve-metrics.prom"),
]


def _kineto(memcpy_name: str) -> bytes:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 120},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
         "dur": 100},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
         "ts": 10, "dur": 50, "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "gpu_memcpy", "name": memcpy_name, "pid": 0, "tid": 7, "ts": 70,
         "dur": 10, "args": {"device": 0, "stream": 7, "bytes": 4096, "correlation": 2}},
    ]
    return gzip.compress(json.dumps({"traceEvents": events, "deviceProperties": [
        {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920}]}).encode())


def _nsys_without_strings(path: Path) -> Path:
    make_export(path)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM StringIds")
    return path


SMI_LOG = (b"timestamp, name, index, utilization.gpu [%], utilization.memory [%], "
           b"memory.used [MiB], memory.total [MiB], power.draw [W]\n" + b"".join(
               b"2024/01/01 10:00:0%d.000, NVIDIA H100 80GB HBM3, 0, %d %%, 20 %%, 1000 MiB, "
               b"81559 MiB, 300.00 W\n" % (i, 50 + i) for i in range(6)))


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sparse")
    files = {
        "memcpy-htod-bare.json.gz": _kineto("Memcpy HtoD"),
        "memcpy-no-direction.json.gz": _kineto("Memcpy"),
        "smi.csv": SMI_LOG,
    }
    paths = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        paths[name] = folder / name
    paths["nsys-empty-strings.sqlite"] = _nsys_without_strings(folder / "nsys-empty.sqlite")
    return paths


def _round_trip(path: Path) -> dict:
    doc = analyze_paths([path])
    text = json.dumps(doc, allow_nan=False)
    typed = Document.from_json(json.loads(text))
    assert typed.to_json() == doc  # read back, written again: the same document
    assert render(typed, "text") and "<html" in render(typed, "html")
    return doc


def test_sparse_documents_round_trip(sparse: dict[str, Path]) -> None:
    docs = {name: _round_trip(path) for name, path in sparse.items()}
    memcpy = docs["memcpy-htod-bare.json.gz"]["metrics"]["memcpy"]
    assert [(m["direction"], m["host_memory"], m["bytes"]) for m in memcpy] == \
        [("HtoD", None, 4096)]  # the direction is in the name; the memory kinds are not
    bare = docs["memcpy-no-direction.json.gz"]["metrics"]["memcpy"]
    assert [(m["direction"], m["bytes"]) for m in bare] == [(None, 4096)]
    kernels = docs["nsys-empty-strings.sqlite"]["top_kernels"]
    assert kernels and {k["name"] for k in kernels} == {None}  # lost names stay null
    assert "(name not recorded)" in render(
        Document.from_json(docs["nsys-empty-strings.sqlite"]), "text")


@pytest.mark.shared
@pytest.mark.parametrize("parts", SHARED_TRACES, ids=[p[-1][:48] for p in SHARED_TRACES])
def test_shared_documents_round_trip(parts: tuple[str, ...]) -> None:
    _round_trip(shared_path(*parts))


def test_sparse_captures_are_analyzed_by_the_server(server: Server,
                                                    sparse: dict[str, Path]) -> None:
    for name, path in sparse.items():
        run = server.wait(server.upload((name, path.read_bytes())).json()["id"])
        assert run["status"] == "done", (name, run["error"])
    smi = server.request("GET", "/api/runs?q=smi.csv").json()["runs"][0]
    assert smi["device"] is None  # no device list in a metrics log's document: not "CPU"
