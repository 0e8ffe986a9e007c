"""An nccl-tests log against the communication model: every row predicted without fitting on
it, and the model refitted on a user's own logs.

Inputs: an :class:`~rightsize.traces.nccl_tests.NcclLog` (its tables' collective, ranks, hosts
and GPU), the :class:`~comm_system.CommSystem` it ran on (the catalog's for the GPU its rank
lines name, a ``--system`` spec over it) and a :class:`~comm.CommModel`. Outputs: a
:class:`CommCheck` (per table and size: measured and predicted µs, the algorithm and protocol
NCCL runs it with) whose :meth:`CommCheck.to_json` is ``rightsize comm check``'s JSON
contract, and :func:`fit_model` (a model JSON fitted on logs, ``rightsize comm fit``). Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rightsize.analyzers.job import names
from rightsize.analyzers.sizing import comm, comm_fit
from rightsize.analyzers.sizing import nccl_tables as tb
from rightsize.analyzers.sizing.comm_system import CommSystem, SpecError, system_for
from rightsize.catalog import Catalog
from rightsize.traces.nccl_tests import NcclLog, NcclTable

# nccl-tests' test names -> the collective types of analyzers/job/names.py
PERF = {"all_reduce": names.ALLREDUCE, "all_gather": names.ALLGATHER,
        "reduce_scatter": names.REDUCESCATTER, "alltoall": names.ALLTOALL,
        "broadcast": names.BROADCAST, "reduce": names.REDUCE, "sendrecv": names.SENDRECV}
NO_NVLS_TYPES = ("int8", "uint8", "fp8_e4m3", "fp8_e5m2", "char")  # NVLS reduces no 8-bit


@dataclass(frozen=True, slots=True)
class CheckedRow:
    bytes: int
    measured_us: float
    predicted_us: float
    algorithm: str
    protocol: str

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_us / self.measured_us - 1) if self.measured_us else 0.0


@dataclass(frozen=True, slots=True)
class CheckedTable:
    collective: str  # nccl-tests' name (all_reduce ...)
    ranks: int
    nodes: int
    rows: tuple[CheckedRow, ...]
    notes: tuple[str, ...] = ()

    def median_error_pct(self, least: int = 0, below: float = math.inf) -> float | None:
        errs = [abs(r.error_pct) for r in self.rows if least <= r.bytes < below]
        return statistics.median(errs) if errs else None


@dataclass(frozen=True, slots=True)
class CommCheck:
    system: CommSystem
    tables: tuple[CheckedTable, ...]
    model: str  # where the model came from: shipped, or a --comm-model file
    tool: str  # nccl-tests | rccl-tests
    library: str | None  # the NCCL/RCCL version the log prints

    def to_json(self) -> dict[str, Any]:
        """``{"system": {...}, "tables": [{"collective", "rows": [{"bytes", "measured_us",
        "predicted_us", "algorithm", "protocol"}]}]}`` (docs/json-contract.md, comm check);
        each table's ranks, nodes and notes are ``system.tables``, in the same order."""
        layouts = [{"collective": t.collective, "ranks": t.ranks, "nodes": t.nodes,
                    "notes": list(t.notes)} for t in self.tables]
        return {
            "system": {**self.system.to_json(), "model": self.model, "tool": self.tool,
                       "library": self.library, "tables": layouts},
            "tables": [{"collective": t.collective,
                        "rows": [{"bytes": r.bytes, "measured_us": round(r.measured_us, 3),
                                  "predicted_us": round(r.predicted_us, 3),
                                  "algorithm": r.algorithm, "protocol": r.protocol}
                                 for r in t.rows]} for t in self.tables]}


def system_of_log(log: NcclLog, catalog: Catalog, spec: str | None = None) -> CommSystem:
    """The fabric a log ran on: the catalog's for the GPU its rank lines name (the most
    common), with ``spec`` over it."""
    gpus = [t.gpu for t in log.tables if t.gpu]
    name = max(set(gpus), key=gpus.count) if gpus else None
    gpu = catalog.match(name).gpu if name else None
    try:
        return system_for(spec, gpu, catalog)
    except SpecError:
        if gpu is None and name and not spec:
            raise SpecError(f"{name!r} is not a catalog GPU: say what joins its ranks with "
                            "--system (intra=KIND[:DETAIL], and inter=KIND:GBPS across nodes)"
                            ) from None
        raise


def switch_groups(t: NcclTable) -> int:
    """GPUs per PCIe switch that the rank lines' bus numbers show: GPUs of one host on
    consecutive buses (0x1a, 0x1b) sit behind one switch; 0 where no two are adjacent."""
    by_host: dict[str, list[int]] = {}
    for host, bus in t.buses:
        by_host.setdefault(host, []).append(bus)
    best = 0
    for buses in by_host.values():
        run, prev = 1, None
        for bus in sorted(set(buses)):
            run = run + 1 if prev is not None and bus == prev + 1 else 1
            best = max(best, run) if run > 1 else best
            prev = bus
    return best


