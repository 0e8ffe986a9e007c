"""Types of the compiled Kineto batch parser (``rightsize/traces/_kscan.c``); the docstrings
there say what each function does. Read by type checkers only (``typing_extensions`` is
typeshed's here, never imported at run time)."""

from typing import TypeAlias

from typing_extensions import Buffer, CapsuleType

# One column: an Arrow C data interface pair, capsules named "arrow_schema" and "arrow_array".
_ColumnCapsules: TypeAlias = tuple[CapsuleType, CapsuleType]

def parse(
    data: Buffer,
    top: tuple[str, ...],
    args: tuple[str, ...],
    kinds: tuple[int, ...],
    array: bool,
    /,
) -> tuple[_ColumnCapsules, ...] | None:
    """The batch's columns -- `top` but "args", then the `args` fields -- or None: polars
    parses the batch. `kinds`: one per column, 0 text, 1 time (int64 ns), 2 int64, 3 float64.
    TypeError / ValueError: names that are not str or given twice, `args` fields without
    "args" in `top`, more than 32 columns, `kinds` not one 0-3 per column."""

def cut(data: Buffer, after: bool, /) -> tuple[bool, int, int, int, int] | None:
    """(closed, first, last, end, count) of the whole event-array elements in `data`, or None:
    the structural scan in Python decides."""

def live() -> int:
    """Columns handed to polars and not yet released."""

def pool(on: bool, /) -> None:
    """Keep freed column buffers for the next batch (True), or unmap them and keep none."""

def pooled() -> int:
    """Bytes of freed column buffers kept for the next batch."""
