"""Standard-library fast path for big nsys tables: SQLite formats CSV text, polars parses it.

Role: without the ADBC extra, ``sqlite3`` hands every row over as a Python tuple of Python
values (about 2 CPU-s per million kernel rows before a frame even exists). Here SQLite itself
writes each chunk of rows as CSV text (``printf`` per row, ``group_concat`` per chunk: one
bytes object per chunk of :data:`CHUNK_ROWS` rows) and polars' CSV reader parses it, so no
Python object is made per row. Chunks follow the rowid (the table's own order, as a plain
``SELECT`` returns it) and are read with ``LIMIT``, so gaps in rowids cost nothing.

Encoding: integers print as decimal text; text is quoted (``"`` doubled inside) so commas,
quotes and newlines survive; NULL is an empty unquoted field, which polars reads as null,
while an empty string is ``""``. Text that is not UTF-8 is decoded with replacement
characters, as the row path does. Every line starts with the rowid, so no line is empty.

Inputs: a ``sqlite3`` connection, a table, SQL expressions with their names and dtypes, an
optional filter. Outputs: a frame, or None when this path cannot answer exactly (a table
without rowid, a dtype other than integers and text, a value the CSV reader rejects, a row
count that does not match): the caller then reads rows the ordinary way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import polars as pl

# Rows per chunk: bounds the text alive at once (~60-100 bytes a row) and the round trips.
CHUNK_ROWS = 262_144
_INTEGERS = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)


def _field(expr: str, dtype: pl.DataType) -> str | None:
    """The printf argument that writes ``expr`` as one CSV field (None: not supported here)."""
    if isinstance(dtype, _INTEGERS):
        return expr  # %s: decimal text, NULL -> empty
    if isinstance(dtype, pl.String):
        return f"""'"' || replace({expr}, '"', '""') || '"'"""  # NULL stays NULL -> empty
    return None  # floats: SQLite prints 15 digits, Python reads 17; let the row path do it


def chunk_sql(table: str, exprs: Sequence[str], schema: dict[str, pl.DataType],
              where: str | None) -> str | None:
    """The query for one chunk: (csv bytes, rows, last rowid, texts with a NUL); params (after, n)."""
    fields = [_field(e, t) for e, t in zip(exprs, schema.values(), strict=True)]
    if any(f is None for f in fields):
        return None
    fmt = ",".join(["%s"] * (len(fields) + 1))
    args = ", ".join(["rowid", *(f for f in fields if f is not None)])
    cond = f" AND ({where})" if where else ""
    # printf stops a text at a NUL character: count the texts holding one (the row path reads them).
    texts = [e for e, t in zip(exprs, schema.values(), strict=True) if isinstance(t, pl.String)]
    nul = " + ".join(f"(instr({e}, char(0)) > 0)" for e in texts) or "0"
    return (
        "SELECT CAST(group_concat(line, char(10)) AS BLOB), count(*), max(r), total(nul) FROM ("
        f"SELECT rowid AS r, printf('{fmt}', {args}) AS line, {nul} AS nul FROM \"{table}\" "
        f"WHERE rowid > ?{cond} ORDER BY rowid LIMIT ?)"
    )


def _parse(text: bytes, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    read = {"_rowid": pl.Int64(), **{
        n: pl.String() if isinstance(t, pl.String) else pl.Int64() for n, t in schema.items()
    }}
    df = pl.read_csv(text, has_header=False, schema=read, encoding="utf8-lossy",
                     quote_char='"', raise_if_empty=False)
    return df.drop("_rowid").cast(schema, strict=True)  # type: ignore[arg-type]


def _rowid_shadowed(conn: sqlite3.Connection, table: str) -> bool:
    """True when a column named ``rowid`` hides the real rowid (chunks would not follow it)."""
    try:
        names = {str(r[1]).lower() for r in conn.execute(f'PRAGMA table_info("{table}")')}
    except sqlite3.Error:
        return True
    return "rowid" in names


def read_table(conn: sqlite3.Connection, table: str, exprs: Sequence[str],
               schema: dict[str, pl.DataType], where: str | None = None) -> pl.DataFrame | None:
    """``SELECT exprs FROM table [WHERE where]`` in rowid order as a frame, or None (see above)."""
    sql = chunk_sql(table, exprs, schema, where)
    if sql is None or _rowid_shadowed(conn, table):
        return None
    parts = []
    after = -(1 << 63)  # rowids are signed 64-bit; start below the smallest
    try:
        while True:
            text, rows, last, nuls = conn.execute(sql, (after, CHUNK_ROWS)).fetchone()
            if not rows:
                break
            if nuls:
                return None
            part = _parse(text, schema)
            if part.height != rows:
                return None
            parts.append(part)
            if rows < CHUNK_ROWS:
                break
            after = last
    except (sqlite3.Error, pl.exceptions.PolarsError, ValueError, TypeError, OverflowError):
        return None  # the row path reads it, and raises its own error if the data is bad
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts, how="vertical", rechunk=True)
