"""nccl-tests / rccl-tests output reader: the result tables of ``all_reduce_perf`` and friends.

Role: what a measured fabric says -- per collective, the time of one call at each size -- for
``rightsize comm check`` (measured against the communication model) and ``rightsize comm fit``
(the model refitted on it). Pure text parsing; no polars.

Inputs: the text nccl-tests (NVIDIA) or rccl-tests (AMD) prints, whole or as pasted into a README
or a blog post: ``srun -l`` prefixes (``0: ``) are dropped, markdown fences and other lines
ignored. A log may hold several tests (``# Collective test starting: all_gather_perf``, or a
command line naming ``alltoall_perf`` before a table); each table is read apart, with the rank
lines printed above it (``#  Rank  3 Group  0 Pid 123 on host device  3 [0x4e] NVIDIA
A100-SXM4-40GB``; rccl-tests and old nccl-tests omit ``Group``), which give the ranks, the hosts
(hence nodes and ranks per node), the GPU model and each GPU's PCI bus. Columns are found from the table's header
(old nccl-tests has no ``root`` column and an ``error`` column instead of ``#wrong``).

Outputs: an :class:`NcclLog` of :class:`NcclTable` (collective, ranks, hosts, GPU, rows of
:class:`NcclRow`: size in bytes, out-of-place time in ns, algbw and busbw in GB/s as printed).
What a table does not say is derived where it can be and said in ``notes``: the collective from
the redop column and busbw / algbw, the rank count from busbw / algbw (nccl-tests' factors,
:data:`BUS_FACTORS`). Errors (InputError, one line): an empty file, text that is not
nccl-tests output, a truncated table (a row cut short, a header without rows, a run stopped
below the maxBytes it announced), busbw that contradicts the rank count.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rightsize.errors import InputError
from rightsize.traces import limits
from rightsize.traces.readers import FABRIC, Progress, Read, ReadOptions, SmallInput

NAME, DESCRIBED = "nccl-tests", "nccl-tests / rccl-tests output (all_reduce_perf ...)"

# nccl-tests' busbw / algbw per test (its doc/PERFORMANCE.md), n ranks; the tests it names
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
_PREFIX = re.compile(r"^\s*\d+:\s?")
_PERF = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|"
                   r"scatter|gather|hypercube)_perf\b")
# Possessive runs and a greedy tail (stripped by the caller): a line of a log never makes them
# backtrack (a 64 kB rank or nThread line took seconds with .*? after \d+; issue 40)
_RANK = re.compile(r"^#\s*+Rank\s++(\d++)\s++(?:Group\s++\d++\s++)?+Pid\s++(\d++)\s++on\s++(\S++)"
                   r"\s++device\s++(\d++)\s++\[([^\]]*+)\]\s++(.*)$")
_HEADER = re.compile(r"^#\s*size\s+count\s+type\s+")
_START = re.compile(r"^#\s*+nThread\s++(\d++)\s++nGpus\s++(\d++).*?maxBytes\s++(\d++)")
_REDUCED = re.compile(r"Reducing maxBytes to\s+(\d+)")
_VERSION = re.compile(r"nccl-library=(\d+)|RCCL version\s*:\s*(\S+)|NCCL version\s+(\S+)")
_FOOTER = ("# Out of bounds values", "# Avg bus bandwidth", "# Collective test concluded")
MARKERS = (b"# nThread", b"nccl-tests version", b"Collective test starting", b"rccl-tests",
           b"_perf -b", b"#       size")


@dataclass(frozen=True, slots=True)
class NcclRow:
    bytes: int  # nccl-tests' size: the largest buffer of one rank
    count: int  # elements, as printed
    dtype: str
    time_ns: int  # out-of-place time of one call
    algbw_gbs: float
    busbw_gbs: float
    inplace_time_ns: int | None  # None where printed N/A


@dataclass(frozen=True, slots=True)
class RankLine:
    rank: int
    pid: int
    host: str
    device: int
    gpu: str  # as printed ("NVIDIA A100-SXM4-40GB", "AMD Instinct MI300X")
    bus: int | None = None  # the PCI bus number ([0x1b], [0000:b4:00]); None if unreadable


def bus_number(text: str) -> int | None:
    """The PCI bus of a rank line's ``[0x1b]`` or ``[0000:b4:00.0]`` (hex); None otherwise."""
    text = text.strip().lower()
    parts = text.split(":")
    cell = parts[1] if len(parts) >= 3 else parts[0]
    try:
        return int(cell.removeprefix("0x"), 16)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class NcclTable:
    collective: str  # the test's name: all_reduce, all_gather, ... (``*_perf`` without _perf)
    ranks: int
    hosts: tuple[str, ...]  # distinct hosts in rank order; () where no rank line was printed
    gpu: str | None  # the GPU model the rank lines name (the most common one)
    redop: str
    line: int  # 1-based line of its header
    rows: tuple[NcclRow, ...]
    notes: tuple[str, ...] = ()
    buses: tuple[tuple[str, int], ...] = ()  # (host, PCI bus) per rank, in rank order

    @property
    def nodes(self) -> int | None:
        return len(self.hosts) or None

    @property
    def per_node(self) -> int | None:
        return -(-self.ranks // len(self.hosts)) if self.hosts else None


@dataclass(frozen=True, slots=True)
class NcclLog:
    path: str
    tool: str  # nccl-tests | rccl-tests
    library: str | None  # "2.29.2" (nccl-library=22902), "2.22.3" (RCCL version)
    tables: tuple[NcclTable, ...]

    @property
    def nccl_library(self) -> str | None:
        """The NCCL version the log ran, when it is NVIDIA's nccl-tests (RCCL's numbering is
        its own)."""
        return self.library if self.tool == NAME else None


@dataclass(slots=True)
class _Block:
    """What is known while reading one test's text, before and during its table."""

    collective: str | None = None
    max_bytes: int | None = None
    ranks: list[RankLine] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    line: int = 0
    rows: list[NcclRow] = field(default_factory=list)
    first: list[str] = field(default_factory=list)  # the first row's cells (redop, root)
    closed: bool = False


def looks_like(head: bytes) -> bool:
    return any(m in head for m in MARKERS)


def read_log(path: Path) -> NcclLog:
    """The tables of one nccl-tests/rccl-tests log (see the module docstring)."""
    text = limits.read_text(path)
    if not text.strip():
        raise InputError(path, "the file is empty")
    return parse_log(text, str(path))


def parse_log(text: str, where: str = "<text>") -> NcclLog:
    tool = "rccl-tests" if "rccl-tests" in text or "RCCL version" in text else "nccl-tests"
    version = _VERSION.search(text)
    library = None
    if version:
        raw = next(g for g in version.groups() if g)
        library = (f"{int(raw) // 10000}.{int(raw) // 100 % 100}.{int(raw) % 100}"
                   if raw.isdigit() else raw.split("-")[0])
    tables: list[NcclTable] = []
    block = _Block()
    for number, raw_line in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw_line, count=1).strip()
        if block.header and not block.closed:
            if _is_row(line):
                block.rows.append(_row(line, block, where, number))
                block.first = block.first or line.split()
                continue
            if not block.rows and (line.startswith("#") or not line):
                continue  # the units line under the header
            tables.append(_table(block, where, footer=line.startswith(_FOOTER)))
            block = _Block(collective=block.collective, max_bytes=block.max_bytes,
                           ranks=block.ranks, closed=True)
        block = _scan(line, block, number)
    if block.header and not block.closed:
        tables.append(_table(block, where, footer=False))
    if not tables:
        raise InputError(where, "not nccl-tests or rccl-tests output (no '# size count type ... "
                                "time algbw busbw' result table)")
    return NcclLog(where, tool, library, tuple(tables))


