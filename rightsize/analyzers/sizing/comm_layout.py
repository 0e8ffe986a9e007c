"""A job's ranks laid out on nodes of one GPU, and what a collective of some of them crosses.

Inputs: a catalog GPU (its links.csv row: NVLink/xGMI links and topology, the size of its
NVLink domain; its reference or priced system: GPUs per node and the network per GPU), the
rank count and GPUs per node. Output: a :class:`Layout`, whose :meth:`Layout.span` is the
:class:`~nccl_model.Span` a collective of ``group`` consecutive ranks crosses (an NVL72 rack's
NVLink domain spans its trays; bridged PCIe cards reach only their bridge partners over
NVLink), and its words. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rightsize.analyzers.sizing.comm_system import arch_of
from rightsize.analyzers.sizing.nccl_model import Span
from rightsize.catalog import Gpu, Price
from rightsize.catalog.links import PCIE, Links, System, links_of, system_of


@dataclass(frozen=True, slots=True)
class Layout:
    """``ranks`` of one GPU, ``per_node`` to a node, and what joins them (the catalog's links
    of the GPU and the system it is projected on)."""

    ranks: int
    per_node: int
    links: Links
    system: System
    node_gpus: int = 8  # GPUs one physical node (tray) holds
    arch: str = ""  # the GPU's generation (comm_system.arch_of): NCCL's per-generation caps

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
            topology = "nvswitch" if links.topology == "nvswitch" else "mesh"
        else:  # GeForce 40 cards: no peer-to-peer, through host memory
            cls, gbs = PCIE, links.pcie_gbs_per_direction or 0.0
            topology = "host" if links.topology == "no-p2p" else "p2p"
        grace = links.gpu.upper().startswith("GH200") or self.system.nic_path == "cpu"
        gen = (links.nvlink_generation or 0) if cls == "nvlink" else 0
        cpu = self.system.cpu
        if nodes > 1:
            return Span(group, nodes, cls, gbs, self.system.nic_class,
                        self.system.nic_gbps_per_gpu, topology, self.arch, links.nvlink_links,
                        grace, gen, cpu)
        return Span(group, 1, cls, gbs, topology=topology, arch=self.arch,
                    links=links.nvlink_links, nic_via_cpu=grace, link_gen=gen, cpu=cpu)

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
    return Layout(ranks, max(1, min(ranks, per_node or size)), links_of(gpu), system, size,
                  arch_of(gpu))


def span_for(gpu: Gpu, ranks: int, per_node: int | None = None,
             price: Price | None = None) -> Span:
    """What a collective of all ``ranks`` of ``gpu`` crosses, ``per_node`` to a node (None: as
    many as a node holds), on the system the price or the GPU's reference names."""
    return layout_for(gpu, ranks, per_node, price).span(ranks)
