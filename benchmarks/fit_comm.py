#!/usr/bin/env python3
"""Fit the communication model (``rightsize/catalog/data/comm_model.json``) on published
nccl-tests results and measured NCCL tables, and print its leave-one-system-out errors per
fabric and collective.

    python benchmarks/fit_comm.py /work/shared [--write rightsize/catalog/data/comm_model.json]
                                               [--sweeps N] [--json]

Data (nothing else):

- ``nccl/*.txt``: the 12 nccl-tests / rccl-tests outputs of ``nccl/SOURCES.md``, read by
  rightsize's own reader (``traces/nccl_tests.py``: GPU, ranks and hosts from the rank lines).
  What the files do not say -- the fabric -- is :data:`LOGS`: one ``--system`` spec per file
  (``sizing/comm_system.py`` grammar), each with where it comes from.
- ``serving/aiconfigurator/data/<gpu>/comm/nccl/<version>/nccl_perf.parquet``: measured NCCL
  all-reduce, all-gather, reduce-scatter and all-to-all inside one node (2, 4, 8 GPUs), half
  and int8, for the six GPUs of :data:`TABLES` (the version the system's YAML names as its
  ``nccl_version``). ``message_size`` counts elements (half: 2 bytes, int8: 1): the bytes are
  message_size x the element size; ``latency`` is ms; duplicate rows take their median.

Procedure (``rightsize/analyzers/sizing/comm_fit.py``): NCCL's pick per row by its own nominal
model; the factors by coordinate descent on the mean |log error| per system (each system
weighs the same), efficiencies on rows of 64 MiB and more, latencies on rows under 1 MiB;
a class's own factor only where two or more systems have the class. Leave one system out:
refit without it (its class pooled with its scope where no other system has it) and predict
every row of it. A class's ``error_pct`` in the shipped model is the largest median |error| of
its systems' rows left out: the range a projection on that class carries.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rightsize.analyzers.sizing import comm_fit
from rightsize.analyzers.sizing.comm_check import PERF, fit_tables, model_json
from rightsize.analyzers.sizing.comm_system import system_for
from rightsize.catalog import load_catalog
from rightsize.traces.nccl_tests import read_log

MIB = 1 << 20
# file -> (label, --system spec, where the fabric comes from)
LOGS: dict[str, tuple[str, str, str]] = {
    "h100-8gpu-1node-nvswitch-allreduce_allgather_reducescatter_alltoall_sendrecv.txt":
        ("8 x H100 SXM, NVSwitch", "gpu=H100 SXM", "catalog: NVLink 4 x 18 through NVSwitch"),
    "a100-40gb-8gpu-1node-nvswitch-abci-allreduce-upto32MB.txt":
        ("8 x A100 SXM4 40GB, NVSwitch (ABCI, NCCL 2.8)", "gpu=A100 40GB SXM,nccl=2.8.4",
         ("catalog: NVLink 3 x 12 through NVSwitch; SOURCES.md: NCCL 2.8.4 (the log prints "
          "none)")),
    "mi300x-8gpu-1node-xgmi-allreduce.txt":
        ("8 x MI300X, xGMI", "gpu=MI300X", "catalog: 7 Infinity Fabric links of 64 GB/s"),
    "rtx4090-2and4gpu-1node-pcie-allreduce.txt":
        ("2 and 4 x RTX 4090, PCIe Gen4 (no P2P)", "gpu=RTX 4090,intra=pcie-shm:gen4",
         ("GeForce 40 cards: peer-to-peer not enabled (catalog links.csv); the rank lines' "
          "buses pair up (0x1a/0x1b, 0x3d/0x3e): 2 GPUs per PCIe switch")),
    "rtx2080ti-2gpu-1node-pcie3-noP2P-allreduce_allgather_broadcast_reduce_alltoall.txt":
        ("2 x RTX 2080 Ti, PCIe Gen3 (no P2P)", "intra=pcie-shm:gen3,arch=turing",
         "the source: topo PIX (one PCIe switch; buses b4/b5), p2p 'NS' (not supported)"),
    "a100-40gb-16gpu-2node-ib-dgxa100-allreduce.txt":
        ("2 x DGX A100 (ALCF Sophia), IB HDR", "gpu=A100 40GB SXM,inter=ib:200",
         "DGX A100 datasheet: 8 HDR InfiniBand 200 Gb/s, one per GPU"),
    "a100-80gb-16gpu-2node-efa-p4de.24xlarge-allreduce.txt":
        ("2 x AWS p4de.24xlarge, EFA", "gpu=A100 80GB SXM,system=AWS p4de.24xlarge,nodes=2",
         ("catalog systems.csv: 400 Gbps EFA per p4de instance = 50 Gb/s per GPU, Intel Xeon "
          "(no rank lines: 2 nodes)")),
    "h100-16gpu-2node-efa-p5.48xlarge-allreduce.txt":
        ("2 x AWS p5.48xlarge, EFAv2", "gpu=H100 SXM,system=AWS p5.48xlarge,nodes=2",
         ("catalog systems.csv: 3200 Gbps EFAv2 per p5 instance = 400 Gb/s per GPU, AMD EPYC "
          "(no rank lines: 2 nodes)")),
    "a100-40gb-32gpu-8node-slingshot11-cxi-allreduce.txt":
        ("8 x 4 A100 (ALCF Polaris), Slingshot-11", ("gpu=A100 40GB SXM,system=HPE Cray EX235n "
         "(ALCF Polaris),intra=nvlink:nvlink3x12"), "catalog systems.csv: ALCF Polaris"),
    "gh200-16gpu-4node-slingshot11-allreduce.txt":
        ("4 x 4 GH200 (CSCS Alps), Slingshot-11", "gpu=GH200",
         "catalog: GH200 on HPE Cray EX254n (CSCS Alps)"),
    "mi300x-16gpu-2node-roce-allreduce.txt":
        ("2 x 8 MI300X, RoCE", "gpu=MI300X,inter=roce:400",
         "the source: 8 mlx5 RoCE NICs per node; UNCERTAIN: their speed (400 Gb/s assumed)"),
    "h100-80gpu-10node-unstated-fabric-allreduce_allgather_reducescatter_alltoall_sendrecv"
    ".txt": ("10 x 8 H100, fabric not stated (IB 400 assumed)", "gpu=H100 SXM,inter=ib:400",
             "not stated; SOURCES.md infers ~400 Gb/s per GPU from the cluster's own runs"),
}
# aiconfigurator system -> (label, --system spec)
TABLES: dict[str, tuple[str, str]] = {
    "a100_sxm": ("A100 SXM 80GB (AIConfigurator)", "gpu=A100 80GB SXM"),
    "b200_sxm": ("B200 (AIConfigurator)", "gpu=B200"),
    "h100_sxm": ("H100 SXM (AIConfigurator)", "gpu=H100 SXM"),
    "h200_sxm": ("H200 SXM (AIConfigurator)", "gpu=H200 SXM"),
    "l40s": ("L40S, PCIe Gen4 (AIConfigurator)", "gpu=L40S,intra=pcie-cpu:gen4,cpu=amd"),
    "rtx_pro_6000_server": ("RTX PRO 6000 Blackwell Server, PCIe Gen5 (AIConfigurator)",
                            "intra=pcie-cpu:gen5,arch=blackwell,gpus_per_node=8,cpu=amd"),
}
# The two PCIe boxes' YAML states only the PCIe generation; their tables show 2 GPUs at ~60% of
# it and 4 or 8 at a third or less, which is NCCL's rule for GPUs on an AMD CPU's own ports
# (peer-to-peer across the CPU for a pair only, else through host memory): assumed so.
ELEMENT_BYTES = {"half": 2, "int8": 1}


def log_tables(shared: Path) -> list[comm_fit.Table]:
    catalog = load_catalog()
    out = []
    for name, (label, spec, _why) in LOGS.items():
        log = read_log(shared / "nccl" / name)
        out += fit_tables(log, system_for(spec, None, catalog), label)
    return out


def measured_tables(shared: Path) -> list[comm_fit.Table]:
    import polars as pl

    catalog = load_catalog()
    root = shared / "serving" / "aiconfigurator"
    out = []
    for system, (label, spec) in TABLES.items():
        yaml = (root / f"{system}.yaml").read_text("utf-8")
        version = re.search(r"nccl_version:\s*'([^']+)'", yaml)
        assert version, f"{system}.yaml names no nccl_version"
        df = pl.read_parquet(root / "data" / system / "comm" / "nccl" / version.group(1)
                             / "nccl_perf.parquet")
        df = df.group_by("op_name", "num_gpus", "nccl_dtype", "message_size").agg(
            pl.col("latency").median()).sort("op_name", "num_gpus", "nccl_dtype", "message_size")
        comm = system_for(spec, None, catalog)
        for (op, n, dtype), g in df.group_by("op_name", "num_gpus", "nccl_dtype",
                                              maintain_order=True):
            size = ELEMENT_BYTES[str(dtype)]
            out.append(comm_fit.Table(
                label, PERF[str(op)], comm.span(int(n), 1),  # type: ignore[call-overload]
                tuple(float(m * size) for m in g["message_size"]),
                tuple(float(ms) * 1e3 for ms in g["latency"]), nvls_ok=dtype != "int8",
                label=f"{op} {n} ranks {dtype}"))
    return out


def _errors(tables: Sequence[comm_fit.Table], preds: Sequence[Sequence[float]]
            ) -> dict[str, dict[str, list[float]]]:
    """collective -> size band (large: 1 MiB and more) -> |error| %."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t, p in zip(tables, preds, strict=True):
        for s, m, q in zip(t.sizes, t.times_us, p, strict=True):
            if math.isfinite(q):
                out[t.collective]["large" if s >= MIB else "small"].append(
                    100 * abs(q / m - 1))
    return out