def table_system(t: NcclTable, system: CommSystem, library: str | None
                 ) -> tuple[CommSystem, tuple[str, ...]]:
    """``system`` as this table ran it, with what its log adds (the NCCL release it prints,
    PCIe switches its bus numbers show where the spec says none), and notes that say so."""
    notes: list[str] = []
    if system.nccl is None and library:
        system = replace(system, nccl=library)
    if not tb.modelled(tb.version(system.nccl)):
        notes.append(f"NCCL {system.nccl} predates the tuning tables this model carries "
                     f"({'.'.join(map(str, tb.OLDEST_MODELLED))} on): timed with its older "
                     "LL and LL128 rules (LL at a quarter of the bus, LL128 capped at 20 "
                     "GB/s a channel); fitted on no log of its release, below 64 MiB expect "
                     "the model to be off")
    if system.intra.startswith("pcie") and not system.switch_gpus:
        k = switch_groups(t)
        if k > 1:
            system = replace(system, switch_gpus=k)
            notes.append(f"bus numbers show {k} GPUs per PCIe switch (consecutive buses); "
                         "through host memory they share its uplink (say gpus_per_switch=1 "
                         "in --system if they do not)")
    return system, tuple(notes)


def _layout(t: NcclTable, system: CommSystem) -> tuple[int, int]:
    """(ranks, nodes) of a table: its hosts where the log prints them, else the spec's."""
    if t.hosts:
        return t.ranks, len(t.hosts)
    if system.nodes:
        return t.ranks, system.nodes
    per = system.gpus_per_node or t.ranks
    return t.ranks, max(1, math.ceil(t.ranks / per))


def fit_tables(log: NcclLog, system: CommSystem, label: str | None = None
               ) -> list[comm_fit.Table]:
    """The log's tables the model covers, as fit/check tables (one rank or an unmodelled
    test -- scatter, gather, hypercube -- left out; an NCCL older than the model's tables is
    checked but not fitted on)."""
    out = []
    library = log.nccl_library
    for t in log.tables:
        kind = PERF.get(t.collective)
        if kind is None or t.ranks < 2:
            continue
        mine, _ = table_system(t, system, library)
        ranks, nodes = _layout(t, mine)
        if nodes > 1 and not system.inter:
            raise SpecError(f"the {t.collective} table spans {nodes} nodes and the network "
                            "between them is unknown: say it with --inter KIND:GBPS")
        dtype = t.rows[0].dtype.lower() if t.rows else ""
        out.append(comm_fit.Table(
            label or log.path, kind, mine.span(ranks, nodes),
            tuple(float(r.bytes) for r in t.rows), tuple(r.time_ns / 1e3 for r in t.rows),
            nvls_ok=dtype not in NO_NVLS_TYPES, label=f"{t.collective} {ranks} ranks",
            in_scope=tb.modelled(tb.version(mine.nccl))))
    return out


def check(log: NcclLog, system: CommSystem, model: comm.CommModel) -> CommCheck:
    """Every row of the log predicted by ``model`` (see the module docstring)."""
    tables = []
    covered = {id(t): t for t in log.tables if PERF.get(t.collective) and t.ranks >= 2}
    fits = iter(fit_tables(log, system))
    library = log.nccl_library
    for t in log.tables:
        if id(t) not in covered:
            continue
        ft = next(fits)
        _, notes = table_system(t, system, library)
        rows = []
        for r in t.rows:
            timing = model.timing(ft.collective, float(r.bytes), ft.span, ft.nvls_ok)
            if timing is None:
                continue
            rows.append(CheckedRow(r.bytes, r.time_ns / 1e3, timing.us, timing.algorithm,
                                   timing.protocol))
        tables.append(CheckedTable(t.collective, ft.span.ranks, ft.span.nodes, tuple(rows),
                                   t.notes + notes))
    return CommCheck(system, tuple(tables), model.source, log.tool, log.library)


def fit_model(items: Sequence[tuple[NcclLog, CommSystem]], start: comm.CommModel
              ) -> dict[str, Any]:
    """A model JSON fitted on ``items`` (a user's logs with their fabrics), starting from
    ``start``; its error per fabric class is each class's median |error| over its rows
    (in-sample: a user's own fabric, not a leave-one-out). A log of an NCCL before 2.12 is
    fitted too: timed by its release's own rules, its factors are the user's fabric's."""
    tables = [replace(t, in_scope=True) for log, system in items
              for t in fit_tables(log, system)]
    if not tables:
        raise SpecError("no table of these logs is one the model covers (two or more ranks "
                        "of all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                        "alltoall or sendrecv)")
    factors = comm_fit.pooled(comm_fit.fit(tables, start=start.factors, min_systems=1))
    errors: dict[str, list[float]] = {}
    for t in tables:
        for p, m in zip(comm_fit.predict(t, factors), t.times_us, strict=True):
            errors.setdefault(t.span.fabric_class, []).append(abs(100 * (p / m - 1)))
    return model_json(factors, {k: statistics.median(v) for k, v in errors.items()},
                      procedure="rightsize comm fit (in-sample: the user's own logs)",
                      sources=sorted({log.path for log, _ in items}))


def model_json(factors: Any, errors: dict[str, float], procedure: str,
               sources: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"format": comm.FORMAT, "version": comm.VERSION, "procedure": procedure,
            "sources": sources, "factors": comm.factors_json(factors),
            "error_pct": {k: round(v, 2) for k, v in sorted(errors.items())},
            **(extra or {})}
