"""The fast paths for Nsight Systems exports give exactly the row-by-row reader's frames.

Two fast paths: the optional ADBC reader, and the standard-library one where SQLite writes
CSV chunks that polars parses (:mod:`rightsize.traces.nsys_sqltext`); the slow path fetches
Python tuples. Compared on every shared export and on the hand-made one.
"""

from __future__ import annotations

import pytest

from rightsize.traces import nsys as nsys_module
from rightsize.traces import nsys_adbc, nsys_db, nsys_sqltext
from rightsize.traces.nsys import read_nsys
from tests.conftest import shared_path
from tests.nsys_handmade import make_export

FRAMES = ("kernels", "transfers", "runtime", "cpu_ops", "gpu_annotations", "steps", "memory",
          "flows", "syncs", "windows", "devices")


def exports():
    return sorted(shared_path("traces", "nsys").glob("*.sqlite"))


@pytest.mark.shared
@pytest.mark.skipif(not nsys_adbc.available(), reason="rightsize[fast-sqlite] not installed")
@pytest.mark.parametrize("index", range(4))
def test_adbc_frames_equal_stdlib_frames(index, monkeypatch):
    files = exports()
    if index >= len(files):
        pytest.skip("fewer shared exports")
    fast = read_nsys(files[index])
    served = []
    real = nsys_adbc.FastReader.frame
    monkeypatch.setattr(nsys_adbc.FastReader, "frame",
                        lambda self, sql, schema: served.append(sql) or real(self, sql, schema))
    read_nsys(files[index])
    assert served  # the fast path was taken
    monkeypatch.setattr(nsys_adbc, "available", lambda: False)
    slow = read_nsys(files[index])
    _assert_same_frames(fast, slow)


def _assert_same_frames(fast, slow):
    for name in FRAMES:
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.schema == b.schema, name
        assert a.equals(b), name


def _csv_against_rows(path, monkeypatch):
    monkeypatch.setattr(nsys_adbc, "available", lambda: False)
    served = []
    real = nsys_sqltext.read_table

    def spy(*args, **kwargs):
        df = real(*args, **kwargs)
        served.append((args[1], df is not None))
        return df

    monkeypatch.setattr(nsys_sqltext, "read_table", spy)
    fast = read_nsys(path)
    assert served
    assert all(ok for _, ok in served), served  # every big table went through CSV
    monkeypatch.setattr(nsys_sqltext, "read_table", lambda *a, **k: None)
    _assert_same_frames(fast, read_nsys(path))


@pytest.mark.shared
@pytest.mark.parametrize("index", range(4))
def test_stdlib_csv_frames_equal_row_frames(index, monkeypatch):
    files = exports()
    if index >= len(files):
        pytest.skip("fewer shared exports")
    _csv_against_rows(files[index], monkeypatch)


@pytest.mark.parametrize("enums", [True, False])
def test_stdlib_csv_frames_equal_row_frames_hand_made(tmp_path, monkeypatch, enums):
    _csv_against_rows(make_export(tmp_path / "h.sqlite", enums=enums), monkeypatch)


def test_without_the_extra_the_reader_says_none(tmp_path):
    reader = nsys_adbc.FastReader(tmp_path / "absent.sqlite")
    assert reader.frame("SELECT 1", {"x": __import__("polars").Int64()}) is None
    reader.close()


@pytest.mark.shared
@pytest.mark.skipif(not nsys_adbc.available(), reason="rightsize[fast-sqlite] not installed")
def test_kernels_on_a_second_thread_change_nothing(monkeypatch):
    files = exports()
    if not files:
        pytest.skip("no shared exports")
    monkeypatch.setattr(nsys_module, "_cpus", lambda: 2)
    pools = []
    real_pool = nsys_module.ThreadPoolExecutor
    monkeypatch.setattr(nsys_module, "ThreadPoolExecutor",
                        lambda **kw: pools.append(kw) or real_pool(**kw))
    threaded = read_nsys(files[-1])
    assert pools == [{"max_workers": 1}]  # the kernel table went to the second thread
    monkeypatch.setattr(nsys_module, "_cpus", lambda: 1)
    _assert_same_frames(threaded, read_nsys(files[-1]))
    assert len(pools) == 1  # one CPU: no second thread


def test_standard_library_path_reads_on_one_thread(tmp_path, monkeypatch):
    # SQLite's text becomes Python strings under the GIL there: a second thread cost 15%.
    monkeypatch.setattr(nsys_adbc, "available", lambda: False)
    monkeypatch.setattr(nsys_module, "_cpus", lambda: 2)

    def no_pool(**kw):
        raise AssertionError("the standard-library path started a thread")
    monkeypatch.setattr(nsys_module, "ThreadPoolExecutor", no_pool)
    trace = read_nsys(make_export(tmp_path / "h.sqlite", enums=True))
    assert trace.kernels.height > 0


@pytest.mark.shared
@pytest.mark.parametrize("adbc", [False, True])
def test_whole_string_table_read_gives_the_same_frames(monkeypatch, adbc):
    files = exports()
    if not files or (adbc and not nsys_adbc.available()):
        pytest.skip("no shared exports or no ADBC")
    if not adbc:
        monkeypatch.setattr(nsys_adbc, "available", lambda: False)
    by_lists = read_nsys(files[-1])
    monkeypatch.setattr(nsys_db, "STRINGS_IN_LIST_MAX", 0)  # StringIds read whole
    _assert_same_frames(by_lists, read_nsys(files[-1]))
