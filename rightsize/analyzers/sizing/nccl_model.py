"""NCCL's cost model, rightsize's own implementation: which algorithm and protocol NCCL runs a
collective with, and how long that takes on a fabric.

Inputs: a collective type (``analyzers/job/names``), its nccl-tests size in bytes (NCCL's
``nBytes``: the whole buffer, an all-gather's output), the :class:`Span` its ranks cross and a
:class:`Factors` (the fitted efficiencies; ``NOMINAL`` is NCCL's own view). Output: the
:class:`Candidate` per algorithm x protocol and, by :func:`timing`, the one NCCL picks and its
time in µs.

The facts carried over from NCCL's ``src/graph/tuning.cc`` (2.2x) -- its numbers, not its code:
time = latency + nBytes / algbw. Latency: ``BASE_LAT`` per algorithm/protocol plus
``HW_LAT`` per hop (NVLink, PCIe or network): a ring crosses 2(n-1) hops for an all-reduce
(n-1 for all-gather and reduce-scatter), of which 2(N-1) (N-1) between nodes -- it grows
with the ranks; a tree 2 x ((ranks per node - 1) intra + log2(N) inter) -- with the log of
the nodes; NVLS one NVLink hop (+ one network hop), NVLS-tree one plus 2 log2(N). A
multi-node ring's Simple latency is x1.4 (x1.9 before Ampere) once each channel of each rank
has 64 bytes (its "plateau"). Bandwidth: a bus bandwidth per algorithm, refined per protocol
-- LL half of it (capped per GPU generation), LL128 0.92 of it (capped per channel),
tree 0.92 (capped per channel), LL on a tree / 3.8 -- and turned into algbw: x n / nsteps on a
ring (1 / the nccl-tests bus factor), x 5/6 for NVLS, x 1/2 for a tree. A tree's bandwidth is
corrected by NCCL's per-size factors (64 B to 256 MiB). LL128 runs only over NVLink (and
xGMI); NVLS only on NVSwitch from Hopper; NVLS-tree and tree across nodes.

What rightsize adds: the bus bandwidth each algorithm can reach is bounded by the links it
crosses -- the in-node link per GPU (``link_gbs``), and across nodes the node's NICs
(ranks per node x ``nic_gbps``): a ring sends 2(n-1)/n of the buffer through each node's
NICs, a tree of 2 nodes half that (of more, as much), NVLS-tree the buffer once per node.
NCCL picks with its nominal view (NCCL's per-link NVLink/PCIe figures, the NIC at its line
rate, no efficiency: :data:`NOMINAL`); the time of its pick comes from the fitted
:class:`Factors` (achieved fractions per link class, a latency scale, a latency per network
hop per network class). All-to-all and send/receive are point-to-point: each GPU's share of
the buffer over its link, the part that leaves the node over its NIC share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rightsize.analyzers.job import names

LL, LL128, SIMPLE = "LL", "LL128", "Simple"
PROTOCOLS = (LL, LL128, SIMPLE)
RING, TREE, NVLS, NVLS_TREE, P2P = "ring", "tree", "nvls", "nvls_tree", "p2p"
NVLINK, XGMI, PCIE = "nvlink", "xgmi", "pcie"  # in-node link classes
PCIE_HOST = "pcie_host"  # PCIe without peer-to-peer: staged through host memory
NET_CLASSES = ("infiniband", "roce", "efa", "slingshot", "ethernet")

# NCCL tuning.cc (2.2x): µs, {LL, LL128, Simple}
BASE_LAT = {TREE: (6.8, 14.0, 8.4), RING: (6.6, 14.0, 8.4), NVLS: (0.0, 0.0, 0.0),
            NVLS_TREE: (0.0, 0.0, 0.0), P2P: (6.6, 14.0, 8.4)}
HW_LAT = {  # per hop: NVLink, PCIe, network
    "nvlink": {TREE: (0.6, 1.25, 4.0), RING: (0.6, 1.9, 3.4), NVLS: (0.0, 0.0, 25.0),
               NVLS_TREE: (0.0, 0.0, 25.0)},
    "pci": {TREE: (1.0, 1.9, 4.0), RING: (1.0, 2.5, 5.7), NVLS: (0.0, 0.0, 0.0),
            NVLS_TREE: (0.0, 0.0, 0.0)},
    "net": {TREE: (5.0, 8.5, 14.0), RING: (2.7, 4.0, 14.0), NVLS: (0.0, 0.0, 18.0),
            NVLS_TREE: (0.0, 0.0, 14.0)},
}
# Per GPU generation (Volta, Ampere, Hopper, Blackwell) x nodes (1, 2, more): GB/s
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
RING_LL128_PER_CH = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (73.4,) * 3)
TREE_LL128_PER_CH = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (73.4, 73.4, 58.0))
TREE_PER_CH = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (77.4, 82.8, 72.0))
# NCCL's tree bandwidth correction by log2(nBytes / 64), 64 B .. 256 MiB, per protocol
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
     1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
     1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
# NCCL's view of a link, as a fraction of its line rate: an NVLink at 20 GB/s per link
# (25 on the wire; Hopper 20.6; Blackwell 40.1 of 50), PCIe Gen3 x16 at 12 of 16 GB/s
NCCL_LINK_FRACTION = {NVLINK: 0.8, XGMI: 0.8, PCIE: 0.75, PCIE_HOST: 0.75}
GENERATIONS = {"volta": 0, "turing": 0, "ampere": 1, "ada": 1, "hopper": 2, "blackwell": 3,
               "cdna2": 1, "cdna3": 2, "cdna4": 3}
NET_OVERHEAD_US = 1.0  # NCCL's per-step network post overhead (x86 Intel; 2 on AMD CPUs)


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
            return PCIE_HOST if self.topology == "host" else PCIE
        if self.link_class == NVLINK and self.link_gen:
            return f"{NVLINK}{self.link_gen}"
        return self.link_class

    @property
    def generation(self) -> int:
        return GENERATIONS.get(self.arch, 1)

    @property
    def nvls(self) -> bool:
        """NVLink SHARP: an NVSwitch node of Hopper or later (NCCL 2.17+)."""
        return (self.link_class == NVLINK and self.topology in ("nvswitch", "")
                and self.arch in ("hopper", "blackwell") and self.per_node > 1)

    @property
    def ll128(self) -> bool:
        """NCCL enables LL128 where the node's GPUs talk over NVLink (RCCL: xGMI too) and,
        across nodes, each GPU reaches its NIC through a PCIe switch."""
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
    self_steps: float = 0.0  # a ring's extra steps: its own chunk's copy
    fill_mb: float = 0.0  # Simple's pipeline fill: MB more at the algbw once past it
    lat_scale: Mapping[str, float] = field(default_factory=dict)  # link class -> x NCCL's
    # latency terms
    net_lat_us: Mapping[str, float] = field(default_factory=dict)  # class -> µs per net hop
    net_ll_eta: Mapping[str, float] = field(default_factory=dict)  # class -> LL/LL128 share
    nominal: bool = False  # NCCL's own view: its link figures, line-rate NICs

    def link(self, span: Span) -> float:
        if self.nominal:
            return span.link_gbs * NCCL_LINK_FRACTION.get(span.link_class if span.link_key
                                                          != PCIE_HOST else PCIE_HOST, 0.8)
        return span.link_gbs * _of(self.link_eta, span.link_key, 1.0)

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
        ll = _of(self.net_ll_eta, cls, 1.0) if protocol != SIMPLE else 1.0
        return gbs * _of(self.net_eta, cls, 1.0) * ll

    def net_lat(self, span: Span) -> float:
        return 0.0 if self.nominal else _of(self.net_lat_us, span.nic_class or "", 0.0)


NOMINAL = Factors(nominal=True)
POOLED = "*"  # the key of a class-less (pooled) value in Factors' per-class maps


def pool_of(key: str) -> str:
    """The pooled key a class falls back to: PCIe classes pool apart from GPU links."""
    return "pcie" + POOLED if key in (PCIE, PCIE_HOST) else POOLED


def _of(values: Mapping[str, float], key: str, default: float) -> float:
    """A class's value, else its pooled one, else ``default``."""
    return values.get(key, values.get(pool_of(key), default))


