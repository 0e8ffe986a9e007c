"""Fitting the communication model's factors on measured collective tables, and checking it
on tables it was not fitted on.

Inputs: :class:`Table` rows -- one measured collective at several sizes on one system (an
nccl-tests table, a measured NCCL table), with the :class:`~nccl_model.Span` it ran on.
Outputs: :class:`~nccl_model.Factors` (:func:`fit`), the model's time per row
(:func:`predict`) and the errors of a system predicted by a fit without it
(:func:`leave_one_out`). Pure.

Procedure. NCCL's pick per row is fixed by its nominal model (``nccl_model.choose``); the fit
moves only how fast that pick runs. The loss is the mean |log(predicted / measured time)| over a
system's rows, every system weighing the same (a system of five collectives counts once); the
factors are found by coordinate descent on their logarithms (golden-section search per factor,
a few sweeps), each bounded to a physical range (an efficiency in 0.05..1.2 of the line rate,
the latency scale 0.3..5, a network hop 0..500 µs). A factor no row of the fit depends on (a
class no fitted system has) is left out of the result, so a prediction for that class falls
back to the pooled value of its scope (:func:`pooled`): the geometric mean over the classes
that were fitted.

PCIe classes take their fastest system (:data:`ENVELOPE`): each system's own efficiency is
fitted and the class keeps the largest. PCIe's errors are one-sided -- a card in a narrower
slot, a riser, a virtualized or IOMMU-translated path, a throttled uplink all run below what
the generation's x16 link gives and nothing runs above it -- so the healthy box is the model
and a slower log is a finding (``comm check``'s notes), not a reason to slow every prediction.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rightsize.analyzers.sizing import nccl_model as nm
from rightsize.analyzers.sizing.nccl_model import Factors, Span

GOLDEN = (math.sqrt(5) - 1) / 2
BOUNDS = {"eta": (0.05, 1.2), "net_eta": (0.05, 1.0), "net_ll_eta": (0.005, 1.2),
          "lat_scale": (0.3, 5.0), "net_lat_us": (0.0, 500.0), "self_steps": (0.0, 3.0),
          "fill_mb": (0.0, 100.0), "pcie_oneway": (1.0, 3.0)}  # a NIC runs at most at its line
SWEEPS = 2
MIN_SYSTEMS = 2  # a class's own factor needs this many systems; else it takes the pooled
# the rows each kind of factor is fitted on: efficiencies on bandwidth-bound rows, latencies
# on latency-bound ones, the pipeline fill on all
ROWS = {"lat_scale": (0.0, 1 << 20), "net_lat_us": (0.0, 1 << 20), "fill_mb": (0.0, math.inf),
        "net_ll_eta": (0.0, math.inf)}
BANDWIDTH_ROWS = (64 << 20, math.inf)
CLASS_ONLY = ("net_lat_us", "net_ll_eta")  # never pooled: a network's own quirks
ENVELOPE = (nm.PCIE, nm.PCIE_HOST)  # link classes set by their fastest system (docstring)
LINEAR = ("net_lat_us", "self_steps", "fill_mb", "pcie_oneway")  # searched linearly (0 allowed)
PRIOR = 0.002  # weight of the pull toward the start value (a factor no row pins stays put)


@dataclass(frozen=True, slots=True)
class Table:
    """One measured collective on one system: ``times_us[i]`` for ``sizes[i]`` bytes."""

    system: str  # the system it is fitted and left out by
    collective: str  # names.TYPES
    span: Span
    sizes: tuple[float, ...]
    times_us: tuple[float, ...]
    nvls_ok: bool = True  # False: a reduction NVLS cannot do (int8)
    label: str = ""
    in_scope: bool = True  # False: an NCCL older than the model's tables (checked, not fitted)


@dataclass(frozen=True, slots=True)
class Param:
    """One factor of the fit: its kind, its class (for per-class factors) and bounds."""

    kind: str  # link_eta | net_eta | nvls_eta | p2p_eta | net_p2p_eta | self_steps | lat_scale
    #          | net_lat_us
    key: str = ""

    @property
    def bounds(self) -> tuple[float, float]:
        return BOUNDS.get(self.kind, BOUNDS["eta"])

    def get(self, f: Factors) -> float:
        value = getattr(f, self.kind)
        if not self.key:
            return float(value)
        return float(value.get(self.key, value.get(nm.pool_of(self.key), _START[self.kind])))

    def set(self, f: Factors, value: float) -> Factors:
        new: Any = value if not self.key else {**getattr(f, self.kind), self.key: value}
        changes: dict[str, Any] = {self.kind: new}
        return replace(f, **changes)

    def touches(self, t: Table, picks: Sequence[tuple[str, str]]) -> bool:
        s = t.span
        p2p = t.collective in ("alltoall", "sendrecv")
        mine = (lambda k: k == self.key or (self.key == nm.pool_of(k or "")
                                            and self.key.endswith(nm.POOLED)))
        return {"link_eta": lambda: mine(s.link_key) and (s.per_node > 1 or s.nodes == 1),
                "net_eta": lambda: s.nodes > 1 and mine(s.nic_class)
                and t.collective != "sendrecv",
                "net_lat_us": lambda: s.nodes > 1 and mine(s.nic_class),
                "net_ll_eta": lambda: s.nodes > 1 and mine(s.nic_class)
                and any(q != nm.SIMPLE for _, q in picks),
                "nvls_eta": lambda: any(a in (nm.NVLS, nm.NVLS_TREE) for a, _ in picks),
                "p2p_eta": lambda: p2p and s.per_node > 1,
                "net_p2p_eta": lambda: t.collective == "sendrecv" and s.nodes > 1,
                "fill_mb": lambda: s.link_class != nm.PCIE,
                "pcie_oneway": lambda: s.link_class == nm.PCIE and s.nodes == 1
                and t.collective in ("broadcast", "reduce") and s.per_node == 2,
                "self_steps": lambda: s.link_class != nm.PCIE and t.collective in (
                    "allreduce", "allgather",
                                                       "reducescatter"),
                # a link's latency scale is its own node's: a network's quirks stay out
                "lat_scale": lambda: mine(s.link_key) and s.nodes == 1}[self.kind]()


_START = {"link_eta": 0.8, "net_eta": 0.8, "nvls_eta": 0.7, "p2p_eta": 0.8,
          "net_p2p_eta": 0.5, "self_steps": 0.4, "fill_mb": 10.0, "lat_scale": 1.0,
          "net_lat_us": 5.0, "net_ll_eta": 1.0, "pcie_oneway": 1.0}


def picks(t: Table) -> list[tuple[str, str]]:
    """NCCL's pick per row (nominal model), fixed for the fit."""
    out = []
    for size in t.sizes:
        c = nm.choose(t.collective, size, t.span, t.nvls_ok)
        out.append((c.algorithm, c.protocol) if c else ("", ""))
    return out


