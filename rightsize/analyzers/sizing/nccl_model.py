"""NCCL's cost model, rightsize's own implementation: which algorithm and protocol NCCL runs a
collective with, and how long that takes on a fabric.

Inputs: a collective type (``analyzers/job/names``), its nccl-tests size in bytes (NCCL's
``nBytes``: the whole buffer, an all-gather's output), the :class:`Span` its ranks cross and a
:class:`Factors` (the fitted efficiencies; ``NOMINAL`` is NCCL's own view). Output: the
:class:`Candidate` per algorithm x protocol and, by :func:`timing`, the one NCCL picks and its
time in µs.

NCCL's facts (``nccl_tables``: tuning.cc, paths.cc 2.2x) -- time = latency + nBytes / algbw.
Latency: ``BASE_LAT`` plus ``HW_LAT`` per hop: a ring's 2(n-1) hops for an all-reduce (n-1 for
all-gather and reduce-scatter), 2N of them between nodes; a tree's 2 x ((ranks per node - 1) +
log2 N); NVLS one NVLink hop, NVLS-tree plus 2 log2 N network hops; a network hop also waits
the plugin's declared latency in NCCL's view (EFA: 150 µs), and each step of a multi-node
ring NCCL's post overhead (2 µs on AMD CPUs). A multi-node ring's Simple latency is x1.4 (x1.9
before Ampere) past 64 bytes per channel and rank. Bandwidth: a bus bandwidth per algorithm,
refined per protocol (LL half of it, capped per GPU generation in a node and per CPU vendor
across nodes; LL128 0.92, capped per channel; a tree 0.92, capped per channel, with NCCL's
per-size correction; LL on a tree / 3.8), turned into algbw: x n / nsteps on a ring, x 5/6 for
NVLS, x 1/2 for a tree. LL128 only over NVLink/xGMI; NVLS on NVSwitch from Hopper.

What rightsize adds: each algorithm's bus bandwidth is bounded by the links it crosses -- the
in-node link per GPU, and across nodes the node's NICs (a ring sends 2(n-1)/n of the buffer
through them, a tree of 2 nodes half that, NVLS-tree the buffer once per node). Over PCIe NCCL
copies GPU to GPU only under a PCIe switch (or a pair through an AMD CPU); otherwise through
host memory, each GPU writing and reading over its own link and GPUs behind one switch sharing
its uplink. NCCL picks with its nominal view (:data:`NOMINAL`); the time of its pick comes
from the fitted :class:`Factors`. All-to-all and send/receive are point-to-point: each GPU's
share of the buffer over its link, the part leaving the node over its NIC share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rightsize.analyzers.job import names
from rightsize.analyzers.sizing import nccl_tables as tb
from rightsize.analyzers.sizing.nccl_tables import Candidate, Timing, tree_correction  # noqa

LL, LL128, SIMPLE, PROTOCOLS = tb.LL, tb.LL128, tb.SIMPLE, tb.PROTOCOLS
RING, TREE, NVLS, NVLS_TREE, P2P = tb.RING, tb.TREE, tb.NVLS, tb.NVLS_TREE, tb.P2P
NVLINK, XGMI, PCIE, PCIE_HOST = tb.NVLINK, tb.XGMI, tb.PCIE, tb.PCIE_HOST
NET_CLASSES = tb.NET_CLASSES


@dataclass(frozen=True, slots=True)
class Span:
    """What the ranks of one collective cross."""

    ranks: int
    nodes: int
    link_class: str  # nvlink | xgmi | pcie: within a node
    link_gbs: float  # GB/s per direction per GPU within a node
    nic_class: str | None = None  # infiniband | roce | efa | slingshot | ethernet
    nic_gbps: float | None = None  # Gb/s per direction per GPU across nodes
    topology: str = ""  # nvswitch | mesh | p2p | cpu | host ('' : the class's usual)
    arch: str = ""  # GPU generation: volta, ampere, hopper, blackwell, cdna3 ... ('' unknown)
    links: int = 0  # NVLink/xGMI links per GPU (NCCL's channels follow them); 0: unknown
    nic_via_cpu: bool = False  # the NICs hang off the CPU (Grace), not a PCIe switch: no LL128
    link_gen: int = 0  # NVLink generation (0: unknown, or not NVLink)
    cpu: str = ""  # the host CPU: intel | amd | arm ('' unknown): NCCL's per-vendor choices
    switch_gpus: int = 0  # GPUs behind one PCIe switch, sharing its uplink (0: unknown)
    legacy: bool = False  # an NCCL before 2.12: its older tuning (nccl_tables.LEGACY_*)

    @property
    def per_node(self) -> int:
        return math.ceil(self.ranks / self.nodes)

    @property
    def fabric_class(self) -> str:
        """The class whose fit applies: the network's across nodes, the link's within one."""
        return (self.nic_class or "inter") if self.nodes > 1 else self.link_key

    @property
    def link_key(self) -> str:
        """The in-node efficiency class: nvlink4 (its generation; nvlink where unknown), xgmi,
        pcie, or pcie_host without peer-to-peer."""
        if self.link_class == PCIE:
            return PCIE if self.pcie_p2p else PCIE_HOST
        if self.link_class == NVLINK and self.link_gen:
            return f"{NVLINK}{self.link_gen}"
        return self.link_class

    @property
    def pcie_p2p(self) -> bool:
        """Whether NCCL copies GPU to GPU over PCIe (P2P): only under a PCIe switch ('p2p'),
        or a pair through an AMD CPU ('cpu'); otherwise through host memory (NCCL's
        paths.cc: P2P up to PXB, across the CPU only for 2 GPUs on AMD)."""
        if self.topology == "p2p":
            return True
        return self.topology == "cpu" and self.per_node <= 2 and self.cpu == "amd"

    @property
    def generation(self) -> int:
        return tb.GENERATIONS.get(self.arch, 1)

    @property
    def nvls(self) -> bool:
        """NVLink SHARP: an NVSwitch node of Hopper or later (NCCL 2.17+)."""
        return (self.link_class == NVLINK and self.topology in ("nvswitch", "")
                and self.arch in ("hopper", "blackwell") and self.per_node > 1
                and not self.legacy)

    @property
    def ll128(self) -> bool:
        """NCCL enables LL128 where the node's GPUs talk over NVLink (RCCL: xGMI too) and,
        across nodes, each GPU reaches its NIC through a PCIe switch; before 2.12 only on
        Volta and Ampere over NVLink."""
        if self.legacy and (self.link_class != NVLINK
                            or self.arch not in tb.LEGACY_LL128_ARCHS):
            return False
        return self.link_class in (NVLINK, XGMI) and not (self.nodes > 1 and self.nic_via_cpu)

    @property
    def channels(self) -> int:
        """NCCL's ring channels: one per NVLink/xGMI link (2 to 32), 2 over PCIe."""
        if self.link_class == PCIE:
            return 2
        return max(2, min(32, self.links or 12))


