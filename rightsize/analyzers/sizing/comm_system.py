"""A system's fabric as the communication model needs it, from the catalog or a ``--system``
spec: the GPU and its generation, GPUs per node, the in-node link and the network per GPU.

Inputs: a catalog :class:`~rightsize.catalog.Gpu` (its links.csv row and reference system) and/or
a spec string (grammar below); the ranks and nodes of a collective. Output: a
:class:`CommSystem` and, by :meth:`CommSystem.span`, the :class:`~nccl_model.Span` a collective
of some ranks crosses. Pure.

Spec grammar: comma-separated ``key=value``; every key optional, a spec fills in or overrides
what the catalog knows of the GPU:

- ``gpu=NAME`` -- a catalog GPU (its links, generation and reference system are the defaults)
- ``system=NAME`` -- a system of the catalog's systems.csv (``rightsize comm systems`` lists
  them): its GPUs per node and network (a GPU's NIC options: ``NVIDIA DGX H100 (RoCE)``)
- ``gpus_per_node=N``, ``nodes=N``, ``ranks=N`` (for logs that print no rank lines)
- ``arch=volta|turing|ampere|ada|hopper|blackwell|cdna2|cdna3|cdna4``
- ``intra=KIND[:DETAIL]`` -- KIND ``nvswitch``; ``nvlink`` (direct links: a mesh, a bridge);
  ``xgmi``; ``pcie-switch`` (``pcie``: the GPUs under PCIe switches, peer-to-peer);
  ``pcie-cpu`` (each GPU on the CPU's own PCIe ports: NCCL goes through host memory, but for
  a pair on an AMD CPU); ``pcie-shm`` (``pcie-nop2p``: no peer-to-peer at all, through host
  memory). DETAIL: ``nvlink4x18`` (NVLink generation 4, 18 links), ``gen4`` (PCIe Gen4 x16),
  ``7x64`` (7 links of 64 GB/s), or a number: GB/s per direction per GPU.
- ``gpus_per_switch=N`` -- GPUs behind one PCIe switch (its uplink shared through host memory)
- ``cpu=intel|amd|arm`` -- the host CPU (NCCL's choices differ per vendor)
- ``nic_path=switch|cpu`` -- how each GPU reaches its NIC: through a PCIe switch (NCCL's PXB),
  or through the CPU (``nvidia-smi topo -m`` shows PHB or SYS; Grace's own NICs), where NCCL
  runs no LL128 across nodes
- ``nccl=VERSION`` -- the NCCL release (the log's own where it prints one)
- ``inter=KIND:GBPS`` -- KIND ``ib`` (InfiniBand), ``roce``, ``efa``, ``slingshot``, ``eth``;
  GBPS the network per GPU, Gb/s per direction (a node of 4 GPUs with 2 NICs of 200: 100).

Example: ``gpu=H100 SXM,gpus_per_node=8,intra=nvswitch:nvlink4x18,inter=ib:400``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from rightsize.analyzers.sizing import nccl_tables as tb
from rightsize.analyzers.sizing.nccl_model import NVLINK, PCIE, XGMI, Span
from rightsize.catalog import Catalog, Gpu
from rightsize.catalog.links import System, links_of, system_of, systems
from rightsize.errors import RightsizeError

INTRA_KINDS = {"nvswitch": (NVLINK, "nvswitch"), "nvlink": (NVLINK, "mesh"),
               "xgmi": (XGMI, "mesh"), "pcie-switch": (PCIE, "p2p"), "pcie": (PCIE, "p2p"),
               "pcie-cpu": (PCIE, "cpu"), "pcie-shm": (PCIE, "host"),
               "pcie-nop2p": (PCIE, "host")}
INTER_KINDS = {"ib": "infiniband", "infiniband": "infiniband", "roce": "roce", "efa": "efa",
               "slingshot": "slingshot", "eth": "ethernet", "ethernet": "ethernet"}
NVLINK_GBS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}  # per direction
PCIE_X16_GBS = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}  # per direction
ARCHS = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4")
KEYS = ("gpu", "system", "gpus_per_node", "nodes", "ranks", "arch", "intra", "inter",
        "gpus_per_switch", "cpu", "nccl", "nic_path")
CPUS = ("intel", "amd", "arm")


class SpecError(RightsizeError):
    """A --system spec that does not parse."""


@dataclass(frozen=True, slots=True)
class CommSystem:
    """What the ranks of a job or a log talk over (see the module docstring)."""

    gpu: str | None
    arch: str
    gpus_per_node: int | None
    intra: str  # nvswitch | nvlink | xgmi | pcie | pcie-cpu | pcie-nop2p
    link_gbs: float  # GB/s per direction per GPU within a node
    links: int  # NVLink/xGMI links per GPU (0: unknown or PCIe)
    inter: str | None  # infiniband | roce | efa | slingshot | ethernet
    nic_gbps: float | None  # per GPU, Gb/s per direction
    ranks: int | None = None
    nodes: int | None = None
    source: str = ""
    link_gen: int = 0  # NVLink generation (0: unknown)
    cpu: str = ""  # intel | amd | arm ('' unknown)
    switch_gpus: int = 0  # GPUs behind one PCIe switch (0: unknown)
    nccl: str | None = None  # the NCCL release ('2.8.4'; None: unknown, taken as current)
    nic_path: str = ""  # cpu: each GPU reaches its NIC through the CPU ('': a PCIe switch)

    def span(self, ranks: int, nodes: int | None = None) -> Span:
        """What a collective of ``ranks`` crosses, on ``nodes`` nodes (None: as few as the
        node size allows)."""
        per = self.gpus_per_node or ranks
        nodes = nodes or max(1, math.ceil(ranks / per))
        cls, topology = INTRA_KINDS[self.intra]
        multi = nodes > 1
        return Span(ranks, nodes, cls, self.link_gbs, self.inter if multi else None,
                    self.nic_gbps if multi else None, topology, self.arch, self.links,
                    nic_via_cpu=(self.gpu or "").upper().startswith("GH200")
                    or self.nic_path == "cpu",
                    link_gen=self.link_gen if cls == NVLINK else 0, cpu=self.cpu,
                    switch_gpus=self.switch_gpus if cls == PCIE else 0,
                    legacy=not tb.modelled(tb.version(self.nccl)))

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "arch": self.arch, "gpus_per_node": self.gpus_per_node,
                "intra": self.intra, "link_gbs_per_direction": self.link_gbs,
                "links": self.links, "inter": self.inter, "nic_gbps_per_gpu": self.nic_gbps,
                "ranks": self.ranks, "nodes": self.nodes, "source": self.source,
                "link_gen": self.link_gen, "cpu": self.cpu or None,
                "gpus_per_switch": self.switch_gpus or None, "nccl": self.nccl,
                "nic_path": self.nic_path or None}


def parse_spec(text: str) -> dict[str, str]:
    """``key=value`` pairs of a spec (keys checked, values not yet)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or key not in KEYS or not value.strip():
            raise SpecError(f"--system {text!r}: {part!r} is not one of "
                            f"{', '.join(k + '=' for k in KEYS)}")
        out[key] = value.strip()
    return out


