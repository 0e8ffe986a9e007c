"""Readers plug in: the registry's order and names, and a new reader (a module plus one registry
entry) read end to end by the loader, eagerly or deferred until a file of its kind."""

from __future__ import annotations

import importlib
import sqlite3
import subprocess
import sys

import pytest

from rightsize.errors import InputError
from rightsize.traces import kineto, loader, metrics_logs, nccl_tests, ncu, nsys_db, registry
from rightsize.traces.readers import Deferred
from tests.toy_readers import TOY_MAGIC, toy_fixture  # noqa: F401 - the fixture "toy"
from tests.tracebuilder import two_step_trace

# The "supported:" line as users have seen it since the formats were added (kept verbatim).
SUPPORTED = ("PyTorch Profiler/Kineto JSON (.json, .json.gz), Nsight Systems SQLite "
             "(nsys export --type sqlite), Nsight Compute CSV (ncu --csv), nvidia-smi "
             "--query-gpu CSV, dcgm-exporter scrape or dcgmi dmon log, nccl-tests / rccl-tests "
             "output (all_reduce_perf ...), a directory of traces, or a run directory")

def _toy_file(tmp_path):
    path = tmp_path / "util.log"
    path.write_text(f"{TOY_MAGIC}\n1000,0,50\n2000,0,75.5\n")
    return path


def _kineto_file(tmp_path):
    return two_step_trace().write(tmp_path / "rank0.json")


def _register(monkeypatch, reader):
    """The second of the two places a new reader touches: its entry in the registry list."""
    monkeypatch.setattr(registry, "READERS", (*registry.READERS, reader))


def test_registry_order_names_and_supported_line():
    assert [r.name for r in registry.READERS] == ["nsys", "ncu", "metrics-log", "nccl-tests",
                                                  "kineto"]
    assert registry.READERS[1:] == (ncu.READER, metrics_logs.READER, nccl_tests.READER,
                                    kineto.READER)
    assert registry.SUPPORTED == loader.SUPPORTED == SUPPORTED
    assert all(r.described in SUPPORTED for r in registry.READERS)


def test_deferred_nsys_entry_repeats_its_reader():
    from rightsize.traces import nsys  # the test may import it; the registry does not

    fields = ("name", "described", "contributes", "memory", "suffixes")
    assert [getattr(registry.NSYS, f) for f in fields] == [getattr(nsys.READER, f)
                                                            for f in fields]
    assert registry.NSYS.magic == nsys_db.SQLITE_MAGIC


def test_detection_goes_by_registry_order(tmp_path, monkeypatch):
    """A file two readers would take (ncu's header inside a JSON array) goes to the first."""
    path = tmp_path / "both.json"
    path.write_text('[\n"ID","Kernel Name"\n]\n')
    assert loader.detect(path) is ncu.READER
    monkeypatch.setattr(registry, "READERS", tuple(r for r in registry.READERS if r is not
                                                   ncu.READER))
    assert loader.detect(path) is kineto.READER


@pytest.mark.parametrize(("content", "problem"), [
    (b"", "the file is empty"),
    (b"hello\n", f"not a supported format; supported: {SUPPORTED}"),
])
def test_unknown_and_empty_files(tmp_path, content, problem):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        loader.load([path])
    assert str(err.value) == f"{path}: {problem}"


def test_sqlite_that_is_not_nsys_is_refused(tmp_path):
    path = tmp_path / "plain.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    with pytest.raises(InputError) as err:
        loader.detect(path)
    assert str(err.value) == (f"{path}: an SQLite file that is not an Nsight Systems export; "
                              f"supported: {SUPPORTED}")


def test_trace_entry_keys_keep_their_order(tmp_path):
    inputs = loader.load([_kineto_file(tmp_path)])
    assert list(inputs.described[0]) == ["path", "format", "bytes", "rank", "events"]
    assert inputs.described[0]["format"] == "kineto"


def test_a_new_reader_is_a_module_and_one_registry_entry(tmp_path, monkeypatch, toy):
    _register(monkeypatch, importlib.import_module(toy).READER)
    lines: list[str] = []
    inputs = loader.load([_toy_file(tmp_path), _kineto_file(tmp_path)], progress=lines.append)
    entry = inputs.described[0]
    assert list(entry) == ["path", "format", "bytes", "samples", "columns"]
    assert (entry["format"], entry["samples"]) == ("toy", 2)
    assert inputs.gpu_samples is not None
    assert inputs.gpu_samples["gpu_util_pct"].to_list() == [50.0, 75.5]
    assert inputs.gpu_samples["source"].to_list() == ["toy", "toy"]
    assert len(inputs.traces) == 1 and inputs.described[1]["format"] == "kineto"
    assert "reading [1/2] util.log: parsing" in lines
    (tmp_path / "empty.log").write_text(f"{TOY_MAGIC}\n")
    with pytest.raises(InputError, match="a toy log without samples$"):
        loader.load([tmp_path / "empty.log"])


def test_a_deferred_reader_is_imported_for_its_files_only(tmp_path, monkeypatch, toy):
    _register(monkeypatch, Deferred(name="toy", described="toy GPU utilization CSV",
                                    module=toy, magic=TOY_MAGIC.encode(), contributes="samples",
                                    memory=None, suffixes=(".log",)))
    loader.load([_kineto_file(tmp_path)])
    assert toy not in sys.modules
    inputs = loader.load([_toy_file(tmp_path)])
    assert toy in sys.modules and inputs.described[0]["format"] == "toy"


def test_sqlite3_and_nsys_are_imported_for_sqlite_files_only(tmp_path):
    trace = _kineto_file(tmp_path)
    code = ("import sys\nfrom rightsize.traces.loader import load\n"
            f"load([{str(trace)!r}])\n"
            "print(sorted(m for m in ('sqlite3', 'rightsize.traces.nsys') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.stdout.strip() == "[]", out.stderr