@dataclass(frozen=True, slots=True)
class Factors:
    """The fitted efficiencies (see the module docstring); missing keys fall back to 1.0
    (bandwidth) and 0 (latency), which is NCCL's nominal view."""

    link_eta: Mapping[str, float] = field(default_factory=dict)  # class -> fraction of link
    net_eta: Mapping[str, float] = field(default_factory=dict)  # class -> fraction of NICs
    nvls_eta: float = 1.0
    p2p_eta: float = 1.0  # all-to-all, send/receive within a node: fraction of the link
    net_p2p_eta: float = 1.0  # ... across nodes: fraction of a GPU's NIC
    self_steps: float = 0.0  # a ring's extra steps over a GPU link: its own chunk's copy
    fill_mb: float = 0.0  # Simple's pipeline fill: MB more at the algbw once past it
    lat_scale: Mapping[str, float] = field(default_factory=dict)  # link class -> x NCCL's
    # latency terms
    net_lat_us: Mapping[str, float] = field(default_factory=dict)  # class -> µs per net hop
    net_ll_eta: Mapping[str, float] = field(default_factory=dict)  # class -> LL/LL128 share
    pcie_oneway: float = 1.0  # a PCIe link carrying one direction only: x its two-way rate
    nominal: bool = False  # NCCL's own view: its link figures, line-rate NICs

    def link(self, span: Span, two_way: bool = True) -> float:
        """GB/s per direction a GPU's in-node link carries for a ring's hop (``two_way``:
        each GPU sends and receives at once, as in every ring but a pair's broadcast)."""
        if span.link_class == PCIE:
            return self._pcie(span, two_way)
        if self.nominal:
            return span.link_gbs * tb.NCCL_LINK_FRACTION.get(span.link_class, 0.8)
        return span.link_gbs * _of(self.link_eta, span.link_key, 1.0)

    def _pcie(self, span: Span, two_way: bool) -> float:
        """A PCIe hop: peer-to-peer at the link's rate; through host memory (NCCL's SHM) the
        GPU writes to and reads from host memory over its own link, and GPUs behind one PCIe
        switch share its uplink (each GPU's flow once each way)."""
        def rate(key: str, flows: int) -> float:
            if self.nominal:
                return span.link_gbs * tb.NCCL_LINK_FRACTION[key] / flows
            eta = _of(self.link_eta, key, 1.0) * (1.0 if two_way else self.pcie_oneway)
            return span.link_gbs * eta / flows

        if span.pcie_p2p:
            if span.topology == "p2p" and 1 < span.switch_gpus < span.per_node:
                return min(rate(PCIE, 1), rate(PCIE_HOST, 1))  # a ring leaves each switch
            return rate(PCIE, 1)
        return rate(PCIE_HOST, min(max(span.switch_gpus, 1), span.per_node) if two_way else 1)

    def lat(self, span: Span) -> float:
        """The latency scale of the span's in-node link class (1 in NCCL's own view)."""
        return 1.0 if self.nominal else _of(self.lat_scale, span.link_key, 1.0)

    def nics(self, span: Span, protocol: str = SIMPLE) -> float:
        """GB/s a node's NICs carry (ranks per node x the NIC per GPU); LL and LL128 at
        ``net_ll_eta`` of that (their small flagged writes, slow on some networks)."""
        gbs = span.per_node * (span.nic_gbps or 0.0) / 8
        if self.nominal:
            return gbs
        cls = span.nic_class or ""
        ll = _net(self.net_ll_eta, cls, 1.0) if protocol != SIMPLE else 1.0
        return gbs * _of(self.net_eta, cls, 1.0) * ll

    def net_lat(self, span: Span) -> float:
        """µs a network hop adds: in NCCL's view the plugin's declared latency, fitted
        otherwise."""
        if self.nominal:
            return tb.PLUGIN_LAT_US.get(span.nic_class or "", 0.0)
        return _net(self.net_lat_us, span.nic_class or "", 0.0)