def _med(v: list[float]) -> float | None:
    return round(statistics.median(v), 1) if v else None


def build(shared: Path, sweeps: int) -> dict[str, Any]:
    tables = log_tables(shared) + measured_tables(shared)
    factors = comm_fit.pooled(comm_fit.fit(tables, sweeps=sweeps))
    loo = []
    def of_class(t: comm_fit.Table) -> set[str]:  # the classes a table can teach
        return {t.span.link_key} | ({t.span.nic_class} if t.span.nic_class else set())

    classes: dict[str, set[str]] = defaultdict(set)
    for t in tables:
        if t.in_scope:
            classes[t.system] |= of_class(t)
    for system, (_, preds) in comm_fit.leave_one_out(tables, sweeps=sweeps).items():
        mine = [t for t in tables if t.system == system]
        errs = _errors(mine, preds)
        every = {b: [e for c in errs.values() for e in c[b]] for b in ("large", "small")}
        loo.append({"system": system, "class": mine[0].span.fabric_class,
                    "others_of_class": sum(1 for s, c in classes.items()
                                           if mine[0].span.fabric_class in c and s != system),
                    "ranks": sorted({t.span.ranks for t in mine}),
                    "rows": sum(len(t.sizes) for t in mine),
                    "median_error_pct": {"large": _med(every["large"]),
                                         "small": _med(every["small"])},
                    "by_collective": {c: {b: _med(v[b]) for b in ("large", "small")}
                                      for c, v in sorted(errs.items())}})
    by_class: dict[str, list[float]] = defaultdict(list)
    for e in loo:
        by_class[e["class"]].append(max(v for v in e["median_error_pct"].values()
                                        if v is not None))
    errors = {k: max(v) for k, v in by_class.items()}
    return model_json(
        factors, errors, procedure="benchmarks/fit_comm.py (module docstring)",
        sources=["../shared/nccl (SOURCES.md)",
                 "../shared/serving/aiconfigurator (SOURCES.md): comm/nccl tables"],
        extra={"systems": {label: {"spec": spec, "why": why}
                           for label, spec, why in LOGS.values()}
               | {label: {"spec": spec, "why": "AIConfigurator system YAML"}
                  for label, spec in TABLES.values()},
               "leave_one_out": loo})


