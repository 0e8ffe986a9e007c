"""Pieces of the server without a server: names, the gzip counter, compare rows, the store."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from rightsize.serve.compare import Row, compare_rows
from rightsize.serve.store import Store, blob_path
from rightsize.serve.upload import GzipCounter, TooLarge, display_name
from rightsize.serve.worker import summarize


def test_display_name_keeps_the_last_component_as_text() -> None:
    assert display_name("../../etc/passwd") == "passwd"
    assert display_name("C:\\Users\\me\\trace.json.gz") == "trace.json.gz"
    assert display_name("a\x00b\x1b[31mc\u202e.json") == "ab[31mc.json"
    assert display_name("../") == "upload"
    assert display_name("x" * 500) == "x" * 200


def test_gzip_counter_counts_every_member_and_stops_at_the_cap() -> None:
    data = gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 500)
    counter = GzipCounter(limit_bytes=10_000)
    for i in range(0, len(data), 7):  # arrives in small network chunks
        counter.feed(data[i:i + 7])
    assert counter.out_bytes == 1500
    with pytest.raises(TooLarge, match="decompresses to more than"):
        GzipCounter(limit_bytes=1499).feed(data)


def test_compare_rows_from_two_documents() -> None:
    a = {"devices": [{"name": "NVIDIA A100", "primary": True}], "steps": {"mean_ms": 100.0,
         "count": 4}, "diagnosis": {"bound": "memory", "confidence": 0.8, "shares_pct": {
         "compute": 20.0, "memory": 60.0, "host": 20.0}}, "sizing": {"verdict": "right-sized",
         "recommended": "A100"}}
    b = {"devices": [], "steps": {"mean_ms": 80.0, "count": 4},
         "diagnosis": {"bound": "inconclusive", "confidence": None, "shares_pct": {
             "compute": 50.0, "memory": 50.0}}, "sizing": None}
    rows = {r.label: r for r in compare_rows(a, b)}
    assert rows["Device"] == Row("Device", "NVIDIA A100", "CPU", "changed")
    assert rows["Verdict (what bounds the step)"].b == "inconclusive"
    assert rows["Verdict confidence"] == Row("Verdict confidence", "0.80", "—", "", "")
    assert rows["Step time (mean)"] == Row("Step time (mean)", "100.00", "80.00", "-20.0%", "ms")
    assert rows["Share: memory"] == Row("Share: memory", "60.0", "50.0", "-10.0 pt", "%")
    assert rows["Share: host"] == Row("Share: host", "20.0", "—", "", "%")
    assert rows["Sizing verdict"] == Row("Sizing verdict", "right-sized", "—", "changed")


def test_summary_columns() -> None:
    doc = {"devices": [{"name": None, "primary": True}], "steps": {"mean_ms": 5.5},
           "diagnosis": {"bound": "host"}, "sizing": None}
    assert summarize(doc) == {"verdict": "host", "sizing": None, "device": "GPU",
                              "step_ms": 5.5}
    assert summarize({"devices": [], "steps": None, "diagnosis": None})["device"] == "CPU"


def test_store_round_trip_and_filters(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    files = [{"name": "t.json", "sha256": "ab" * 32, "bytes": 3}]
    first = store.create(files, "k1")
    second = store.create([{**files[0], "name": "other.json"}], "k2")
    assert [r["id"] for r in store.runs()] == [second, first]  # newest first
    assert [r["id"] for r in store.runs("other")] == [second]
    assert store.count_active() == 2 and store.active_ids() == [first, second]
    store.mark_running(first)
    store.finish(first, {"verdict": "compute", "device": "CPU", "step_ms": 1.0,
                         "analysis_s": 0.5})
    store.finish(second, {"error": "t.json: not a trace"})
    got = store.get(first)
    assert got is not None and (got["status"], got["verdict"]) == ("done", "compute")
    assert store.find_reusable("k1")["id"] == first  # type: ignore[index]
    assert store.find_reusable("k2") is None  # failed runs are analyzed again
    assert store.blob_in_use("ab" * 32) and not store.blob_in_use("cd" * 32)
    assert store.get("../etc") is None
    assert store.delete(second) and store.runs("other") == []
    with pytest.raises(ValueError):
        blob_path(tmp_path, "../x")


def test_help_lists_serve_without_importing_the_server() -> None:
    code = ("import sys\nfrom rightsize.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('starlette', 'uvicorn', 'python_multipart', 'polars') "
            "if m in sys.modules]\nprint('HEAVY', bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert "HEAVY []" in out.stdout and "serve" in out.stdout, out.stdout + out.stderr
