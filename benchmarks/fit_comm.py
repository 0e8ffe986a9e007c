#!/usr/bin/env python3
"""Fit the communication model (``rightsize/catalog/data/comm_model.json``) on published
nccl-tests results, and state its leave-one-system-out error.

    python benchmarks/fit_comm.py /work/shared/nccl [--write rightsize/catalog/data/comm_model.json]
                                                    [--markdown]

Data (nothing else): the nccl-tests / rccl-tests outputs in ``../shared/nccl`` (SOURCES.md says
where each comes from). Each file's tables are parsed as nccl-tests prints them (size, count,
type, redop, [root,] then time, algbw, busbw, #wrong out-of-place and in-place; the ``N:``
prefix ``srun -l`` adds is dropped); the collective of a table is the last ``*_perf`` named
before it (else the file name's), its rank count the ``Rank`` lines above it (else the file's
row of :data:`SYSTEMS`), and each row's busbw is checked against algbw x the nccl-tests factor
for that count. The out-of-place time is the observation; tables of one rank are left out.

What the files do not say -- the link and NIC bandwidths of each system -- is in
:data:`SYSTEMS`, with where each figure comes from.

Procedure:

1. Per row, ``x`` = the ideal time at the links' peak (``comm.ideal_us``: two levels, a node's
   GPUs sharing its NICs) and ``t`` the measured time.
2. A fit of ``t = alpha + x / eta`` minimizes the mean squared relative error
   sum(w ((alpha + b x) / t - 1)^2), b = 1 / eta: two normal equations, solved in closed form
   (:func:`fit`); alpha < 0 is clamped to 0 and b refitted alone. Every system weighs the same
   (w = 1 / its row count).
3. Per fabric class, the all-reduce rows of its systems fitted together. The pooled ``intra``
   and ``inter`` fits stand in for a class with no published result (``ethernet``).
4. Per collective, ``ratio`` = the geometric mean over systems with that collective of
   eta(collective) / eta(all-reduce), each fitted on that system alone: over the class's own
   systems, else over its scope's (in-node: not counting PCIe without peer-to-peer, whose
   host-staged reductions slow its all-reduce, not its broadcast), else 1 (nccl-tests' bus
   bandwidth is meant to compare across collectives).
5. Leave one system out: refit 3 (and 4) without it, predict every row of it (its own class's
   fit from the others of the class, else the pooled fit of its scope) and take the median
   |predicted / measured time - 1| over its rows, and the busbw error at its largest size. A
   class's ``error_pct`` is the largest median of its systems (the scope's largest when it has
   none): the range a projection on that class carries.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rightsize.analyzers.job import names
from rightsize.analyzers.sizing.comm import INTER, INTRA, Span, ideal_us

# nccl-tests' benchmark names -> the collective types of analyzers/job/names.py
PERF = {"all_reduce": names.ALLREDUCE, "all_gather": names.ALLGATHER,
        "reduce_scatter": names.REDUCESCATTER, "alltoall": names.ALLTOALL,
        "broadcast": names.BROADCAST, "reduce": names.REDUCE, "sendrecv": names.SENDRECV}
INTRA_CLASSES = ("nvlink", "xgmi", "pcie")
INTER_CLASSES = ("infiniband", "roce", "efa", "slingshot", "ethernet")


@dataclass(frozen=True, slots=True)
class System:
    """What a shared file's system is, as its source and the hardware's datasheets say."""

    file: str
    label: str
    ranks: int  # when the file lists no Rank lines (README excerpts)
    nodes: int
    link_class: str
    link_gbs: float  # in-node GPU link, GB/s per direction per GPU
    nic_class: str | None  # across nodes; None: one node
    nic_gbps: float | None  # Gb/s per direction per GPU
    why: str

    @property
    def fabric_class(self) -> str:
        return self.nic_class if self.nodes > 1 and self.nic_class else self.link_class

    @property
    def scope(self) -> str:
        return INTER if self.nodes > 1 else INTRA


SYSTEMS: tuple[System, ...] = (
    System("h100-8gpu-1node-nvswitch-allreduce_allgather_reducescatter_alltoall_sendrecv.txt",
           "8 x H100 SXM, NVSwitch", 8, 1, "nvlink", 450, None, None,
           "H100 SXM: NVLink 4, 18 links, 900 GB/s both ways (catalog)"),
    System("a100-40gb-8gpu-1node-nvswitch-abci-allreduce-upto32MB.txt",
           "8 x A100 SXM4 40GB, NVSwitch (ABCI 2.0)", 8, 1, "nvlink", 300, None, None,
           "A100 SXM4: NVLink 3, 12 links, 600 GB/s both ways (catalog)"),
    System("mi300x-8gpu-1node-xgmi-allreduce.txt", "8 x MI300X, xGMI", 8, 1, "xgmi", 448, None,
           None, "MI300X: 7 Infinity Fabric links to its peers, 896 GB/s both ways (catalog)"),
    System("rtx4090-2and4gpu-1node-pcie-allreduce.txt", "2 and 4 x RTX 4090, PCIe", 2, 1,
           "pcie", 32, None, None, "RTX 4090: PCIe Gen4 x16, no NVLink (catalog)"),
    System("rtx2080ti-2gpu-1node-pcie3-noP2P-allreduce_allgather_broadcast_reduce_alltoall.txt",
           "2 x RTX 2080 Ti, PCIe 3 (no P2P)", 2, 1, "pcie", 16, None, None,
           "RTX 2080 Ti: PCIe 3.0 x16 (the source: topo PIX, P2P not supported)"),
    System("a100-40gb-16gpu-2node-ib-dgxa100-allreduce.txt", "2 x DGX A100 (ALCF Sophia), IB",
           16, 2, "nvlink", 300, "infiniband", 200,
           "DGX A100: 8 x HDR InfiniBand 200 Gb/s, one per GPU (DGX A100 datasheet)"),
    System("a100-80gb-16gpu-2node-efa-p4de.24xlarge-allreduce.txt", "2 x AWS p4de.24xlarge, EFA",
           16, 2, "nvlink", 300, "efa", 50,
           "p4de.24xlarge: 400 Gbps EFA per instance = 50 Gb/s per GPU (AWS; SOURCES.md)"),
    System("h100-16gpu-2node-efa-p5.48xlarge-allreduce.txt", "2 x AWS p5.48xlarge, EFAv2", 16,
           2, "nvlink", 450, "efa", 400,
           "p5.48xlarge: 3200 Gbps EFAv2 per instance = 400 Gb/s per GPU (AWS; SOURCES.md)"),
    System("a100-40gb-32gpu-8node-slingshot11-cxi-allreduce.txt",
           "8 x 4 A100 (ALCF Polaris), Slingshot-11", 32, 8, "nvlink", 300, "slingshot", 100,
           "Polaris node: 4 A100 SXM4 joined by NVLink (12 links each), 2 Slingshot-11 NICs of "
           "200 Gb/s = 100 Gb/s per GPU (ALCF Polaris documentation)"),
    System("gh200-16gpu-4node-slingshot11-allreduce.txt", "4 x 4 GH200 (CSCS Alps), Slingshot-11",
           16, 4, "nvlink", 450, "slingshot", 200,
           "Alps node: 4 GH200, NVLink 4 (18 links each) between them, one Slingshot-11 NIC of "
           "200 Gb/s per GH200 (CSCS Alps documentation)"),
    System("mi300x-16gpu-2node-roce-allreduce.txt", "2 x 8 MI300X, RoCE", 16, 2, "xgmi", 448,
           "roce", 400,
           "8 mlx5 RoCE NICs per node (the source); UNCERTAIN: their speed is not stated, "
           "400 Gb/s (one 400G NIC per GPU, the platform's reference design) assumed"),
    System("h100-80gpu-10node-unstated-fabric-allreduce_allgather_reducescatter_alltoall_sendrecv"
           ".txt", "10 x 8 H100, fabric not stated", 80, 10, "nvlink", 450, "unstated", 400,
           "fabric not stated; SOURCES.md infers ~400 Gb/s per GPU NIC from the cluster's own "
           "1-GPU-per-node all-reduce (~49 GB/s busbw): used for the pooled inter-node fit and "
           "the collective ratios, never as a class of its own"),
)


@dataclass(frozen=True, slots=True)
class Row:
    system: str
    collective: str
    ranks: int
    size: int
    time_us: float
    busbw_gbs: float


_PREFIX = re.compile(r"^\s*\d+:\s?")
_PERF = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv)"
                   r"_perf\b")
_RANK = re.compile(r"^#\s+Rank\s+\d+\s")


def parse(text: str, system: System) -> list[Row]:
    """The rows of every table of one nccl-tests output (see the module docstring)."""
    found = _PERF.search(system.file.replace("allreduce", "all_reduce_perf"))
    collective = PERF[found.group(1)] if found else names.ALLREDUCE
    ranks = 0
    has_root = True
    rows: list[Row] = []
    in_table = False
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw, count=1) if _PREFIX.match(raw) else raw
        perf = _PERF.search(line)
        if perf and not line.lstrip().startswith(tuple("0123456789")):
            collective = PERF[perf.group(1)]
        if _RANK.match(line.strip()):
            if in_table:
                ranks, in_table = 0, False
            ranks += 1
            continue
        if line.strip().startswith("#") and "size" in line and "time" in line:
            has_root = "root" in line.split()
            continue
        cells = line.split()
        if len(cells) < 7 or not cells[0].isdigit() or not cells[1].isdigit():
            continue
        in_table = True
        at = 5 if has_root else 4
        n = ranks or system.ranks
        size, time_us, algbw, busbw = (int(cells[0]), float(cells[at]), float(cells[at + 1]),
                                       float(cells[at + 2]))
        if n < 2 or size == 0:
            continue
        factor = names.BUS_FACTORS[collective](n)
        if algbw >= 1 and abs(algbw * factor - busbw) > 0.011 + 0.002 * busbw:
            raise ValueError(f"{system.file}: {size} B: busbw {busbw} is not algbw {algbw} x "
                             f"{factor:.4f} ({collective}, {n} ranks): rank count misread")
        rows.append(Row(system.file, collective, n, size, time_us, busbw))
    return rows


def span_of(system: System, ranks: int) -> Span:
    nodes = system.nodes  # a file's other tables (2 and 4 RTX 4090s) are on its one node
    return Span(ranks, nodes, system.link_class, system.link_gbs,
                system.nic_class if nodes > 1 else None, system.nic_gbps if nodes > 1 else None)


def fit(points: Iterable[tuple[float, float, float]]) -> tuple[float, float]:
    """(alpha_us, eta) minimizing sum(w ((alpha + x / eta) / t - 1)^2) over (x, t, w)."""
    suu = suv = svv = su = sv = 0.0
    for x, t, w in points:
        u, v = 1 / t, x / t
        suu, suv, svv, su, sv = suu + w * u * u, suv + w * u * v, svv + w * v * v, su + w * u, \
            sv + w * v
    det = suu * svv - suv * suv
    alpha = (su * svv - sv * suv) / det if det else -1.0
    b = (suu * sv - suv * su) / det if det else 0.0
    if alpha < 0 or b <= 0:
        alpha, b = 0.0, sv / svv
    return alpha, 1 / b


def _points(rows: Sequence[Row], by: dict[str, System]) -> list[tuple[float, float, float]]:
    count: dict[str, int] = defaultdict(int)
    for r in rows:
        count[r.system] += 1
    return [(ideal_us(r.collective, r.size, span_of(by[r.system], r.ranks)), r.time_us,
             1 / count[r.system]) for r in rows]


def fit_table(rows: Sequence[Row], systems: Sequence[System]) -> dict[str, Any]:
    """alpha and eta per class and per scope (all-reduce rows), and the collective ratios."""
    by = {s.file: s for s in systems}
    ar = [r for r in rows if r.collective == names.ALLREDUCE and r.system in by]
    out: dict[str, Any] = {"classes": {}, "collective_eta_ratio": {}}
    groups: dict[str, list[System]] = defaultdict(list)
    for s in systems:
        groups[s.scope].append(s)
        if s.fabric_class != "unstated":
            groups[s.fabric_class].append(s)
    for name, members in groups.items():
        mine = [r for r in ar if r.system in {m.file for m in members}]
        if not mine:
            continue
        alpha, eta = fit(_points(mine, by))
        out["classes"][name] = {"scope": members[0].scope if name not in (INTRA, INTER)
                                else name, "alpha_us": alpha, "eta": eta,
                                "systems": sorted({m.file for m in members
                                                   if any(r.system == m.file for r in mine)})}
    per_system: dict[str, dict[str, float]] = {}
    for s in systems:
        mine = [r for r in rows if r.system == s.file]
        base = [r for r in mine if r.collective == names.ALLREDUCE]
        if base:
            eta_ar = fit(_points(base, by))[1]
            per_system[s.file] = {
                c: fit(_points([r for r in mine if r.collective == c], by))[1] / eta_ar
                for c in sorted({r.collective for r in mine} - {names.ALLREDUCE})}
    # a class's own systems; a scope's: all its systems but PCIe without peer-to-peer, whose
    # host-staged reductions make its all-reduce, not its broadcast, slow (its class keeps it)
    keys = sorted({s.fabric_class for s in systems} | {INTRA, INTER})
    for key in keys:
        ratios: dict[str, list[float]] = defaultdict(list)
        for s in systems:
            if s.fabric_class == key or (key == s.scope and s.link_class != "pcie"):
                for c, r in per_system.get(s.file, {}).items():
                    ratios[c].append(r)
        if ratios:
            out["collective_eta_ratio"][key] = {
                c: math.exp(statistics.fmean(math.log(v) for v in vs)) for c, vs in
                sorted(ratios.items())}
    return out


def predict(table: dict[str, Any], system: System, row: Row) -> float:
    span = span_of(system, row.ranks)
    cls = table["classes"].get(system.fabric_class) or table["classes"][system.scope]
    ratios = table["collective_eta_ratio"]
    ratio = ratios.get(system.fabric_class, {}).get(row.collective) or ratios.get(
        system.scope, {}).get(row.collective, 1.0)
    return cls["alpha_us"] + ideal_us(row.collective, row.size, span) / (cls["eta"] * ratio)


def leave_one_out(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per system: refit without it, predict each of its rows (see the module docstring)."""
    out = []
    for s in SYSTEMS:
        rest = [o for o in SYSTEMS if o.file != s.file]
        table = fit_table([r for r in rows if r.system != s.file], rest)
        own = s.fabric_class in table["classes"]
        mine = [r for r in rows if r.system == s.file]
        errs: dict[str, list[float]] = defaultdict(list)
        largest: dict[str, tuple[int, float]] = {}
        for r in mine:
            t = predict(table, s, r)
            errs[r.collective].append(abs(t / r.time_us - 1))
            if r.size >= largest.get(r.collective, (0, 0.0))[0]:
                span = span_of(s, r.ranks)
                bus = r.size / (t * 1e3) * names.BUS_FACTORS[r.collective](span.ranks)
                largest[r.collective] = (r.size, (bus / r.busbw_gbs - 1) if r.busbw_gbs else
                                         math.nan)
        out.append({
            "file": s.file, "system": s.label, "class": s.fabric_class, "scope": s.scope,
            "predicted_from": (f"{s.fabric_class} (the class's other systems)" if own else
                               f"pooled {s.scope}-node fit (no other {s.fabric_class} system)"),
            "rows": len(mine),
            "time_error_pct_median": {c: 100 * statistics.median(v) for c, v in
                                      sorted(errs.items())},
            "busbw_error_pct_at_largest": {c: 100 * e for c, (_, e) in sorted(largest.items())},
        })
    return out


