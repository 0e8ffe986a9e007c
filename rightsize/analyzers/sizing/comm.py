"""Communication time on a GPU and fabric: an alpha-beta model per collective and fabric class,
fitted on published nccl-tests results.

Inputs: a collective type (``analyzers/job/names``), its nccl-tests size in bytes, and the
:class:`Span` it crosses: how many ranks, on how many nodes, the in-node link (class and GB/s
per direction per GPU, from the catalog's ``links``) and the inter-node fabric (class and Gb/s
per GPU, from the catalog's ``systems``). Output: the time in µs, by

    t = alpha + ideal_us / (eta x ratio[collective])

``ideal_us`` is the time the bytes take at the links' peak, two levels deep (a node's GPUs
share its NICs; :func:`ideal_us`): in one node ``F(n) x size / link``; across ``N`` nodes of
``g`` ranks the slower of the in-node part ``F(g) x size / link`` and the network part
``F(N) x size x share / nic`` -- ``F`` the collective's nccl-tests bus factor (2(n-1)/n for an
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and
send/receive), ``share`` 1/g where a node's GPUs split the node's traffic (all-reduce,
all-gather, reduce-scatter, broadcast, reduce: hierarchical or multi-ring) and 1 where every
GPU sends its own bytes across (all-to-all, send/receive). ``alpha`` (latency, µs) and ``eta``
(the achieved fraction of that peak, the model's beta being 1 / (eta x peak)) are fitted per
fabric class -- in-node ``nvlink``, ``xgmi``, ``pcie``; across nodes ``infiniband``, ``roce``,
``efa``, ``slingshot`` (``ethernet`` has no published result in the set: the pooled inter-node
fit) -- and ``ratio`` per collective from the systems that published more than all-reduce
(the class's own, else its scope's, else 1).
``benchmarks/fit_comm.py`` fits the table (``catalog/data/comm_model.json``) and states each
class's leave-one-system-out error, which is the range a projection carries. Pure but for
reading the package table once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rightsize.analyzers.job import names
from rightsize.analyzers.sizing.model import CommWork
from rightsize.catalog import Gpu, Price
from rightsize.catalog.links import PCIE, Links, System, links_of, system_of

INTRA, INTER = "intra", "inter"  # the pooled fits of each scope
PER_NODE_SHARE = frozenset({names.ALLREDUCE, names.ALLGATHER, names.REDUCESCATTER,
                            names.BROADCAST, names.REDUCE})
MODELLED = frozenset({*names.BUS_FACTORS, names.BARRIER})


@dataclass(frozen=True, slots=True)
class Span:
    """What the ranks of one collective cross."""

    ranks: int
    nodes: int
    link_class: str  # nvlink | xgmi | pcie: within a node
    link_gbs: float  # GB/s per direction per GPU within a node
    nic_class: str | None = None  # infiniband | roce | efa | slingshot | ethernet
    nic_gbps: float | None = None  # Gb/s per direction per GPU across nodes

    @property
    def per_node(self) -> int:
        return math.ceil(self.ranks / self.nodes)

    @property
    def fabric_class(self) -> str:
        """The class whose fit applies: the network's across nodes, the link's within one."""
        return (self.nic_class or INTER) if self.nodes > 1 else self.link_class


def _factor(collective: str, n: int) -> float:
    return names.BUS_FACTORS[collective](n) if n > 1 else 0.0


def ideal_us(collective: str, size_bytes: float, span: Span) -> float:
    """µs the bytes take at the links' peak (see the module docstring); 0 for a barrier."""
    if collective == names.BARRIER or span.ranks < 2:
        return 0.0
    link = span.link_gbs * 1e3  # GB/s -> bytes per µs
    if span.nodes <= 1:
        return _factor(collective, span.ranks) * size_bytes / link
    g = span.per_node
    inside = _factor(collective, g) * size_bytes / link if g > 1 else 0.0
    share = 1 / g if collective in PER_NODE_SHARE else 1.0
    nic = (span.nic_gbps or 0) / 8 * 1e3  # Gb/s -> bytes per µs
    across = _factor(collective, span.nodes) * size_bytes * share / nic if nic else math.inf
    return max(inside, across)


@dataclass(frozen=True, slots=True)
class ClassFit:
    """One fabric class's fitted latency and efficiency, and what they rest on."""

    name: str
    scope: str  # intra | inter
    alpha_us: float
    eta: float  # achieved fraction of the ideal bandwidth (beta = 1 / (eta x peak))
    systems: tuple[str, ...]  # the shared nccl-tests files it was fitted on
    error_pct: float  # leave-one-system-out median |time error| (the worst file of the class)
    fallback: str = ""  # why another fit stands in (no published result for this class)


