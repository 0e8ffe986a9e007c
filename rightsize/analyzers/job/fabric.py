"""What joins a job's ranks, in words and in GB/s, and the advice about it that is earned.

Input: the catalog GPU of the ranks (or None), the rank count and, where known, the nodes.
Output: a :class:`Fabric`: the words for the link the collectives cross, its kind and its peak
per direction per GPU where the catalog knows it (NVLink: half the catalog's total, which counts
both directions; PCIe: the host link per direction), with the link's generation and topology
from the catalog's ``links`` (NVLink 2 in a hybrid cube-mesh, NVLink 4 through NVSwitch). A job
with more ranks than one node holds (``placement.gpus_per_node``) crosses the inter-node
network, whose bandwidth no trace records: its peak is None, and the words name the network of
the GPU's reference system (``catalog/systems.csv``: a DGX A100's 8 x HDR InfiniBand) as what
such nodes usually have. Advice about the interconnect names the fabric the job has: an 8-GPU
job on one NVLink node is not told to "use NVLink". Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rightsize.analyzers.sizing.placement import gpus_per_node, nvlink_group
from rightsize.catalog import Gpu
from rightsize.catalog.links import GENERIC_SYSTEM, links_of, system_of

NVLINK, PCIE, NETWORK, UNKNOWN = "nvlink", "pcie", "network", "unknown"


@dataclass(frozen=True, slots=True)
class Fabric:
    kind: str  # nvlink | pcie (within one node) | network (across nodes) | unknown
    words: str
    peak_gbs: float | None  # per direction per GPU, where the catalog knows it
    nodes: int | None  # nodes the ranks span (at least), where known


def _link_name(gpu: Gpu) -> str:
    return gpu.link_name or ("Infinity Fabric" if gpu.vendor.upper() == "AMD" else "NVLink")


def fabric_of(gpu: Gpu | None, ranks: int, nodes: int | None = None) -> Fabric:
    """The fabric ``ranks`` of ``gpu`` talk over: one node while they fit one (or ``nodes``
    says so), else the network between at least ceil(ranks / GPUs per node) nodes."""
    if gpu is None:
        return Fabric(UNKNOWN, "an unknown interconnect (the GPU is not in the catalog)", None,
                      nodes)
    per_node, _ = gpus_per_node(gpu)
    span = nodes if nodes is not None else max(1, math.ceil(ranks / per_node))
    group = nvlink_group(gpu)
    link = _link_name(gpu)
    nvlink_gbs = (gpu.nvlink_gbs_total or 0) / 2
    pcie_gbs = gpu.host_link_gbs_per_direction
    inside = f"{link} ({nvlink_gbs:g} GB/s per direction per GPU)" if group > 1 \
        else f"PCIe ({pcie_gbs or 0:g} GB/s per direction)"
    if ranks <= 1:
        return Fabric(UNKNOWN, "no interconnect (one rank)", None, 1)
    if span > 1:
        return Fabric(NETWORK, f"{span} nodes: {inside} within a node and the inter-node "
                               f"network between them (not recorded in the traces; "
                               f"{_usual_network(gpu)})", None, span)
    if group >= ranks:
        return Fabric(NVLINK, f"{link} within one node ({nvlink_gbs:g} GB/s per direction "
                              f"per GPU; {_topology(gpu)})", nvlink_gbs, 1)
    return Fabric(PCIE, f"PCIe within one node ({pcie_gbs or 0:g} GB/s per direction; "
                        f"{'no ' + link if group == 1 else f'{link} joins only {group}'})",
                  pcie_gbs, 1)


def _topology(gpu: Gpu) -> str:
    """'NVLink 2 in a hybrid cube-mesh', 'NVLink 4 through NVSwitch', 'xGMI mesh of 8'."""
    links = links_of(gpu)
    if links.link_class == "xgmi":
        return f"xGMI mesh of {links.nvl_domain_gpus}"
    return links.words.split(" (")[0]


def _usual_network(gpu: Gpu) -> str:
    """What nodes of ``gpu`` usually talk over, from its reference system."""
    system = system_of(gpu)
    if system.name == GENERIC_SYSTEM:
        return f"{system.nics}, {system.nic_gbps_per_gpu:g} Gb/s per GPU"
    return f"such nodes usually have one like the {system.words}"


def interconnect_advice(gpu: Gpu | None, ranks: int, nodes: int | None = None) -> str:
    """The exposed-communication rule's last sentence: what a faster link would (not) buy,
    for the fabric the job has."""
    f = fabric_of(gpu, ranks, nodes)
    if f.kind == NVLINK:
        half = "bf16" if gpu is not None and gpu.supports("bf16") else "fp16"
        return (f"The job's {ranks} ranks already talk over {f.words}: a faster link is not "
                f"the fix; overlap or shrink the traffic (fewer, larger buckets; {half} "
                f"gradients with DDP's {half}_compress_hook; ZeRO/FSDP communication "
                "settings).")
    if f.kind == NETWORK and gpu is not None:
        nic = system_of(gpu).nic_gbps_per_gpu
        return (f"The job spans {f.words}: keep the most talkative parallelism (tensor "
                "parallel) inside a node, bucket or compress what crosses nodes, or use a "
                f"faster inter-node network (more than {nic:g} Gb/s of InfiniBand/RoCE per "
                "GPU; the sizing candidates project the job's collectives on each GPU's).")
    if f.kind == PCIE:
        return (f"The job's {ranks} ranks talk over {f.words}: GPUs joined by NVLink (SXM/"
                "HGX boards) carry collectives several times faster.")
    return "A faster interconnect may help; this job's fabric is not known."
