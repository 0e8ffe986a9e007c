"""The optional ADBC reader of Nsight Systems exports gives exactly the stdlib reader's frames."""

from __future__ import annotations

import pytest

from rightsize.traces import nsys_adbc
from rightsize.traces.nsys import read_nsys
from tests.conftest import shared_path

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
    for name in FRAMES:
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.schema == b.schema, name
        assert a.equals(b), name


def test_without_the_extra_the_reader_says_none(tmp_path):
    reader = nsys_adbc.FastReader(tmp_path / "absent.sqlite")
    assert reader.frame("SELECT 1", {"x": __import__("polars").Int64()}) is None
    reader.close()