def build(shared: Path) -> dict[str, Any]:
    rows = [r for s in SYSTEMS for r in parse((shared / s.file).read_text("utf-8"), s)]
    table = fit_table(rows, SYSTEMS)
    loo = leave_one_out(rows)
    by_class: dict[str, list[float]] = defaultdict(list)
    for entry in loo:
        worst = entry["time_error_pct_median"][names.ALLREDUCE]
        by_class[entry["class"]].append(worst)
        by_class[entry["scope"]].append(worst)
    for name, cls in table["classes"].items():
        cls["error_pct"] = max(by_class.get(name) or by_class[cls["scope"]])
    table["classes"]["ethernet"] = dict(
        table["classes"][INTER], systems=[],
        fallback="no published nccl-tests result for plain Ethernet (TCP) in the set: the "
                 "pooled inter-node fit, likely optimistic for it")
    return {
        "procedure": "benchmarks/fit_comm.py (module docstring): t = alpha + ideal / (eta x "
                     "ratio); alpha, eta per fabric class by least squares on the relative "
                     "time error, every system weighing the same; error_pct: the class's "
                     "largest leave-one-system-out median |time error| of all-reduce",
        "sources": "../shared/nccl (SOURCES.md: repository, commit, path and sha256 per file)",
        "systems": {s.file: {"label": s.label, "class": s.fabric_class, "ranks": s.ranks,
                             "nodes": s.nodes, "link_gbs_per_direction": s.link_gbs,
                             "nic_gbps_per_gpu": s.nic_gbps, "why": s.why} for s in SYSTEMS},
        **table,
        "leave_one_out": loo,
    }


