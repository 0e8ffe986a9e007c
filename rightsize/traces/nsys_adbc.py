"""Optional fast path for Nsight Systems exports: SQLite -> Arrow -> polars through ADBC.

Role: ``pip install rightsize[fast-sqlite]`` adds ``adbc-driver-sqlite`` (no pyarrow needed):
query results then arrive as Arrow columns that polars adopts, with no Python object per row.
Without the package, or for any query it cannot serve exactly (a type it infers differently
from the declared schema, text that is not UTF-8...), :mod:`rightsize.traces.nsys_db` reads
the rows with the standard library instead: the frames are the same either way (tested on the
shared exports).

Inputs: the export's path and a query with its declared schema. Outputs: a polars frame, or
None when the fast path does not apply.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import polars as pl

_manager: Any = None
_sqlite: Any = None
try:  # the optional extra (rightsize[fast-sqlite])
    _manager = importlib.import_module("adbc_driver_manager")
    _sqlite = importlib.import_module("adbc_driver_sqlite")
except ImportError:  # pragma: no cover - depends on the environment
    _manager = _sqlite = None

# Rows per Arrow batch (the driver's default is 1,024). Large enough that a table of up to 16M
# rows comes as one batch: polars adopts it as one chunk, so the rechunk below copies nothing
# (with 65,536-row batches the copy held the table twice: +180 MiB on 2.4M kernels); the
# readers then copy only the columns they keep (:func:`rightsize.traces.nsys_db.owned`) and
# the batch goes. The driver grows its buffers as rows come, so the size reserves nothing
# (2**31 - 1 made the driver slow and bigger: keep it well below).
BATCH_ROWS = 1 << 24


def available() -> bool:
    return _sqlite is not None


class FastReader:
    """One read-only ADBC connection to an export; :meth:`frame` answers a query or None."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: Any = None
        self._conn: Any = None
        self._failed = _sqlite is None

    def _connect(self) -> bool:
        """Connect on first use (opening an export only to sniff it costs nothing)."""
        if self._conn is None and not self._failed:
            uri = f"{self._path.resolve().as_uri()}?mode=ro&immutable=1"
            try:
                self._db = _sqlite.connect(uri)
                self._conn = _manager.AdbcConnection(self._db)
            except Exception:  # noqa: BLE001 - any driver failure: use the stdlib reader
                self.close()
                self._failed = True
        return self._conn is not None

    def frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """The rows of ``sql`` with ``schema`` (names in select order), or None."""
        if not self._connect():
            return None
        try:
            stmt = _manager.AdbcStatement(self._conn)
            try:
                # Named by the schema (a query may select NULL twice: Arrow needs unique names).
                names = ", ".join('"' + n.replace('"', '""') + '"' for n in schema)
                stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                stmt.set_sql_query(f"WITH q({names}) AS ({sql}) SELECT * FROM q")
                stream, _rows = stmt.execute_query()
                df = pl.DataFrame(stream)
            finally:
                stmt.close()
            if df.width != len(schema):
                return None
            return df.cast(schema, strict=True).rechunk()  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - an inexact answer is no answer: use the stdlib path
            return None

    def close(self) -> None:
        for handle in (self._conn, self._db):
            if handle is not None:
                try:
                    handle.close()
                except Exception:  # noqa: BLE001, S110 - closing a read-only handle
                    pass
        self._conn = self._db = None