NOMINAL = Factors(nominal=True)


def _net(values: Mapping[str, float], cls: str, default: float) -> float:
    """A network's own latency/LL value, else its transport's, else ``default`` (NCCL's)."""
    return values.get(cls, values.get(tb.NET_TRANSPORT.get(cls, ""), default))


POOLED = "*"  # the key of a class-less (pooled) value in Factors' per-class maps


def pool_of(key: str) -> str:
    """The pooled key a class falls back to: PCIe classes pool apart from GPU links."""
    return "pcie" + POOLED if key in (PCIE, PCIE_HOST) else POOLED


def _of(values: Mapping[str, float], key: str, default: float) -> float:
    """A class's value, else its pooled one, else ``default``."""
    return values.get(key, values.get(pool_of(key), default))


def _steps(collective: str, n: int) -> int:
    return {names.ALLREDUCE: 2 * (n - 1), names.ALLGATHER: n - 1,
            names.REDUCESCATTER: n - 1}.get(collective, n)


def _hw(span: Span) -> str:
    return "nvlink" if span.link_class in (NVLINK, XGMI) else "pci"


def candidates(collective: str, span: Span, f: Factors, nvls_ok: bool = True
               ) -> list[Candidate]:
    """Every algorithm x protocol NCCL could run ``collective`` with on ``span`` (``nvls_ok``
    False: a reduction NVLS cannot do, on int8 or fp8 data)."""
    if span.ranks < 2 or collective not in names.BUS_FACTORS:
        return []
    if collective in (names.ALLTOALL, names.SENDRECV):
        return _filled(_p2p(collective, span, f), span, f)
    out = [c for p in PROTOCOLS for c in (_ring(collective, p, span, f),) if c]
    if collective == names.ALLREDUCE and span.nodes > 1:
        out += [c for p in PROTOCOLS for c in (_tree(p, span, f),) if c]
    nvls_ok = nvls_ok or collective == names.ALLGATHER
    if span.nvls and nvls_ok and collective in (names.ALLREDUCE, names.ALLGATHER,
                                                 names.REDUCESCATTER):
        nvls = _nvls(collective, span, f)
        out += [nvls] if nvls else []
    return _filled(out, span, f)


def _filled(out: list[Candidate], span: Span, f: Factors) -> list[Candidate]:
    """Simple's candidates over NVLink/xGMI with the fitted pipeline fill (none in NCCL's
    own view)."""
    if not f.fill_mb or span.link_class == PCIE:
        return out
    return [replace(c, fill_bytes=f.fill_mb * 1e6) if c.protocol == SIMPLE else c
            for c in out]