def markdown(model: dict[str, Any]) -> str:
    lines = [("| system | class | predicted from | all-reduce time error (median) | busbw error "
             "at the largest size | other collectives (median time error) |"),
             "|---|---|---|---|---|---|"]
    for e in model["leave_one_out"]:
        other = ", ".join(f"{c} {v:.0f}%" for c, v in e["time_error_pct_median"].items()
                          if c != names.ALLREDUCE) or "-"
        lines.append(f"| {e['system']} | {e['class']} | {e['predicted_from']} | "
                     f"{e['time_error_pct_median'][names.ALLREDUCE]:.0f}% | "
                     f"{e['busbw_error_pct_at_largest'][names.ALLREDUCE]:+.0f}% | {other} |")
    lines += ["", "| class | alpha (µs) | eta | systems | error_pct |", "|---|---|---|---|---|"]
    for name, c in model["classes"].items():
        lines.append(f"| {name} | {c['alpha_us']:.1f} | {c['eta']:.3f} | {len(c['systems'])} | "
                     f"{c['error_pct']:.0f}% |")
    return "\n".join(lines)


def _rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shared_nccl", type=Path, help="the folder of ../shared/nccl")
    ap.add_argument("--write", type=Path, default=None, help="write the table here (JSON)")
    ap.add_argument("--markdown", action="store_true", help="print the error tables")
    args = ap.parse_args(argv)
    model = _rounded(build(args.shared_nccl))
    text = json.dumps(model, indent=1) + "\n"
    if args.write:
        args.write.write_text(text, "utf-8")
    print(markdown(model) if args.markdown or args.write else text, end="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
