#!/usr/bin/env python3
"""What the shipped communication model predicts for systems stated as a user would state them
(no log of them in the fit): an 8-GPU PCIe box without peer-to-peer, two nodes on RoCE, GH200
Slingshot systems of hundreds of GPUs (docs/comm.md, "Systems the fit has no log of").

    python benchmarks/comm_cases.py

Prints, per case, the all-reduce time (µs), its nccl-tests bus bandwidth (GB/s) and the
algorithm and protocol NCCL runs it with, at the sizes shown.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rightsize.analyzers.sizing.comm import collective_time, load_model
from rightsize.analyzers.sizing.comm_system import system_for
from rightsize.catalog import load_catalog

MIB, GIB = 1 << 20, 1 << 30
CASES = (  # (--system spec, ranks, nodes, sizes)
    ("intra=pcie-shm:gen4,arch=ada,gpus_per_node=8", 8, 1, (8, MIB, 64 * MIB, GIB)),
    ("intra=pcie-shm:gen5,arch=blackwell,gpus_per_node=8", 8, 1, (8, MIB, GIB)),
    ("gpu=H100 SXM,system=NVIDIA DGX H100 (RoCE)", 16, 2, (8, 65536, MIB, GIB)),
    ("gpu=MI300X,inter=roce:400", 16, 2, (8, 65536, MIB, GIB)),
    ("gpu=GH200", 256, 64, (8, MIB, 16 * MIB, 256 * MIB, GIB, 4 * GIB)),
    ("gpu=GH200", 512, 128, (8, MIB, 16 * MIB, 256 * MIB, GIB, 4 * GIB)),
)


def main() -> int:
    catalog, model = load_catalog(), load_model()
    for spec, ranks, nodes, sizes in CASES:
        span = system_for(spec, None, catalog).span(ranks, nodes)
        print(f"{spec}: {ranks} ranks on {nodes} node{'s' if nodes > 1 else ''}")
        for size in sizes:
            t = collective_time("allreduce", size, span, model)
            assert t is not None
            busbw = size / (t.us * 1e3) * 2 * (ranks - 1) / ranks
            print(f"  {size:>11} B  {t.us:>10.1f} µs  busbw {busbw:6.2f} GB/s  "
                  f"{t.algorithm} {t.protocol}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