@dataclass(frozen=True, slots=True)
class CommModel:
    classes: Mapping[str, ClassFit]
    # class (else scope) -> collective -> eta ratio to all-reduce
    ratios: Mapping[str, Mapping[str, float]]

    def fit_for(self, span: Span) -> ClassFit:
        cls = span.fabric_class
        fit = self.classes.get(cls)
        if fit is not None:
            return fit
        return self.classes[INTER if span.nodes > 1 else INTRA]

    def predict_us(self, collective: str, size_bytes: float, span: Span) -> float | None:
        """Time of one call (µs); None for a type the model has no factor for (unknown)."""
        if collective not in MODELLED:
            return None
        if span.ranks < 2:
            return 0.0
        fit = self.fit_for(span)
        ratio = self.ratios.get(fit.name, {}).get(collective) or self.ratios.get(
            fit.scope, {}).get(collective, 1.0)
        return fit.alpha_us + ideal_us(collective, size_bytes, span) / (fit.eta * ratio)

    def busbw_gbs(self, collective: str, size_bytes: float, span: Span) -> float | None:
        """The nccl-tests bus bandwidth the model gives one call (GB/s)."""
        t = self.predict_us(collective, size_bytes, span)
        if not t or collective not in names.BUS_FACTORS:
            return None
        return size_bytes / (t * 1e3) * _factor(collective, span.ranks)


def parse_model(data: Mapping[str, Any]) -> CommModel:
    classes = {k: ClassFit(k, v["scope"], float(v["alpha_us"]), float(v["eta"]),
                           tuple(v.get("systems", ())), float(v["error_pct"]),
                           str(v.get("fallback", "")))
               for k, v in data["classes"].items()}
    ratios = {scope: {c: float(r) for c, r in by.items()}
              for scope, by in data.get("collective_eta_ratio", {}).items()}
    return CommModel(classes, ratios)


@cache
def load_model() -> CommModel:
    """The shipped, fitted table (``catalog/data/comm_model.json``)."""
    text = resources.files("rightsize.catalog").joinpath("data/comm_model.json").read_text(
        "utf-8")
    return parse_model(json.loads(text))


def collective_us(op: str, size_bytes: float, span: Span,
                  model: CommModel | None = None) -> float | None:
    """The stable entry point: µs one call of collective ``op`` of ``size_bytes`` (nccl-tests'
    size: the largest buffer of one rank) takes over ``span``; None for a type the model does
    not know. ``op`` is one of ``analyzers/job/names.TYPES`` or a name that says one
    (``all_reduce``, ``c10d::allreduce_``). Build ``span`` with :func:`span_for`."""
    kind = names.from_name(op) if op not in MODELLED else op
    if kind is None:
        return None
    return (model or load_model()).predict_us(kind, size_bytes, span)


