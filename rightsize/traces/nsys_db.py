"""Read-only access to an Nsight Systems SQLite export, tolerant of its schema versions.

Role: the one place that opens an ``nsys export --type sqlite`` file. It opens the file
read-only and immutable (SQLite writes nothing, not even a journal or WAL file), checks the
header for truncation, lists the tables and columns that exist (they vary from export schema
2.x to 3.2x), decodes text leniently (metadata may be cp1252), and runs queries into polars
frames: big tables through :meth:`NsysDb.select` with no Python object per row (ADBC when the
extra is installed, else CSV text written by SQLite, :mod:`rightsize.traces.nsys_sqltext`),
small ones (devices, metadata, string ids) as rows.

Inputs: a path. Outputs: an :class:`NsysDb` with ``tables``/``columns()``/``select()``/
``frame()``/``strings()``; problems become :class:`rightsize.errors.InputError`, one line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from rightsize.errors import InputError
from rightsize.traces import nsys_adbc, nsys_sqltext

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100
# Rows fetched per round trip on the row path: bounds the Python tuples alive at once.
_CHUNK_ROWS = 250_000
# Above this many distinct string ids the whole StringIds table is read instead of IN lists.
STRINGS_IN_LIST_MAX = 5000

# Tables whose presence (beside StringIds) marks a file as an nsys export.
_NSYS_MARKERS = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "TARGET_INFO_SESSION_START_TIME",
)


def _lenient_text(raw: bytes) -> str:
    # EXPORT_USER in Windows exports is cp1252; never fail on a metadata string.
    return raw.decode("utf-8", errors="replace")


def header_problem(path: Path, head: bytes) -> str | None:
    """Why ``head`` (the file's first bytes) is not a whole SQLite file, or None if it looks whole.

    The header stores the page size (offset 16) and, when valid, the page count (offset 28,
    valid when the change counter at 24 equals the one at 92). A file shorter than
    page_size * page_count was truncated (a partial copy or download).
    """
    if not head:
        return "empty file"
    if not head.startswith(SQLITE_MAGIC):
        return "not a SQLite database"
    if len(head) < _HEADER_BYTES:
        return "truncated SQLite file (header incomplete)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):  # a power of two from 512 to 65536
        return f"corrupt SQLite header (page size {page_size})"
    pages = int.from_bytes(head[28:32], "big")
    counter_valid = head[24:28] == head[92:96]
    size = path.stat().st_size
    if counter_valid and pages and size < page_size * pages:
        return f"truncated SQLite file ({size} bytes, header says {page_size * pages})"
    if size % page_size:
        return f"truncated SQLite file ({size} bytes is not a multiple of the page size)"
    return None


def _read_head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(_HEADER_BYTES)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror or exc.__class__.__name__})") from exc


def _connect(path: Path) -> sqlite3.Connection:
    # immutable=1: SQLite assumes nobody changes the file, takes no locks and creates no
    # -journal/-wal/-shm files, so the input stays byte-identical even on a read-only mount.
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    conn.text_factory = _lenient_text
    return conn


@dataclass(slots=True)
class NsysDb:
    """An open, read-only nsys export: which tables and columns exist, and queries into polars."""

    path: Path
    conn: sqlite3.Connection
    tables: frozenset[str]
    _columns: dict[str, frozenset[str]] = field(default_factory=dict)
    fast: nsys_adbc.FastReader | None = None  # the optional ADBC path (rightsize[fast-sqlite])

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> frozenset[str]:
        """Column names of ``table`` (empty when the table is absent)."""
        if table not in self.tables:
            return frozenset()
        if table not in self._columns:
            rows = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = frozenset(str(r[1]) for r in rows)
        return self._columns[table]

    def frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """Run ``sql`` and return its rows as a frame with ``schema`` (names in select order)."""
        if self.fast is not None:
            df = self.fast.frame(sql, schema)
            if df is not None:
                return df
        return self._rows(sql, schema)

    def select(self, table: str, columns: Sequence[tuple[str, str, pl.DataType]],
               where: str | None = None) -> pl.DataFrame:
        """``SELECT`` the ``(sql expression, name, dtype)`` columns of a big ``table``.

        Rows come in table (rowid) order, as a plain ``SELECT`` returns them, with no Python
        object per row: through ADBC when installed, else as CSV text that SQLite writes and
        polars parses (:mod:`rightsize.traces.nsys_sqltext`); Python tuples only as the last
        resort (a query neither fast path can answer exactly).
        """
        schema = {name: dtype for _, name, dtype in columns}
        exprs = [expr for expr, _, _ in columns]
        cond = f" WHERE {where}" if where else ""
        sql = f'SELECT {", ".join(exprs)} FROM "{table}"{cond}'
        if self.fast is not None:
            df = self.fast.frame(sql, schema)
            if df is not None:
                return df
        df = nsys_sqltext.read_table(self.conn, table, exprs, schema, where)
        return df if df is not None else self._rows(sql, schema)

    def _rows(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        cur = self.conn.execute(sql)
        parts = []
        while rows := cur.fetchmany(_CHUNK_ROWS):
            parts.append(pl.DataFrame(rows, schema=schema, orient="row"))
        if not parts:
            return pl.DataFrame(schema=schema)
        return pl.concat(parts, how="vertical", rechunk=True)

    def strings(self, ids: pl.Series) -> pl.DataFrame:
        """``StringIds`` rows (``id``, ``value``) for the distinct non-null ``ids``."""
        schema = {"id": pl.Int64(), "value": pl.String()}
        wanted = ids.drop_nulls().unique()
        if not self.has("StringIds") or wanted.is_empty():
            return pl.DataFrame(schema=schema)
        # A temp table would write to the (read-only) database; read the whole table instead
        # when many ids are wanted, else fetch them by IN-list batches.
        if len(wanted) > STRINGS_IN_LIST_MAX:
            table = self.select("StringIds", [(f'"{n}"', n, t) for n, t in schema.items()])
            return table.join(wanted.to_frame("id"), on="id", how="semi")
        parts = []
        values = wanted.to_list()
        for i in range(0, len(values), 900):
            batch = ",".join(str(int(v)) for v in values[i : i + 900])
            parts.append(
                self.frame(f"SELECT id, value FROM StringIds WHERE id IN ({batch})", schema)
            )
        return pl.concat(parts, how="vertical")

    def key_values(self, table: str) -> dict[str, str]:
        """A ``(name, value)`` table such as META_DATA_EXPORT as a dict (empty when absent)."""
        if not {"name", "value"} <= self.columns(table):
            return {}
        rows = self.conn.execute(f'SELECT name, value FROM "{table}"').fetchall()
        return {str(k): "" if v is None else str(v) for k, v in rows}

    def enum(self, table: str) -> dict[int, str]:
        """An ``ENUM_*`` table as ``{id: name}`` (empty when absent: older exports lack them)."""
        if not {"id", "name"} <= self.columns(table):
            return {}
        rows = self.conn.execute(f'SELECT id, name FROM "{table}"').fetchall()
        return {int(i): str(n) for i, n in rows if i is not None}

    def close(self) -> None:
        if self.fast is not None:
            self.fast.close()
        self.conn.close()


def open_nsys(path: str | Path) -> NsysDb:
    """Open ``path`` as an nsys export, or raise InputError saying in one line why it is not one."""
    path = Path(path)
    problem = header_problem(path, _read_head(path))
    if problem:
        raise InputError(path, problem)
    try:
        conn = _connect(path)
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except (sqlite3.Error, ValueError) as exc:  # ValueError: undecodable schema text
        raise InputError(path, f"unreadable SQLite file ({one_line(exc)})") from exc
    tables = frozenset(str(r[0]) for r in rows)
    if "StringIds" not in tables or not any(t in tables for t in _NSYS_MARKERS):
        conn.close()
        raise InputError(
            path, "SQLite file is not an Nsight Systems export (no StringIds/CUPTI_* tables)"
        )
    fast = nsys_adbc.FastReader(path) if nsys_adbc.available() else None
    return NsysDb(path=path, conn=conn, tables=tables, fast=fast)


def is_nsys_sqlite(path: str | Path, head: bytes) -> bool:
    """True when ``head`` starts a SQLite file whose tables look like an nsys export."""
    if not head.startswith(SQLITE_MAGIC):
        return False
    try:
        db = open_nsys(path)
    except InputError:
        return False
    db.close()
    return True


def time_ordered(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` stably sorted by ``start`` (nulls first); no work when it already is (the usual)."""
    start = df["start"]
    if start.null_count() == 0 and start.is_sorted():
        return df
    return df.sort("start", maintain_order=True)


def owned(*names: str) -> list[pl.Expr]:
    """The named integer columns as copies in polars' own memory (``x + 0``, the same values
    and nulls: polars has no explicit deep copy).

    A table that ADBC hands over is one Arrow batch, and its memory is freed only when its
    last column goes: copying the columns a reader keeps lets the ones it does not keep (start,
    end, string ids) go with the batch, instead of living as long as the trace.
    """
    return [(pl.col(n) + 0).alias(n) for n in names]


def lookup(column: str, keys: pl.Series, values: pl.Series) -> pl.Expr:
    """``column`` mapped through ``keys`` -> ``values`` (null when absent), as a left join
    would, but column by column: a join copies every column of the frame once more."""
    return pl.col(column).replace_strict(keys, values, default=None, return_dtype=values.dtype)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (SQLite and polars messages can span lines)."""
    text = " ".join(str(exc).split())
    return text or exc.__class__.__name__


def col(cols: Iterable[str], name: str, default: str = "NULL") -> str:
    """``"name"`` when the column exists, else ``default`` (an expression for :meth:`select`)."""
    return f'"{name}"' if name in set(cols) else default


def pick(cols: Iterable[str], name: str, alias: str | None = None, default: str = "NULL") -> str:
    """``"name" AS alias`` when the column exists, else ``default AS alias`` (select by name)."""
    return f"{col(cols, name, default)} AS {alias or name}"