def _scan(line: str, block: _Block, number: int) -> _Block:
    """One line outside a table: a new test, its name, its rank lines, a table's header. A
    test without a name of its own keeps the last one named (a README's second table)."""
    start = _START.match(line)
    if start:
        return _Block(collective=block.collective, max_bytes=int(start.group(3)))
    perf = _PERF.search(line)
    if perf and not _RANK.match(line):
        if block.closed:
            block = _Block()
        block.collective = perf.group(1)
        return block
    reduced = _REDUCED.search(line)
    if reduced:
        block.max_bytes = int(reduced.group(1))
    rank = _RANK.match(line)
    if rank:
        if block.closed:
            block = _Block(collective=block.collective, max_bytes=block.max_bytes)
        r, pid, host, device, bus, gpu = rank.groups()
        block.ranks.append(RankLine(int(r), int(pid), host, int(device), gpu.rstrip(),
                                    bus_number(bus)))
    elif _HEADER.match(line):
        block.header = line.lstrip("#").split()
        block.closed = False
        block.rows, block.first, block.line = [], [], number
    return block


def _is_row(line: str) -> bool:
    cells = line.split()
    return len(cells) >= 2 and cells[0].isdigit() and cells[1].isdigit()


def _row(line: str, block: _Block, where: str, number: int) -> NcclRow:
    cells = line.split()
    head = block.header
    at = head.index("time")  # out-of-place time, then algbw, busbw, #wrong, in-place time ...
    if len(cells) < at + 3:
        raise InputError(where, f"truncated: line {number} has {len(cells)} of the table's "
                                f"{len(head)} columns")
    try:
        time_us, algbw, busbw = (float(c) for c in cells[at:at + 3])
    except ValueError:
        raise InputError(where, f"line {number}: time/algbw/busbw {cells[at:at + 3]} are not "
                                "numbers") from None
    inplace = _number(cells[at + 4]) if len(cells) > at + 4 else None
    dtype = cells[head.index("type")] if "type" in head and len(cells) > 2 else ""
    return NcclRow(int(cells[0]), int(cells[1]), dtype, round(time_us * 1000), algbw, busbw,
                   round(inplace * 1000) if inplace is not None else None)


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _table(block: _Block, where: str, footer: bool) -> NcclTable:
    rows = [r for r in block.rows if r.bytes > 0]
    if not rows:
        raise InputError(where, f"truncated: the table at line {block.line or '?'} has no rows")
    last = max(r.bytes for r in rows)
    if not footer and block.max_bytes is not None and last * 2 <= block.max_bytes:
        raise InputError(where, f"truncated: the table stops at {last} bytes, below the "
                                f"maxBytes {block.max_bytes} its run announced, without "
                                "nccl-tests' closing lines")
    redop = _cell(block, "redop")
    notes: list[str] = []
    known = len({r.rank for r in block.ranks})
    collective = block.collective or _guess(redop, rows, known, notes, where)
    hosts = tuple(dict.fromkeys(r.host for r in sorted(block.ranks, key=lambda r: r.rank)))
    gpus = [r.gpu for r in block.ranks]
    ranks = known or _ranks_from_busbw(collective, rows, notes, where)
    _check_busbw(collective, ranks, rows, where)
    buses = tuple((r.host, r.bus) for r in sorted(block.ranks, key=lambda r: r.rank)
                  if r.bus is not None)
    return NcclTable(collective, ranks, hosts, max(set(gpus), key=gpus.count) if gpus else None,
                     redop, block.line, tuple(rows), tuple(notes), buses)


