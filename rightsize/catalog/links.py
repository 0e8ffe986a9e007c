"""Each GPU's links, and the systems that join GPUs across nodes: what the communication model
needs of the catalog.

Inputs: the package data ``links.csv`` (per catalog GPU: NVLink generation and link count, how
a node joins its GPUs -- NVSwitch, a hybrid cube-mesh, a full mesh of direct links (GH200 nodes of
4), a bridge, an xGMI mesh or nothing -- the
size of its NVLink domain and the system it is assumed to sit in) and ``systems.csv`` (common
systems: GPUs per node, the inter-node fabric's class and its bandwidth per GPU, with sources);
see data/README.md. The bandwidths themselves stay where they are: a GPU's NVLink total
(``nvlink_gbs_total``, both directions) and host link (``host_link_gbs_per_direction``, whose
text names the PCIe generation) are columns of gpus.csv, not repeated here.

Output: :func:`links_of` a :class:`Links` per GPU (a GPU a user catalog adds gets one derived
from its gpus.csv columns, said so in ``source``) and :func:`system_of` the :class:`System` a
GPU's ranks are projected on: the priced instance's when the price names one (an AWS p4d), else
the GPU's reference system. Pure but for reading the package data once.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from rightsize.catalog.catalog import Gpu, Price

NVLINK, XGMI, PCIE = "nvlink", "xgmi", "pcie"  # in-node link classes of the model
INTER_CLASSES = ("infiniband", "roce", "efa", "slingshot", "ethernet")
GENERIC_SYSTEM = "PCIe server"  # the assumed server of a card without a system of its own
DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class Links:
    """How one GPU talks to the others of its node."""

    gpu: str
    nvlink_generation: int | None  # None: no NVLink (or not NVIDIA's: xGMI)
    nvlink_links: int
    topology: str  # nvswitch | hybrid cube-mesh | full mesh | bridge | xgmi mesh | none |
    #                no-p2p (PCIe only, peer-to-peer disabled: GeForce 40 cards)
    nvl_domain_gpus: int  # GPUs one NVLink/xGMI domain joins (2 for a bridged pair, 72: NVL72)
    link_gbs_per_direction: float  # GPU link per GPU per direction (0: none)
    pcie_generation: int | None  # from the host link's text ("PCIe Gen4 x16")
    pcie_gbs_per_direction: float | None
    system: str  # the reference system in systems.csv
    source: str

    @property
    def link_class(self) -> str:
        """The model's class of the in-domain link: xgmi for AMD meshes, nvlink otherwise;
        pcie when the GPU has no GPU link."""
        if self.nvl_domain_gpus <= 1 or not self.link_gbs_per_direction:
            return PCIE
        return XGMI if self.topology.startswith("xgmi") else NVLINK

    @property
    def words(self) -> str:
        """'NVLink 4 through NVSwitch (450 GB/s per direction per GPU)'."""
        bw = f"{self.link_gbs_per_direction:g} GB/s per direction per GPU"
        if self.link_class == PCIE:
            gen = f" Gen{self.pcie_generation}" if self.pcie_generation else ""
            return f"PCIe{gen} only ({self.pcie_gbs_per_direction or 0:g} GB/s per direction)"
        if self.link_class == XGMI:
            return f"Infinity Fabric (xGMI mesh of {self.nvl_domain_gpus}, {bw})"
        gen = f" {self.nvlink_generation}" if self.nvlink_generation else ""
        how = {"nvswitch": "through NVSwitch", "hybrid cube-mesh": "in a hybrid cube-mesh",
               "full mesh": f"joining {self.nvl_domain_gpus} GPUs all-to-all",
               "bridge": f"bridged in groups of {self.nvl_domain_gpus}"}.get(self.topology,
                                                                             self.topology)
        return f"NVLink{gen} {how} ({bw})"


@dataclass(frozen=True, slots=True)
class System:
    """A system GPUs are sold in, and the fabric that joins its nodes."""

    name: str
    instance: str  # a cloud instance type ("p5.48xlarge"); "" for an on-premises system
    gpu: str  # the catalog GPU it holds ("" for the generic PCIe server)
    gpus_per_node: int
    nic_class: str  # infiniband | roce | efa | slingshot | ethernet
    nic_gbps_per_gpu: float  # inter-node bandwidth per GPU, Gb/s per direction
    nics: str  # the NICs in words
    source: str
    cpu: str = ""  # the host CPU's vendor: intel | amd | arm ('' unknown)
    nic_path: str = ""  # cpu: each NIC reaches its GPU through the CPU (nvidia-smi topo PHB,
    # SYS; Grace's C2C), not a PCIe switch ('': under a switch with it, NCCL's PXB)

    @property
    def words(self) -> str:
        """'NVIDIA DGX H100: 8 x ConnectX-7 NDR InfiniBand 400 Gb/s (400 Gb/s per GPU)'."""
        return f"{self.name}: {self.nics} ({self.nic_gbps_per_gpu:g} Gb/s per GPU)"


def _read(name: str) -> list[dict[str, str]]:
    text = (resources.files("rightsize.catalog") / "data" / name).read_text("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


@cache
def _links_rows() -> dict[str, dict[str, str]]:
    return {r["gpu"]: r for r in _read("links.csv")}


@cache
def systems() -> tuple[System, ...]:
    """The shipped systems (systems.csv)."""
    return tuple(System(r["system"], r["instance"], r["gpu"], int(r["gpus_per_node"]),
                        r["nic_class"], float(r["nic_gbps_per_gpu"]), r["nics"], r["source"],
                        r.get("cpu", ""), r.get("nic_path") or "")
                 for r in _read("systems.csv"))


def _pcie_generation(host_link: str) -> int | None:
    found = re.search(r"gen\s*(\d)", host_link, re.IGNORECASE)
    return int(found.group(1)) if found else None


def links_of(gpu: Gpu) -> Links:
    """The links of ``gpu``: its links.csv row, or for a GPU not listed there one derived from
    its gpus.csv columns (an NVLink total and an SXM/OAM form factor: a switched node of 8)."""
    per_dir = (gpu.nvlink_gbs_total or 0) / 2
    pcie = _pcie_generation(gpu.host_link)
    row = _links_rows().get(gpu.name)
    if row is not None:
        return Links(gpu.name, int(row["nvlink_generation"]) if row["nvlink_generation"] else
                     None, int(row["nvlink_links"] or 0), row["topology"],
                     int(row["nvl_domain_gpus"]), per_dir if row["topology"] not in ("none", "no-p2p") else 0.0,
                     pcie, gpu.host_link_gbs_per_direction, row["system"], row["source"])
    if not per_dir:
        topology, domain = "none", 1
    elif gpu.form_factor.startswith("PCIe"):
        topology, domain = "bridge", 4 if "4-way" in gpu.form_factor else 2
    else:
        topology, domain = ("xgmi mesh" if gpu.vendor.upper() == "AMD" else "nvswitch",
                            gpu.gpus_per_node or DEFAULT_GPUS_PER_NODE)
    return Links(gpu.name, None, 0, topology, domain, per_dir, pcie,
                 gpu.host_link_gbs_per_direction, GENERIC_SYSTEM if topology in
                 ("none", "bridge") else "", f"derived from the {gpu.name} row of the catalog "
                 "(no links.csv row): its NVLink total and form factor")


def system_of(gpu: Gpu, price: Price | None = None) -> System:
    """The system ``gpu``'s ranks are projected on: the one of the priced instance type where
    the price names one of systems.csv (an AWS p4d.24xlarge), else the GPU's reference system,
    else a generic server of the GPU's node size with 100 GbE (assumed)."""
    known = systems()
    if price is not None and price.instance_type:
        instance = price.instance_type.split()[0]
        hit = next((s for s in known if s.instance and s.instance == instance
                    and s.gpu == gpu.name), None)
        if hit is not None:
            return hit
    name = links_of(gpu).system
    hit = next((s for s in known if s.name == name), None)
    if hit is not None and hit.name != GENERIC_SYSTEM:
        return hit
    generic = next(s for s in known if s.name == GENERIC_SYSTEM)
    per_node = gpu.gpus_per_node or generic.gpus_per_node
    return System(generic.name, "", gpu.name, per_node, generic.nic_class,
                  generic.nic_gbps_per_gpu * generic.gpus_per_node / per_node, generic.nics,
                  generic.source, generic.cpu)