def _protocol_bus(p: str, bus: float, span: Span, tree: bool, collective: str = names.ALLREDUCE
                  ) -> float:
    """NCCL's per-protocol refinement of a bus bandwidth (module docstring)."""
    if span.legacy:
        quarter = span.nodes > 1 or collective in (names.ALLREDUCE, names.REDUCE)
        return tb.legacy_bus(p, bus, span, tree, quarter)
    g, nodes = span.generation, min(span.nodes, 3) - 1
    ch, ll_cap = span.channels, tb.ll_max(span.generation, span.cpu, span.nodes)
    if tree:
        bus = min(bus * 0.92, ch * tb.TREE_PER_CH[g][nodes])
        if p == LL:
            return min(bus / 3.8, ll_cap)
        if p == LL128:
            return min(bus * (7 / 9 if span.nodes == 1 else 120 / 128),
                       ch * tb.TREE_LL128_PER_CH[g][nodes])
        return bus
    if p == LL:
        return min(bus * 0.5, ll_cap)
    if p == LL128:
        return min(bus * 0.92, ch * tb.RING_LL128_PER_CH[g][nodes])
    return bus


def _ring_hop_lat(p: int, span: Span) -> float:
    """A ring's in-node hop; across nodes each step still posts to the network (NCCL's
    overhead per step, per CPU vendor)."""
    lat = tb.HW_LAT[_hw(span)][RING][p]
    return max(lat, tb.NET_OVERHEAD_US.get(span.cpu, 1.0) * (3 if p == 2 else 1)) \
        if span.nodes > 1 else lat


def _inter_lat(p: int, algo: str, span: Span, f: Factors) -> float:
    table = tb.HW_LAT["net"][TREE if span.per_node == 1 and algo == RING else algo]
    return table[p] + f.net_lat(span) * (2 if p == 2 else 1)  # Simple also waits a flush


def _ring(collective: str, p: str, span: Span, f: Factors) -> Candidate | None:
    if p == LL128 and not span.ll128:
        return None
    n, pi = span.ranks, PROTOCOLS.index(p)
    one_way = collective in (names.BROADCAST, names.REDUCE) and span.per_node <= 2
    bus = f.link(span, not one_way) if span.per_node > 1 or span.nodes == 1 else math.inf
    if span.nodes > 1:
        bus = min(bus, f.nics(span, p))
    bus = _protocol_bus(p, bus, span, tree=False, collective=collective)
    steps = _steps(collective, n)
    s = f.lat(span)
    if collective in (names.BROADCAST, names.REDUCE):
        lat = s * tb.BASE_LAT[RING][pi] + (s * tb.HW_LAT[_hw(span)][RING][pi] if span.nodes == 1
                                        else _inter_lat(pi, RING, span, f))
        algbw = bus
    else:
        inter = _inter_steps(collective, span, steps)
        lat = (s * (tb.BASE_LAT[RING][pi] + (steps - inter) * _ring_hop_lat(pi, span))
               + inter * _inter_lat(pi, RING, span, f))
        # the own chunk's copy runs in the GPU's memory: a step's worth only next to a GPU
        # link (NVLink, xGMI), nothing next to PCIe
        algbw = bus * n / (steps + (f.self_steps if span.link_class != PCIE else 0.0))
    multi = span.nodes > 1 and collective == names.ALLREDUCE and p == SIMPLE
    return Candidate(RING, p, lat, algbw, 1.4 if span.generation else 1.9,
                     64.0 * span.channels * n if multi else math.inf)


def _inter_steps(collective: str, span: Span, steps: int) -> int:
    """A ring's steps between nodes: 2N for an all-reduce, N - 1 for an all-gather or a
    reduce-scatter (all of them at one rank per node)."""
    if span.nodes == 1:
        return 0
    if span.per_node == 1:
        return steps
    return 2 * span.nodes if collective == names.ALLREDUCE else span.nodes - 1


def _tree(p: str, span: Span, f: Factors) -> Candidate | None:
    if p == LL128 and not span.ll128:
        return None
    link = f.link(span) if span.per_node > 1 else math.inf
    if f.nominal:  # NCCL: a tree of 2 nodes runs at its (raised) in-node speed, of more at
        bus = link if span.nodes <= 2 else min(link, f.nics(span, p))  # the NICs' as a ring
    else:  # 2 nodes' NICs carry the buffer once each way (half a ring's traffic); in a
        # double binary tree of more, a node is inner in one tree: twice that, a ring's
        nics = (2 if span.nodes <= 2 else 1) * f.nics(span, p)
        if p == SIMPLE:  # NCCL's tree derating (x 0.92) is its in-node chain's: a tree
            # bound by the NICs runs at their rate, as a ring does
            return _tree_of(p, span, f, min(_protocol_bus(p, link, span, True), nics))
        bus = min(link, nics)
    return _tree_of(p, span, f, _protocol_bus(p, bus, span, tree=True))