def predict(t: Table, f: Factors, chosen: Sequence[tuple[str, str]] | None = None
            ) -> list[float]:
    """The model's time (µs) of each row of ``t`` under ``f``."""
    chosen = chosen if chosen is not None else picks(t)
    by = {(c.algorithm, c.protocol): c for c in nm.candidates(t.collective, t.span, f,
                                                              t.nvls_ok)}
    return [by[k].time_us(s) if k in by else math.nan for k, s in zip(chosen, t.sizes,
                                                                      strict=True)]


def _loss(t: Table, f: Factors, chosen: Sequence[tuple[str, str]],
          rows: tuple[float, float] = (0.0, math.inf)) -> float:
    """Mean |log(predicted / measured)| over the rows of ``rows[0]`` to ``rows[1]`` bytes."""
    got = predict(t, f, chosen)
    errs = [abs(math.log(p / m)) for p, m, s in zip(got, t.times_us, t.sizes, strict=True)
            if p > 0 and m > 0 and math.isfinite(p) and rows[0] <= s < rows[1]]
    return sum(errs) / len(errs) if errs else 0.0


def params_for(tables: Sequence[Table], pooled_stage: bool = False,
               min_systems: int = MIN_SYSTEMS) -> list[Param]:
    """The factors the tables can say something about. ``pooled_stage``: each per-class
    factor as its pooled one (``*``: every system of the kind); else a class's own, only
    where at least MIN_SYSTEMS systems have the class (a thinner class keeps the pooled)."""
    found: dict[tuple[str, str], Param] = {}
    thin = _thin_classes(tables, min_systems)
    for t in tables:
        chosen = picks(t)
        for p in _all_params(t):
            if not p.touches(t, chosen):
                continue
            if p.key and pooled_stage:
                if p.kind in CLASS_ONLY:
                    continue  # NCCL's own figures stand for a class without its own
                p = Param(p.kind, nm.pool_of(p.key))
            elif p.key and p.key in thin.get(p.kind, ()):
                continue
            found[(p.kind, p.key)] = p
    order = ("lat_scale", "link_eta", "pcie_oneway", "self_steps", "fill_mb", "nvls_eta",
             "net_eta", "net_lat_us", "net_ll_eta", "p2p_eta", "net_p2p_eta")
    return sorted(found.values(), key=lambda p: (order.index(p.kind), p.key))