def arch_of(gpu: Gpu) -> str:
    """'hopper' for 'Hopper (GH100)', 'cdna3' for 'CDNA 3'."""
    text = gpu.architecture.lower().replace(" ", "")
    return next((a for a in ARCHS if text.startswith(a)), "")


def from_catalog(gpu: Gpu, price: Any = None, system: System | None = None) -> CommSystem:
    """The fabric of ``gpu`` on ``system`` (None: its reference system, or the priced
    instance's)."""
    links = links_of(gpu)
    named = system is not None
    system = system or system_of(gpu, price)
    if links.link_class == NVLINK:
        intra = "nvswitch" if links.topology == "nvswitch" else "nvlink"
        gbs = links.link_gbs_per_direction
    elif links.link_class == XGMI:
        intra, gbs = "xgmi", links.link_gbs_per_direction
    else:  # GeForce 40 cards have peer-to-peer disabled: NCCL goes through host memory
        intra = "pcie-shm" if links.topology == "no-p2p" else "pcie"
        gbs = links.pcie_gbs_per_direction or 0.0
    per_node = system.gpus_per_node if named else gpu.gpus_per_node or system.gpus_per_node
    return CommSystem(gpu.name, arch_of(gpu), per_node, intra,
                      gbs, links.nvlink_links, system.nic_class, system.nic_gbps_per_gpu,
                      source=f"catalog: {gpu.name} on {system.name}",
                      link_gen=links.nvlink_generation or 0, cpu=system.cpu,
                      nic_path=system.nic_path)


def system_for(spec: str | None, gpu: Gpu | None, catalog: Catalog) -> CommSystem:
    """The catalog's fabric for ``gpu`` (or the spec's ``gpu=``), with the spec's keys over
    it. A spec alone must say the in-node link."""
    keys = parse_spec(spec) if spec else {}
    named = _system(keys["system"]) if "system" in keys else None
    if named is not None and "gpu" not in keys and gpu is None and named.gpu:
        gpu = catalog.gpu(named.gpu)
    if "gpu" in keys:
        match = catalog.match(keys["gpu"])
        gpu = match.gpu if match.gpu is not None else None
        if gpu is None and "intra" not in keys:
            raise SpecError(f"--system: {keys['gpu']!r} is not a catalog GPU; say its link "
                            "with intra=KIND[:DETAIL] (and arch=)")
    if gpu is None and "intra" not in keys:
        raise SpecError("the GPU is unknown (not named in the log, or not in the catalog): "
                        "give --system gpu=NAME or intra=KIND[:DETAIL]")
    base = from_catalog(gpu, system=named) if gpu is not None else CommSystem(
        keys.get("gpu"), "", named.gpus_per_node if named else None, "pcie", 0.0, 0,
        named.nic_class if named else None, named.nic_gbps_per_gpu if named else None,
        source="--system", cpu=named.cpu if named else "",
        nic_path=named.nic_path if named else "")
    return _apply(base, keys, spec or "")