def _tree_of(p: str, span: Span, f: Factors, bus: float) -> Candidate:
    """The tree's candidate at bus bandwidth ``bus`` (GB/s): the latency of its depth."""
    pi = PROTOCOLS.index(p)
    lat = (f.lat(span) * (tb.BASE_LAT[TREE][pi] + 2 * (span.per_node - 1)
                          * tb.HW_LAT[_hw(span)][TREE][pi])
           + 2 * int(math.log2(span.nodes)) * _inter_lat(pi, TREE, span, f))
    return Candidate(TREE, p, lat, bus * 0.5, corrected=True)


def _nvls(collective: str, span: Span, f: Factors) -> Candidate | None:
    """NVLink SHARP within a node (NVLS), and NVLS-tree across nodes (all-reduce only)."""
    g = span.per_node
    # NCCL's view: 5/6 of the bus; achieved: each GPU moves (1 + 1/g) x the buffer each way
    # through the switch (the reduced slice in, the multicast out), g / (g + 1)
    share = 5 / 6 if f.nominal else g / (g + 1)
    bus = span.link_gbs * (0.8 if f.nominal else f.nvls_eta)
    if collective != names.ALLREDUCE:
        if span.nodes > 1:
            return None  # NVLS all-gather/reduce-scatter across nodes needs CollNet
        return Candidate(NVLS, SIMPLE, tb.HW_LAT["nvlink"][NVLS][2] * f.lat(span),
                         bus * (g - 1) / g)
    if span.nodes == 1:
        return Candidate(NVLS, SIMPLE, tb.HW_LAT["nvlink"][NVLS][2] * f.lat(span), bus * share)
    nics = f.nics(span) / (1 if span.nodes <= 2 else 2)
    lat = (f.lat(span) * tb.HW_LAT["nvlink"][NVLS_TREE][2] + 2 * int(math.log2(span.nodes))
           * _inter_lat(2, NVLS_TREE, span, f))
    return Candidate(NVLS_TREE, SIMPLE, lat, min(bus * share, nics))


def _p2p(collective: str, span: Span, f: Factors) -> list[Candidate]:
    """All-to-all and send/receive: each GPU's share over its link, the part leaving the
    node over its NIC (module docstring); LL for small messages, Simple otherwise."""
    n, g = span.ranks, span.per_node
    link = f.link(span) * (1.0 if f.nominal else f.p2p_eta)
    nic = f.nics(span) / g  # a GPU's share of its node's NICs
    if collective == names.SENDRECV:
        inside, across = (1.0, 0.0) if span.nodes == 1 else (0.0, 1.0)
        nic = (span.nic_gbps or 0.0) / 8 * (1.0 if f.nominal else f.net_p2p_eta)
    else:
        inside, across = (g - 1) / n, (n - g) / n
    seconds_per_gb = max(inside / link if inside else 0.0, across / nic if across else 0.0)
    hops = 1 if collective == names.SENDRECV else n - 1
    out = []
    for p in (LL, SIMPLE):
        pi = PROTOCOLS.index(p)
        s = f.lat(span)
        lat = s * tb.BASE_LAT[P2P][pi] + (s * tb.HW_LAT[_hw(span)][RING][pi] if span.nodes == 1
                                       else _inter_lat(pi, RING, span, f)) * min(hops, 2)
        bw = (1 / seconds_per_gb) * (0.5 if p == LL else 1.0)
        out.append(Candidate(P2P, p, lat, bw))
    return out


def choose(collective: str, size_bytes: float, span: Span, nvls_ok: bool = True
           ) -> Candidate | None:
    """What NCCL runs: the candidate its own nominal model finds fastest."""
    options = candidates(collective, span, NOMINAL, nvls_ok)
    return min(options, key=lambda c: c.time_us(size_bytes)) if options else None


def timing(collective: str, size_bytes: float, span: Span, f: Factors,
           nvls_ok: bool = True) -> Timing | None:
    """NCCL's pick for this call and its time under the fitted factors ``f``."""
    pick = choose(collective, size_bytes, span, nvls_ok)
    if pick is None:
        return None
    fitted = next(c for c in candidates(collective, span, f, nvls_ok)
                  if (c.algorithm, c.protocol) == (pick.algorithm, pick.protocol))
    return Timing(fitted.time_us(size_bytes), pick.algorithm, pick.protocol)