def markdown(model: dict[str, Any]) -> str:
    """The leave-one-system-out table per fabric and collective (docs/comm.md)."""
    def cell(v: float | None, goal: float) -> str:
        return "-" if v is None else f"{v:.0f}%{'' if v <= goal else ' ✗'}"

    def others(n: int) -> str:
        return f"{n}" if n >= comm_fit.MIN_SYSTEMS else f"{n} †"

    head = "| system (left out) | fabric | others of its fabric | collective | >= 1 MiB | < 1 MiB |"
    lines = [head, "|---|---|---|---|---|---|"]
    for e in model["leave_one_out"]:
        lines.append(f"| **{e['system']}** | {e['class']} | {others(e['others_of_class'])} "
                     f"| all | {cell(e['median_error_pct']['large'], 10)} | "
                     f"{cell(e['median_error_pct']['small'], 25)} |")
        for c, v in e["by_collective"].items():
            if len(e["by_collective"]) > 1:
                lines.append(f"| | | | {c} | {cell(v['large'], 10)} | "
                             f"{cell(v['small'], 25)} |")
    return "\n".join(lines) + "\n\n" + textwrap.fill(
        "† fewer than two other systems of its fabric in the fit (a network's: across "
        "nodes; a link's: in a node): left out, its class keeps none of its own latency and "
        "efficiency factors but PCIe's (the other box's) and takes the pooled ones -- nothing "
        "of its kind to learn from. On such a fabric, fit the model on your own log: "
        "`rightsize comm fit LOG -o comm.json`, then `--comm-model comm.json`.", 96)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shared", type=Path, help="the ../shared folder")
    ap.add_argument("--write", type=Path, default=None, help="write the model here (JSON)")
    ap.add_argument("--sweeps", type=int, default=comm_fit.SWEEPS)
    ap.add_argument("--json", action="store_true", help="print the model, not the table")
    args = ap.parse_args(argv)
    model = build(args.shared, args.sweeps)
    text = json.dumps(model, indent=1, default=float) + "\n"
    if args.write:
        args.write.write_text(text, "utf-8")
    print(text if args.json else markdown(model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