def _thin_classes(tables: Sequence[Table], min_systems: int = MIN_SYSTEMS
                  ) -> dict[str, set[str]]:
    """Per per-class kind, the classes fewer than ``min_systems`` systems have."""
    systems: dict[tuple[str, str], set[str]] = defaultdict(set)
    for t in tables:
        systems[("link_eta", t.span.link_key)].add(t.system)
        if t.span.nodes == 1:
            systems[("lat_scale", t.span.link_key)].add(t.system)
        if t.span.nic_class:
            for kind in ("net_eta", "net_lat_us", "net_ll_eta"):
                systems[(kind, t.span.nic_class)].add(t.system)
    out: dict[str, set[str]] = defaultdict(set)
    for (kind, key), members in systems.items():
        if len(members) < min_systems and not (kind == "link_eta" and key in ENVELOPE):
            out[kind].add(key)
    return out


def _all_params(t: Table) -> list[Param]:
    s = t.span
    out = [Param("lat_scale", s.link_key), Param("link_eta", s.link_key), Param("nvls_eta"),
           Param("p2p_eta"), Param("net_p2p_eta"), Param("self_steps"), Param("fill_mb"),
           Param("pcie_oneway")]
    if s.nic_class:
        out += [Param("net_eta", s.nic_class), Param("net_lat_us", s.nic_class),
                Param("net_ll_eta", s.nic_class)]
    return out


def fit(tables: Sequence[Table], start: Factors | None = None,
        sweeps: int = SWEEPS, min_systems: int = MIN_SYSTEMS) -> Factors:
    """Factors minimizing the mean over systems of each system's mean |log error| (tables
    out of the model's scope left out)."""
    tables = [t for t in tables if t.in_scope]
    chosen = [picks(t) for t in tables]
    f = start or Factors()
    for stage in (True, False):  # the pooled factors on every system, then the classes'
        f = _descend(tables, chosen, params_for(tables, stage, min_systems), f, sweeps)
    oneway = [p for p in params_for(tables, False, min_systems) if p.kind == "pcie_oneway"]
    for _ in range(sweeps):  # the PCIe envelope, and the one-way rate over it
        f = _descend(tables, chosen, oneway, _envelope(tables, chosen, f), 1)
    return f


