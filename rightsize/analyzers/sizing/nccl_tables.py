"""NCCL's own tuning figures, as rightsize's communication model (``nccl_model``) uses them.

Facts carried over from NCCL's ``src/graph/tuning.cc``, ``topo.h`` and ``paths.cc`` (2.2x),
and from network plugins -- their numbers, not their code -- and NCCL's time of one algorithm x
protocol (:class:`Candidate`: latency + nBytes / algbw, with its tree correction and ring
plateau). Inputs: none; outputs: constants and small lookups (per GPU generation, CPU vendor,
network class, NCCL version). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rightsize.analyzers.sizing.nccl_model import Span

LL, LL128, SIMPLE = "LL", "LL128", "Simple"
PROTOCOLS = (LL, LL128, SIMPLE)
RING, TREE, NVLS, NVLS_TREE, P2P = "ring", "tree", "nvls", "nvls_tree", "p2p"
NVLINK, XGMI, PCIE = "nvlink", "xgmi", "pcie"  # in-node link classes
PCIE_HOST = "pcie_host"  # PCIe without peer-to-peer: through host memory (NCCL's SHM)
NET_CLASSES = ("infiniband", "roce", "efa", "slingshot", "ethernet")

# µs, {LL, LL128, Simple}
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
# LL's bus bandwidth cap, GB/s: in one node per GPU generation (Volta, Ampere, Hopper,
# Blackwell); across 2 nodes and more per CPU vendor (NCCL indexes its table by the CPU once
# there is a network: Intel and others row 0, AMD row 1)
LL_MAX_1NODE = (39.0, 87.7, 141.0, 282.0)
LL_MAX_NODES = {"amd": (22.5, 19.0), "": (39.0, 20.4)}  # 2 nodes, more
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
# (25 on the wire; Hopper 20.6; Blackwell 40.1 of 50), PCIe Gen3 x16 at 12 of 16 GB/s (topo.h
# PCI_BW; later generations scale with the lane rate)
NCCL_LINK_FRACTION = {NVLINK: 0.8, XGMI: 0.8, PCIE: 0.75, PCIE_HOST: 0.75}
GENERATIONS = {"volta": 0, "turing": 0, "ampere": 1, "ada": 1, "hopper": 2, "blackwell": 3,
               "cdna2": 1, "cdna3": 2, "cdna4": 3}
CPUS = ("intel", "amd", "arm")
# NCCL's per-step network post overhead, µs: 2 on AMD x86 CPUs, 1 on Intel and others
NET_OVERHEAD_US = {"amd": 2.0}
# Latency a network plugin declares per hop (its getProperties ``latency``), which NCCL adds
# to each network hop (twice for Simple: the flush) when it picks: aws-ofi-nccl sets 150 µs on
# EFA (aws/aws-ofi-nccl PR #93, #163); NCCL's own IB/RoCE transport, and aws-ofi-nccl on other
# providers (Slingshot's CXI), declare none
PLUGIN_LAT_US = {"efa": 150.0}
# A network class without its own fitted latency or LL efficiency takes its transport's: RoCE
# runs NCCL's InfiniBand verbs transport (net_ib.cc) on the same NICs
NET_TRANSPORT = {"roce": "infiniband"}
# The NCCL release whose tuning tables these are; older releases chose and ran differently
OLDEST_MODELLED = (2, 12)
# Before 2.12 (NCCL 2.8's tuning.cc): a ring's LL at 1/4 of the bus for an all-reduce or a
# reduce or across nodes (1/3 otherwise); LL128 at 0.92 of it (0.7 at one rank per node),
# capped at 20 GB/s per channel on rings and trees alike; an Ampere node's bus capped at 235
# GB/s; LL's cap in one node 87.7 GB/s on Ampere, 39 on any other GPU; LL128 only on Volta and
# Ampere over NVLink; no NVLS. Latencies are taken as today's (the 2.8.4 log's 17 µs at 4 B
# is within 8% of them).
LEGACY_LL128_PER_CH = 20.0
LEGACY_AMPERE_BUS = 235.0
LEGACY_LL_MAX_1NODE = {"ampere": 87.7}  # other GPUs: 39.0
LEGACY_LL128_ARCHS = ("volta", "ampere")


def ll_max(generation: int, cpu: str, nodes: int, legacy_arch: str | None = None) -> float:
    """NCCL's LL bus bandwidth cap (GB/s): per GPU generation in one node, per CPU vendor
    across nodes (``legacy_arch``: the GPU generation's name under an NCCL before 2.12)."""
    if nodes <= 1:
        if legacy_arch is not None:
            return LEGACY_LL_MAX_1NODE.get(legacy_arch, 39.0)
        return LL_MAX_1NODE[generation]
    return LL_MAX_NODES["amd" if cpu == "amd" else ""][0 if nodes == 2 else 1]


def legacy_bus(p: str, bus: float, span: Span, tree: bool, quarter: bool) -> float:
    """NCCL's per-protocol refinement of a bus bandwidth before 2.12 (``LEGACY_*``;
    ``quarter``: a ring's LL at 1/4 of the bus, else 1/3)."""
    ampere = span.arch == "ampere"
    nodes, ch = min(span.nodes, 3) - 1, span.channels
    ll_cap = ll_max(0, span.cpu, span.nodes, legacy_arch=span.arch)
    ll128_cap = ch * LEGACY_LL128_PER_CH
    bus = min(bus, LEGACY_AMPERE_BUS) if ampere else bus
    if tree:
        bus = min(bus * 0.92, ch * TREE_PER_CH[1 if ampere else 0][nodes])
        if p == LL:
            return min(bus / 3.8, ll_cap)
        if p == LL128:
            return min(bus * (7 / 9 if span.nodes == 1 else 120 / 128), ll128_cap)
        return bus
    if p == LL:
        return min(bus * (1 / 4 if quarter else 1 / 3), ll_cap)
    if p == LL128:
        return min(bus * (0.7 if span.per_node < 2 else 0.92), ll128_cap)
    return bus


def version(text: str | None) -> tuple[int, ...] | None:
    """(2, 8, 4) for '2.8.4' or 'NCCL 2.8.4+cuda11.2'; None where it says no version."""
    if not text:
        return None
    head = text.strip().split()[-1].split("+")[0].split("-")[0]
    parts = head.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def modelled(nccl: tuple[int, ...] | None) -> bool:
    """Whether the model's tables describe this NCCL release (unknown: assumed current)."""
    return nccl is None or nccl[:2] >= OLDEST_MODELLED


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


@dataclass(frozen=True, slots=True)
class Timing:
    """NCCL's pick for one call and its time."""

    us: float
    algorithm: str
    protocol: str