def _cell(block: _Block, column: str) -> str:
    """The column's value on the table's first row ("" where the table has no such column)."""
    at = block.header.index(column) if column in block.header else len(block.first)
    return block.first[at] if at < len(block.first) else ""


def _guess(redop: str, rows: list[NcclRow], ranks: int, notes: list[str], where: str) -> str:
    """The collective of an unnamed table, from what its columns allow: a reduction or not
    (redop), and busbw / algbw against each test's factor for the rank count where the rank
    lines give it (above 1: all_reduce; below 1 with a reduction: reduce_scatter). Where
    several fit (2 ranks: all_reduce, reduce and sendrecv all have factor 1) all_reduce, the
    test run by default, is taken and said."""
    factor = _factor(rows)
    reducing = redop not in ("", "none")
    kinds = ("all_reduce", "reduce_scatter", "reduce", "sendrecv") if reducing else (
        "all_gather", "alltoall", "broadcast")
    if factor is not None and ranks >= 2:
        fits = [k for k in kinds if abs(BUS_FACTORS[k](ranks) - factor) < 2e-3]
    elif factor is not None and factor > 1.0001:
        fits = ["all_reduce"]
    elif factor is not None and factor < 0.9999 and reducing:
        fits = ["reduce_scatter"]
    else:
        fits = []
    if not fits or (len(fits) > 1 and "all_reduce" not in fits):
        raise InputError(where, "a result table names no collective (no *_perf before it) and "
                                "its columns do not tell which one it is")
    kind = "all_reduce" if len(fits) > 1 else fits[0]
    notes.append(f"collective not named in the log: {kind}, from busbw / algbw = {factor:.4f}"
                 + (f" (also fits {', '.join(k for k in fits if k != kind)})"
                    if len(fits) > 1 else ""))
    return kind


def _factor(rows: list[NcclRow]) -> float | None:
    """busbw / algbw at the largest size (where the printed digits say it best)."""
    best = max(rows, key=lambda r: r.algbw_gbs)
    return best.busbw_gbs / best.algbw_gbs if best.algbw_gbs >= 1 else None


def _ranks_from_busbw(collective: str, rows: list[NcclRow], notes: list[str],
                      where: str) -> int:
    factor = _factor(rows)
    f = BUS_FACTORS.get(collective)
    if factor is None or f is None or abs(factor - 1) < 1e-4:
        raise InputError(where, f"the {collective} table lists no rank lines and its bus "
                                "bandwidth does not give the rank count: say it with "
                                "--system ranks=N")
    n = min(range(2, 100_000), key=lambda k: abs(f(k) - factor))
    notes.append(f"rank count not printed: {n}, from busbw / algbw = {factor:.4f}")
    return n


def _check_busbw(collective: str, ranks: int, rows: list[NcclRow], where: str) -> None:
    f = BUS_FACTORS.get(collective)
    if f is None or ranks < 2:
        return
    for r in rows:
        want = r.algbw_gbs * f(ranks)
        if r.algbw_gbs >= 1 and abs(want - r.busbw_gbs) > 0.011 + 0.002 * r.busbw_gbs:
            raise InputError(where, f"{r.bytes} B: busbw {r.busbw_gbs} is not algbw "
                                    f"{r.algbw_gbs} x {f(ranks):.4f} ({collective}, {ranks} "
                                    "ranks): the rank lines or the collective are misread")


class _Reader(SmallInput):
    name = NAME
    described = DESCRIBED
    contributes = FABRIC  # read by rightsize comm; an analysis refuses it (readers.not_analyzed)
    suffixes = (".log", ".txt")

    def detect(self, path: Path, head: bytes) -> bool:
        return looks_like(head)

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        log = read_log(path)
        return Read(entry={"tables": len(log.tables), "tool": log.tool}, nccl_tests=log)


READER = _Reader()