def _envelope(tables: Sequence[Table], chosen: Sequence[Sequence[tuple[str, str]]],
              f: Factors) -> Factors:
    """Each :data:`ENVELOPE` class's efficiency: the largest of its systems' own (each fitted
    on its two-way tables' bandwidth rows alone, the other factors as fitted)."""
    oneway = Param("pcie_oneway")
    for key in ENVELOPE:
        p = Param("link_eta", key)
        own = []
        for system in dict.fromkeys(t.system for t in tables if t.span.link_key == key):
            mine = [i for i, t in enumerate(tables) if t.system == system
                    and p.touches(t, chosen[i]) and not oneway.touches(t, chosen[i])]

            def loss(value: float, mine: list[int] = mine, p: Param = p,
                     f: Factors = f) -> float:
                g = p.set(f, value)
                return sum(_loss(tables[i], g, chosen[i], BANDWIDTH_ROWS) for i in mine)

            if mine:
                own.append(_golden(loss, *p.bounds, log=True))
        if own:
            f = p.set(f, max(own))
    return f


def _descend(tables: Sequence[Table], chosen: Sequence[Sequence[tuple[str, str]]],
             params: Sequence[Param], f: Factors, sweeps: int) -> Factors:
    """Coordinate descent of ``params`` from ``f`` (see the module docstring)."""
    weight = _weights(tables)
    for p in params:
        f = p.set(f, p.get(f))
    for _ in range(sweeps):
        for p in params:
            touched = [i for i, t in enumerate(tables) if p.touches(t, chosen[i])]

            rows = ROWS.get(p.kind, BANDWIDTH_ROWS)

            def loss(value: float, p: Param = p, touched: list[int] = touched,
                     rows: tuple[float, float] = rows, base: Factors = f) -> float:
                g = p.set(base, value)
                return sum(weight[i] * _loss(tables[i], g, chosen[i], rows)
                           for i in touched) + PRIOR * _pull(p, value)

            f = p.set(f, _golden(loss, *p.bounds, log=p.kind not in LINEAR))
    return f


def _pull(p: Param, value: float) -> float:
    start = _START[p.kind]
    if p.kind in LINEAR:
        return ((value - start) / (1.0 if p.kind == "self_steps" else 10.0)) ** 2
    return math.log(value / start) ** 2


def _weights(tables: Sequence[Table]) -> list[float]:
    """Each system weighs 1, shared by its tables by their row counts."""
    rows: dict[str, int] = defaultdict(int)
    for t in tables:
        rows[t.system] += len(t.sizes)
    return [len(t.sizes) / rows[t.system] for t in tables]


def _golden(loss: Callable[[float], float], lo: float, hi: float, log: bool,
            tol: float = 0.002) -> float:
    to = (math.log if log else float)
    back = (math.exp if log else float)
    a, b = to(lo), to(hi)
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = loss(back(c)), loss(back(d))
    while abs(b - a) > tol * (1 if log else max(1.0, abs(b))):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = loss(back(c))
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = loss(back(d))
    return float(back((a + b) / 2))


def pooled(f: Factors) -> Factors:
    """``f`` with a pooled value (``*``) in each per-class efficiency map that lacks one: the
    geometric mean of its classes, for a class no fitted system had (plain Ethernet, or the
    class of the system left out). The network's latency and LL efficiency have no pooled
    value: a class without its own keeps NCCL's figures."""
    def with_pool(values: Mapping[str, float]) -> dict[str, float]:
        out = dict(values)
        vs = [v for k, v in out.items() if k != nm.POOLED and v > 0]
        if nm.POOLED not in out and vs:
            out[nm.POOLED] = math.exp(statistics.fmean(math.log(v) for v in vs))
        return out

    return replace(f, link_eta=with_pool(f.link_eta), net_eta=with_pool(f.net_eta),
                   lat_scale=with_pool(f.lat_scale))


def leave_one_out(tables: Sequence[Table], sweeps: int = SWEEPS
                  ) -> dict[str, tuple[Factors, list[list[float]]]]:
    """Per system: the factors fitted without it (pooled where its class has no other
    system) and its tables' predicted times under them."""
    out = {}
    for system in dict.fromkeys(t.system for t in tables):
        rest = [t for t in tables if t.system != system]
        f = pooled(fit(rest, sweeps=sweeps))
        out[system] = (f, [predict(t, f) for t in tables if t.system == system])
    return out