@dataclass(frozen=True, slots=True)
class Layout:
    """``ranks`` of one GPU, ``per_node`` to a node, and what joins them (the catalog's links
    of the GPU and the system it is projected on)."""

    ranks: int
    per_node: int
    links: Links
    system: System
    node_gpus: int = 8  # GPUs one physical node (tray) holds

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.per_node)

    @property
    def _reach(self) -> int:
        """Ranks one link domain holds: a node's, or those of an NVL72 rack's 18 trays (its
        NVLink Switch trays join all 72 GPUs, beyond the 4 of a tray)."""
        domain = self.links.nvl_domain_gpus
        if self.links.topology == "nvswitch" and domain > self.node_gpus:
            return self.per_node * (domain // self.node_gpus)
        return self.per_node

    def span(self, group: int) -> Span:
        """What a collective of ``group`` consecutive ranks crosses."""
        group = max(1, min(group, self.ranks))
        nodes = math.ceil(group / self._reach)
        inside = min(group, self._reach)
        links = self.links
        if links.link_class != PCIE and inside <= links.nvl_domain_gpus:
            cls, gbs = links.link_class, links.link_gbs_per_direction
        else:
            cls, gbs = PCIE, links.pcie_gbs_per_direction or 0.0
        if nodes > 1:
            return Span(group, nodes, cls, gbs, self.system.nic_class,
                        self.system.nic_gbps_per_gpu)
        return Span(group, 1, cls, gbs)

    @property
    def words(self) -> str:
        """'16 ranks on 2 nodes of 8: NVLink 3 through NVSwitch (...) within a node; NVIDIA
        DGX A100: 8 x ... (200 Gb/s per GPU) between nodes'."""
        nodes = self.nodes
        head = (f"{self.ranks} ranks on {nodes} node{'s' if nodes > 1 else ''}"
                f"{f' of {self.per_node}' if nodes > 1 else ''}")
        if self._reach > self.per_node and self.ranks <= self._reach:
            return (f"{head}: {self.links.words} across the {self.links.nvl_domain_gpus}-GPU "
                    "NVLink domain")
        inside = self.span(min(self.ranks, self._reach))
        link = self.links.words if inside.link_class != PCIE else (
            f"PCIe ({inside.link_gbs:g} GB/s per direction"
            f"{'' if self.links.link_class == PCIE else '; ' + self.links.words})")
        if nodes == 1:
            return f"{head}: {link}"
        if self._reach > self.per_node:
            return (f"{head}: {link} within each {self.links.nvl_domain_gpus}-GPU NVLink domain; "
                    f"{self.system.words} between domains")
        return f"{head}: {link} within a node; {self.system.words} between nodes"


def layout_for(gpu: Gpu, ranks: int, per_node: int | None = None,
               price: Price | None = None) -> Layout:
    """``ranks`` of ``gpu``, ``per_node`` to a node (None: as many as one node holds: the
    catalog's node size, else the system's), on the system its price or reference names."""
    system = system_of(gpu, price)
    size = gpu.gpus_per_node or system.gpus_per_node
    return Layout(ranks, max(1, min(ranks, per_node or size)), links_of(gpu), system, size)


def span_for(gpu: Gpu, ranks: int, per_node: int | None = None,
             price: Price | None = None) -> Span:
    """What a collective of all ``ranks`` of ``gpu`` crosses, ``per_node`` to a node (None: as
    many as a node holds), on the system the price or the GPU's reference names."""
    return layout_for(gpu, ranks, per_node, price).span(ranks)


@dataclass(frozen=True, slots=True)
class CommProjection:
    """A rank's collectives on another layout, per step (ms)."""

    exposed_ms: float  # projected: the measured exposed fraction of each call type kept
    exposed_low_ms: float  # with the transfer divided by (1 + the class error)
    exposed_high_ms: float  # with the transfer multiplied by it
    measured_exposed_ms: float
    transfer_ms: float  # projected transfer (all calls, kernel time)
    wait_ms: float  # waiting for late ranks, held as measured (or estimated: see notes)
    held_ms: float  # kernel time of calls the model cannot project (no size, unknown type)
    measured_kernel_ms: float
    error_pct: float  # the largest class error among the projected calls' fabrics
    wait_estimated: bool  # some wait was not recorded: measured kernel - model on its fabric


def project_calls(works: Sequence[CommWork], measured: Layout, target: Layout,
                  model: CommModel | None = None) -> CommProjection:
    """The measured rank's collectives (``works``) on ``target`` instead of ``measured``.

    Each call type keeps its wait for late ranks (it comes from the ranks' imbalance, not from
    the link; a rank's trace alone does not record it: then it is the measured kernel time
    beyond what the model gives the measured fabric) and gets the model's transfer on the
    target: kernel' = wait + transfer(target), exposed' = exposed x kernel' / kernel (the
    overlapped fraction kept). A group of the whole job grows with the target's ranks; smaller
    groups (tensor-parallel pairs) keep their size. Calls without a size or of an unknown type
    are held as measured."""
    model = model or load_model()
    out = dict.fromkeys(("exposed", "low", "high", "measured", "transfer", "wait", "held",
                         "kernel", "error"), 0.0)
    estimated = False
    for w in works:
        out["measured"] += w.exposed_ms
        out["kernel"] += w.kernel_ms
        group = w.group_size or measured.ranks
        grown = target.ranks if group >= measured.ranks else group
        now = model.predict_us(w.collective, w.bytes or 0, measured.span(group))
        new_span = target.span(grown)
        new = model.predict_us(w.collective, w.bytes or 0, new_span)
        if w.bytes is None or now is None or new is None or math.isinf(new) or w.kernel_ms <= 0:
            out["held"] += w.kernel_ms
            for k in ("exposed", "low", "high"):
                out[k] += w.exposed_ms
            continue
        if w.wait_ms is None:
            estimated = True
        wait = w.wait_ms if w.wait_ms is not None else max(0.0, w.kernel_ms
                                                           - now * w.calls / 1e3)
        transfer = new * w.calls / 1e3
        err = model.fit_for(new_span).error_pct / 100
        out["error"] = max(out["error"], err * 100)
        out["transfer"] += transfer
        out["wait"] += wait
        share = w.exposed_ms / w.kernel_ms
        out["exposed"] += share * (wait + transfer)
        out["low"] += share * (wait + transfer / (1 + err))
        out["high"] += share * (wait + transfer * (1 + err))
    return CommProjection(out["exposed"], out["low"], out["high"], out["measured"],
                          out["transfer"], out["wait"], out["held"], out["kernel"],
                          out["error"], estimated)