def _system(name: str) -> System:
    hit = next((s for s in systems() if s.name.lower() == name.lower()), None)
    if hit is None:
        raise SpecError(f"--system system={name}: not a catalog system (one of "
                        f"{'; '.join(s.name for s in systems())})")
    return hit


def _apply(base: CommSystem, keys: dict[str, str], spec: str) -> CommSystem:
    out = base
    if "arch" in keys:
        arch = keys["arch"].lower()
        if arch not in ARCHS:
            raise SpecError(f"--system arch={keys['arch']}: one of {', '.join(ARCHS)}")
        out = replace(out, arch=arch)
    counts: dict[str, Any] = {k: _count(k, keys[k]) for k in ("gpus_per_node", "nodes",
                                                               "ranks") if k in keys}
    if "gpus_per_switch" in keys:
        counts["switch_gpus"] = _count("gpus_per_switch", keys["gpus_per_switch"])
    if "cpu" in keys:
        if keys["cpu"].lower() not in CPUS:
            raise SpecError(f"--system cpu={keys['cpu']}: one of {', '.join(CPUS)}")
        counts["cpu"] = keys["cpu"].lower()
    if "nccl" in keys:
        if tb.version(keys["nccl"]) is None:
            raise SpecError(f"--system nccl={keys['nccl']}: a release such as 2.21.5")
        counts["nccl"] = keys["nccl"]
    if "nic_path" in keys:
        if keys["nic_path"].lower() not in ("switch", "cpu"):
            raise SpecError(f"--system nic_path={keys['nic_path']}: switch or cpu")
        counts["nic_path"] = "" if keys["nic_path"].lower() == "switch" else "cpu"
    out = replace(out, **counts)
    if "intra" in keys:
        out = _intra(out, keys["intra"])
    if "inter" in keys:
        out = _inter(out, keys["inter"])
    if keys:
        out = replace(out, source=f"{base.source}; --system {spec}" if base.gpu else
                      f"--system {spec}")
    return out


def _count(key: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise SpecError(f"--system {key}={value}: a whole number of at least 1")
    return int(value)


def _intra(base: CommSystem, value: str) -> CommSystem:
    kind, _, detail = value.lower().partition(":")
    if kind not in INTRA_KINDS:
        raise SpecError(f"--system intra={value}: KIND is one of {', '.join(INTRA_KINDS)}")
    gbs, links, gen = base.link_gbs, base.links, base.link_gen
    if detail:
        gbs, links = _bandwidth(kind, detail, value)
        nv = re.fullmatch(r"nvlink(\d)x\d+", detail)
        gen = int(nv.group(1)) if nv else (gen if kind in ("nvswitch", "nvlink") else 0)
    elif INTRA_KINDS[kind][0] != INTRA_KINDS[base.intra][0] or not gbs:
        raise SpecError(f"--system intra={value}: say its bandwidth (intra={kind}:"
                        f"{'gen4' if kind.startswith('pcie') else 'nvlink4x18'} or GB/s)")
    return replace(base, intra=kind, link_gbs=gbs, links=links, link_gen=gen)


def _bandwidth(kind: str, detail: str, value: str) -> tuple[float, int]:
    nv = re.fullmatch(r"nvlink(\d)x(\d+)", detail)
    if nv and int(nv.group(1)) in NVLINK_GBS_PER_LINK:
        links = int(nv.group(2))
        return NVLINK_GBS_PER_LINK[int(nv.group(1))] * links, links
    gen = re.fullmatch(r"gen(\d)", detail)
    if gen and int(gen.group(1)) in PCIE_X16_GBS:
        return PCIE_X16_GBS[int(gen.group(1))], 0
    per = re.fullmatch(r"(\d+)x(\d+(?:\.\d+)?)", detail)
    if per:
        return int(per.group(1)) * float(per.group(2)), int(per.group(1))
    try:
        gbs = float(detail)
    except ValueError:
        gbs = 0.0
    if not 0 < gbs < 1e5:
        raise SpecError(f"--system intra={value}: DETAIL is nvlinkGxL, genN, LxGBS or GB/s "
                        "per direction per GPU")
    return gbs, 0


def _inter(base: CommSystem, value: str) -> CommSystem:
    kind, _, rate = value.lower().partition(":")
    if kind not in INTER_KINDS:
        raise SpecError(f"--system inter={value}: KIND is one of {', '.join(INTER_KINDS)}")
    try:
        gbps = float(rate)
    except ValueError:
        gbps = 0.0
    if not 0 < gbps < 1e5:
        raise SpecError(f"--system inter={value}: say the Gb/s per GPU ({kind}:400)")
    return replace(base, inter=INTER_KINDS[kind], nic_gbps=gbps)
