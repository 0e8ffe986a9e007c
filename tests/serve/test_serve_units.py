"""Pieces of the server without a server: names, the inflate check, compare rows, the store,
the log limiter, the token rule."""

from __future__ import annotations

import gzip
import io
import logging
import sqlite3
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from rightsize.serve.compare import Row, compare_rows
from rightsize.serve.config import check_token, max_connections_for
from rightsize.serve.guard import RateLimit
from rightsize.serve.gzipcheck import GzipCheck, TooLarge, Unreadable
from rightsize.serve.store import IndexDamaged, Store, blob_path
from rightsize.serve.upload import display_name
from rightsize.serve.worker import summarize

# A small bomb: 200,000 zero bytes in a few hundred bytes of gzip, against a 100,000-byte cap.
BOMB = gzip.compress(b"\0" * 200_000, compresslevel=9)
CAP = 100_000


def test_display_name_keeps_the_last_component_as_text() -> None:
    assert display_name("../../etc/passwd") == "passwd"
    assert display_name("C:\\Users\\me\\trace.json.gz") == "trace.json.gz"
    assert display_name("a\x00b\x1b[31mc\u202e.json") == "ab[31mc.json"
    assert display_name("../") == "upload"
    assert display_name("x" * 500) == "x" * 200


def test_inflate_check_counts_every_member_and_stops_at_the_cap() -> None:
    data = gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 500)
    check = GzipCheck(limit_bytes=10_000)
    for i in range(0, len(data), 7):  # arrives in small pieces
        check.feed(data[i:i + 7])
    check.finish()
    assert (check.is_gzip, check.out_bytes) == (True, 1500)
    with pytest.raises(TooLarge, match="decompresses to more than"):
        GzipCheck(limit_bytes=1499).feed(data)
    plain = GzipCheck(limit_bytes=10)
    plain.feed(b"{")
    plain.feed(b'"traceEvents": []}' * 10)
    plain.finish()
    assert (plain.is_gzip, plain.out_bytes) == (False, 0)


@pytest.mark.parametrize("name", ["one member", "two members", "zero padding between"])
def test_the_inflate_cap_holds_at_every_split_point(name: str) -> None:
    """Issue 29, 1: the first piece holding one byte, or a second member's magic split
    across pieces, no longer skips the check. Every split point, and one byte at a time."""
    data = {"one member": BOMB,
            "two members": gzip.compress(b"{}") + BOMB,
            "zero padding between": gzip.compress(b"{}") + b"\0" * 5 + BOMB}[name]
    assert len(data) < 1000 and len(gzip.decompress(data)) > CAP
    for split in range(1, len(data)):
        check = GzipCheck(CAP)
        with pytest.raises(TooLarge, match="decompresses to more than"):
            check.feed(data[:split])
            check.feed(data[split:])
    check = GzipCheck(CAP)
    with pytest.raises(TooLarge):
        for i in range(len(data)):
            check.feed(data[i:i + 1])


def _member(data: bytes, flags: int = 0, header_crc: int | None = None,
            method: int = 8) -> bytes:
    """One gzip member written by hand: any FLG bits, FEXTRA/FNAME/FCOMMENT/FHCRC fields."""
    head = b"\x1f\x8b" + bytes([method, flags]) + b"\0\0\0\0\0\xff"
    if flags & 4:
        head += struct.pack("<H", 2) + b"xx"
    if flags & 8:
        head += b"name\0"
    if flags & 16:
        head += b"comment\0"
    if flags & 2:
        head += struct.pack("<H", zlib.crc32(head) & 0xFFFF if header_crc is None
                            else header_crc)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return head + body + struct.pack("<II", zlib.crc32(data), len(data))


DATA = b'{"traceEvents": []}' * 100  # 1,900 bytes
GZIP_CASES = {  # name: (bytes, what the readers parse, or None: the readers fail)
    "plain": (_member(DATA), 1900),
    "reserved bits 0xE0": (_member(DATA, 0xE0), 1900),  # zlib's gzip mode refuses these
    "every field and reserved bit": (_member(DATA, 0xFE), 1900),
    "header crc wrong": (_member(DATA, 0x02, header_crc=0), None),  # isal refuses it
    "two members, zero padding": (_member(DATA) + b"\0" * 9 + _member(DATA), 3800),
    "trailing zeros": (_member(DATA) + b"\0" * 9, 1900),
    "members past the 1 MiB step": (_member(b"x" * 3_000_000) + _member(DATA), 3_001_900),
    "trailing garbage": (_member(DATA) + b"garbage", None),
    "one stray byte after": (_member(DATA) + b"\x1f", None),
    "crc wrong": (_member(DATA)[:-8] + struct.pack("<II", 0, 1900), None),
    "length wrong": (_member(DATA)[:-4] + struct.pack("<I", 5), None),
    "cut short": (_member(DATA)[:-3], None),
    "method 7": (_member(DATA, method=7), None),
    "name never ends": (b"\x1f\x8b\x08\x08\0\0\0\0\0\xffabc", None),
}


