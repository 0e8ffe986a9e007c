"""The stdlib fast path for nsys tables (SQLite writes CSV, polars parses) against exact values."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from rightsize.traces import nsys_sqltext
from rightsize.traces.nsys_db import _lenient_text

SCHEMA = {"n": pl.Int64(), "small": pl.Int32(), "text": pl.String()}
EXPRS = ["n", "small", "text"]
TEXTS = [None, "", "plain", "a,b", 'say "hi"', "two\nlines", "cr\r\nlf", "é ✓", " padded ",
         "NULL", "12"]


def _db(path: Path, rows: list[tuple[object, ...]], rowids: list[int] | None = None,
        ddl: str = "CREATE TABLE t (n INTEGER, small INTEGER, text TEXT)") -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute(ddl)
    if rowids is None:
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    else:
        conn.executemany("INSERT INTO t (rowid, n, small, text) VALUES (?, ?, ?, ?)",
                         [(r, *row) for r, row in zip(rowids, rows, strict=True)])
    conn.commit()
    conn.text_factory = _lenient_text
    return conn


def _rows_path(conn: sqlite3.Connection, sql: str) -> pl.DataFrame:
    return pl.DataFrame(conn.execute(sql).fetchall(), schema=SCHEMA, orient="row")


def test_values_quotes_newlines_and_nulls_survive(tmp_path: Path) -> None:
    rows = [(i - 5, None if i % 3 == 0 else i, t) for i, t in enumerate(TEXTS)]
    rows.append((None, None, None))  # an all-NULL row is still a row
    rows.append((-(1 << 63), 2**31 - 1, "x"))
    conn = _db(tmp_path / "a.sqlite", rows)
    df = nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA)
    assert df is not None
    assert df.schema == pl.Schema(SCHEMA)
    assert df.rows() == rows
    assert df.equals(_rows_path(conn, "SELECT n, small, text FROM t"))


def test_text_that_is_not_utf8_is_replaced_like_the_row_path(tmp_path: Path) -> None:
    conn = _db(tmp_path / "b.sqlite", [])
    conn.execute("INSERT INTO t VALUES (1, 1, CAST(? AS TEXT))", (b"ren\xe9 \xff\xfe ok",))
    df = nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA)
    assert df is not None
    assert df["text"].to_list() == ["ren\ufffd \ufffd\ufffd ok"]
    assert df.equals(_rows_path(conn, "SELECT n, small, text FROM t"))


def test_chunks_follow_rowids_across_gaps_and_filters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(nsys_sqltext, "CHUNK_ROWS", 3)
    rowids = [-7, 1, 2, 5, 100, 101, 1000, 2**40, 2**62]
    rows = [(r % 97, i, f"r{i}") for i, r in enumerate(rowids)]
    conn = _db(tmp_path / "c.sqlite", list(reversed(rows)), list(reversed(rowids)))
    df = nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA)
    assert df is not None
    assert df.rows() == rows  # rowid order, whatever the insertion order
    odd = nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA, where="small % 2 = 1")
    assert odd is not None
    assert odd["small"].to_list() == [1, 3, 5, 7]
    assert nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA, where="n < -1000").height == 0


def test_exprs_and_defaults(tmp_path: Path) -> None:
    conn = _db(tmp_path / "d.sqlite", [(2, 3, "a"), (4, None, None)])
    schema = {"prod": pl.Int64(), "sum": pl.Int64(), "none": pl.Int64(), "lit": pl.String()}
    df = nsys_sqltext.read_table(
        conn, "t", ["n * small", "n + COALESCE(small, 0)", "NULL", "'x' || n"], schema
    )
    assert df is not None
    assert df.rows() == [(6, 5, None, "x2"), (None, 4, None, "x4")]


@pytest.mark.parametrize(
    ("ddl", "rows", "schema"),
    [
        # a table without rowid: no chunking by rowid
        ("CREATE TABLE t (n INTEGER PRIMARY KEY, small INTEGER, text TEXT) WITHOUT ROWID",
         [(1, 2, "a")], SCHEMA),
        # floats: SQLite prints 15 significant digits, Python 17
        ("CREATE TABLE t (n REAL, small INTEGER, text TEXT)", [(0.1, 2, "a")],
         {"n": pl.Float64(), "small": pl.Int32(), "text": pl.String()}),
        # a value that does not fit the declared Int32
        ("CREATE TABLE t (n INTEGER, small INTEGER, text TEXT)", [(1, 2**40, "a")], SCHEMA),
        # text where an integer belongs
        ("CREATE TABLE t (n INTEGER, small INTEGER, text TEXT)", [("abc", 1, "a")], SCHEMA),
    ],
)
def test_what_it_cannot_answer_exactly_is_left_to_the_row_path(
    tmp_path: Path, ddl: str, rows: list[tuple[object, ...]], schema: dict[str, pl.DataType]
) -> None:
    conn = _db(tmp_path / "e.sqlite", rows, ddl=ddl)
    assert nsys_sqltext.read_table(conn, "t", EXPRS, schema) is None


def test_empty_table(tmp_path: Path) -> None:
    conn = _db(tmp_path / "f.sqlite", [])
    df = nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA)
    assert df is not None
    assert df.height == 0
    assert df.schema == pl.Schema(SCHEMA)


def test_text_with_a_nul_character_is_left_to_the_row_path(tmp_path: Path) -> None:
    conn = _db(tmp_path / "g.sqlite", [(3, 1, "c\x00")])  # printf would cut it at the NUL
    assert nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA) is None
    conn.execute("DELETE FROM t")
    conn.execute("INSERT INTO t VALUES (3, 1, 'c')")
    assert nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA).rows() == [(3, 1, "c")]


def test_a_column_named_rowid_is_left_to_the_row_path(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "h.sqlite")
    conn.execute("CREATE TABLE t (n INTEGER, small INTEGER, text TEXT, rowid INTEGER)")
    conn.execute("INSERT INTO t VALUES (1, 1, 'a', 7), (2, 2, 'b', 7)")
    assert nsys_sqltext.read_table(conn, "t", EXPRS, SCHEMA) is None