@dataclass(frozen=True, slots=True)
class Candidate:
    """One algorithm x protocol on one span: t(size) = lat_us (x plateau) + size / algbw."""

    algorithm: str
    protocol: str
    lat_us: float
    algbw_gbs: float  # GB/s, before the tree's per-size correction
    plateau: float = 1.0  # a multi-node ring's Simple latency factor once past 64 B/channel
    plateau_bytes: float = math.inf
    corrected: bool = False  # an all-reduce tree: NCCL's per-size bandwidth correction
    fill_bytes: float = 0.0  # Simple's pipeline fill (Factors.fill_mb)

    def time_us(self, size_bytes: float) -> float:
        bw = self.algbw_gbs * (tree_correction(self.protocol, size_bytes) if self.corrected
                               else 1.0)
        lat = self.lat_us * (self.plateau if size_bytes >= self.plateau_bytes else 1.0)
        fill = self.fill_bytes * size_bytes / (size_bytes + self.fill_bytes) \
            if self.fill_bytes else 0.0
        return lat + (size_bytes + fill) / (1000.0 * bw)


def tree_correction(protocol: str, size_bytes: float) -> float:
    log = int(size_bytes // 64).bit_length() - 1
    row = TREE_CORRECTION[PROTOCOLS.index(protocol)]
    return row[log] if 0 <= log < len(row) else 1.0


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


def _protocol_bus(p: str, bus: float, span: Span, tree: bool) -> float:
    """NCCL's per-protocol refinement of a bus bandwidth (module docstring)."""
    g, nodes = span.generation, min(span.nodes, 3) - 1
    ch = span.channels
    if tree:
        bus = min(bus * 0.92, ch * TREE_PER_CH[g][nodes])
        if p == LL:
            return min(bus / 3.8, LL_MAX_BW[g][nodes])
        if p == LL128:
            return min(bus * (7 / 9 if span.nodes == 1 else 120 / 128),
                       ch * TREE_LL128_PER_CH[g][nodes])
        return bus
    if p == LL:
        return min(bus * 0.5, LL_MAX_BW[g][nodes])
    if p == LL128:
        return min(bus * 0.92, ch * RING_LL128_PER_CH[g][nodes])
    return bus


def _intra_lat(p: int, algo: str, span: Span, f: Factors) -> float:
    lat = HW_LAT[_hw(span)][algo][p]
    if span.nodes > 1:
        lat = max(lat, NET_OVERHEAD_US * (3 if p == 2 else 1))
    return lat


def _inter_lat(p: int, algo: str, span: Span, f: Factors) -> float:
    table = HW_LAT["net"][TREE if span.per_node == 1 and algo == RING else algo]
    return table[p] + f.net_lat(span) * (2 if p == 2 else 1)  # Simple also waits a flush


def _ring(collective: str, p: str, span: Span, f: Factors) -> Candidate | None:
    if p == LL128 and not span.ll128:
        return None
    n, pi = span.ranks, PROTOCOLS.index(p)
    bus = f.link(span) if span.per_node > 1 or span.nodes == 1 else math.inf
    if span.nodes > 1:
        bus = min(bus, f.nics(span, p))
    bus = _protocol_bus(p, bus, span, tree=False)
    steps = _steps(collective, n)
    s = f.lat(span)
    if collective in (names.BROADCAST, names.REDUCE):
        lat = s * BASE_LAT[RING][pi] + (s * HW_LAT[_hw(span)][RING][pi] if span.nodes == 1
                                        else _inter_lat(pi, RING, span, f))
        algbw = bus
    else:
        inter = 0 if span.nodes == 1 else (2 if collective == names.ALLREDUCE else 1) * (
            span.nodes - 1)
        lat = (s * (BASE_LAT[RING][pi] + (steps - inter) * _intra_lat(pi, RING, span, f))
               + inter * _inter_lat(pi, RING, span, f))
        algbw = bus * n / (steps + f.self_steps)
    multi = span.nodes > 1 and collective == names.ALLREDUCE and p == SIMPLE
    return Candidate(RING, p, lat, algbw, 1.4 if span.generation else 1.9,
                     64.0 * span.channels * n if multi else math.inf)


def _tree(p: str, span: Span, f: Factors) -> Candidate | None:
    if p == LL128 and not span.ll128:
        return None
    pi = PROTOCOLS.index(p)
    link = f.link(span) if span.per_node > 1 else math.inf
    if f.nominal:  # NCCL: a tree of 2 nodes runs at its (raised) in-node speed, of more at
        bus = link if span.nodes <= 2 else min(link, f.nics(span, p))  # the NICs' as a ring
    else:  # 2 nodes' NICs carry the buffer once each way (half a ring's traffic); in a
        # double binary tree of more, a node is inner in one tree: twice that, a ring's
        bus = min(link, (2 if span.nodes <= 2 else 1) * f.nics(span, p))
    bus = _protocol_bus(p, bus, span, tree=True)
    lat = (f.lat(span) * (BASE_LAT[TREE][pi] + 2 * (span.per_node - 1)
                          * _intra_lat(pi, TREE, span, f))
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
        return Candidate(NVLS, SIMPLE, HW_LAT["nvlink"][NVLS][2] * f.lat(span),
                         bus * (g - 1) / g)
    if span.nodes == 1:
        return Candidate(NVLS, SIMPLE, HW_LAT["nvlink"][NVLS][2] * f.lat(span), bus * share)
    nics = f.nics(span) / (1 if span.nodes <= 2 else 2)
    lat = (f.lat(span) * HW_LAT["nvlink"][NVLS_TREE][2] + 2 * int(math.log2(span.nodes))
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
        lat = s * BASE_LAT[P2P][pi] + (s * HW_LAT[_hw(span)][RING][pi] if span.nodes == 1
                                       else _inter_lat(pi, RING, span, f)) * min(hops, 2)
        bw = (1 / seconds_per_gb) * (0.5 if p == LL else 1.0)
        out.append(Candidate(P2P, p, lat, bw))
    return out


@dataclass(frozen=True, slots=True)
class Timing:
    us: float
    algorithm: str
    protocol: str


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