@pytest.mark.parametrize("name", list(GZIP_CASES))
def test_the_check_parses_gzip_as_both_readers_do(name: str) -> None:
    """Issue 40, 3: reserved FLG bits stopped zlib's count while GzipFile and isal inflated
    everything. Each case is what gzip.GzipFile and isal's IGzipFile both read (or both
    refuse, or one does: refused), and the check agrees at every split point."""
    data, parsed = GZIP_CASES[name]
    readers = []
    for opener in (gzip.GzipFile, _isal_gzip()):
        if opener is None:
            continue
        try:
            readers.append(len(opener(fileobj=io.BytesIO(data)).read()))
        except (OSError, EOFError, zlib.error):
            readers.append(None)
    assert (None in readers) == (parsed is None), readers
    assert parsed is None or set(readers) == {parsed}, readers
    for split in range(0, len(data), 3):
        check = GzipCheck(10**9)
        try:
            check.feed(data[:split])
            check.feed(data[split:])
            check.finish()
        except Unreadable as exc:
            assert parsed is None, exc
            assert "the readers cannot read it" in str(exc)
        else:
            assert check.out_bytes == parsed


def _isal_gzip() -> object:
    try:
        from isal import igzip
    except ImportError:
        return None
    return igzip.IGzipFile


def test_the_check_has_a_cpu_budget() -> None:
    """Issue 40, 4: checking what an upload inflates to stops at its CPU budget (413)."""
    data = gzip.compress(b" " * (64 << 20), compresslevel=1)
    check = GzipCheck(limit_bytes=1 << 40, cpu_budget_s=0.01)
    with pytest.raises(TooLarge, match="took more than the server's 0.01 s of CPU"):
        check.feed(data)


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


def test_rate_limit_bounds_a_repeated_log_line() -> None:
    limit = RateLimit(burst=3, window_s=60)
    records = [logging.LogRecord("asyncio", logging.ERROR, "f", 1, "accept() failed: %s",
                                 ("EMFILE",), None) for _ in range(1000)]
    passed = [r for r in records if limit.filter(r)]
    assert len(passed) == 3
    assert passed[-1].getMessage() == \
        "accept() failed: EMFILE (further ones suppressed for 60 s)"
    other = logging.LogRecord("rightsize.serve", logging.INFO, "f", 1, "run %s: done", ("a",),
                              None)
    assert limit.filter(other)  # another template has its own budget


def test_token_strength_and_connection_cap() -> None:
    assert check_token("a") is not None
    assert check_token(" ") is not None
    assert check_token("s3cret token with spaces") == "a token must not contain white space"
    assert check_token("aaaaaaaaaaaaaaaaaaaa") == "a token needs at least 6 different characters"
    assert check_token("Zq8-xY2_pL5vR9tW") is None
    assert max_connections_for(20_000) == 4096
    assert max_connections_for(256) == 256 - 64 - 2 * 16
    assert max_connections_for(4096) == 4096 - 64 - 2 * 256
    assert max_connections_for(20) == 8


def test_store_pages_newest_first_with_a_stable_cursor(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    ids = [store.create([{"name": f"{i}.json", "sha256": "ab" * 32, "bytes": 1}], f"k{i}")
           for i in range(7)]
    newest_first = ids[::-1]
    page1 = [r["id"] for r in store.runs(limit=3)]
    page2 = [r["id"] for r in store.runs(limit=3, before=page1[-1])]
    page3 = [r["id"] for r in store.runs(limit=3, before=page2[-1])]
    assert page1 + page2 + page3 == newest_first
    store.create([{"name": "new.json", "sha256": "ab" * 32, "bytes": 1}], "k-new")
    assert [r["id"] for r in store.runs(limit=3, before=page1[-1])] == page2  # unmoved


def test_the_index_is_a_rollback_journal_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    wal = sqlite3.connect(path)
    wal.execute("PRAGMA journal_mode=WAL")  # as the server before issue 29 left it
    wal.close()
    store = Store(path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    store.check()
    path.write_bytes(path.read_bytes()[:100] + b"\xff" * 4000)  # a damaged file
    with pytest.raises(IndexDamaged, match="restore it from a backup"):
        Store(path).check()  # refused at open or at the check, in one line
