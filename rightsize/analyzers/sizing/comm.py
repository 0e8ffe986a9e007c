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
fit) -- and ``ratio`` per collective from the systems that published more than all-reduce.
``benchmarks/fit_comm.py`` fits the table (``catalog/data/comm_model.json``) and states each
class's leave-one-system-out error, which is the range a projection carries. Pure but for
reading the package table once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rightsize.analyzers.job import names

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
    ratios: Mapping[str, Mapping[str, float]]  # scope -> collective -> eta ratio to all-reduce

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
        ratio = self.ratios.get(fit.scope, {}).get(collective, 1.0)
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
