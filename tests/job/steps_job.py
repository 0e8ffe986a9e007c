"""A small job of several ranks and steps, built by hand with exact times (µs).

Rank r, step s (of ``steps``), starting at ``t = BASE + s * PERIOD``:

* host: ``ProfilerStep#s`` over [t, t + 900]; a launch at t + 5 (3 µs) of a GEMM, and a launch
  at t + c - 5 of an all-reduce, c = 600 + 20 r (rank r computes 20 r µs longer);
* GPU (device r): ``ProfilerStep#s`` annotated over [t + 10, t + 900]; the GEMM over
  [t + 10, t + c]; the all-reduce over [t + c, t + 900] (every rank's ends at t + 900).

Six timed events a step; the last rank arrives last at every all-reduce, ``20 (ranks - 1)`` µs
after rank 0; each step is 900 µs (device-aware: its GPU work ends with its host range).
"""

from __future__ import annotations

from pathlib import Path

from tests.tracebuilder import H100, TraceBuilder

GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
BASE = 1_700_000_000_000_000  # µs
PERIOD = 1000
EVENTS_PER_STEP = 6


def rank_trace(rank: int, ranks: int, steps: int) -> TraceBuilder:
    b = TraceBuilder(devices=[dict(H100, id=d) for d in range(ranks)])
    b.extra["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": ranks}
    pid, c = 1000 + rank, 600 + 20 * rank
    for s in range(steps):
        t, corr = BASE + s * PERIOD, 10 * s
        b.x("user_annotation", f"ProfilerStep#{s}", t, 900, pid=pid, tid=pid)
        b.x("gpu_user_annotation", f"ProfilerStep#{s}", t + 10, 890, pid=rank, tid=7,
            device=rank, stream=7)
        b.x("cuda_runtime", "cudaLaunchKernel", t + 5, 3, pid=pid, tid=pid, correlation=corr + 1)
        b.x("kernel", GEMM, t + 10, c - 10, pid=rank, tid=7, device=rank, stream=7,
            correlation=corr + 1)
        b.x("cuda_runtime", "cudaLaunchKernel", t + c - 5, 3, pid=pid, tid=pid,
            correlation=corr + 2)
        b.x("kernel", ALLREDUCE, t + c, 900 - c, pid=rank, tid=20, device=rank, stream=20,
            correlation=corr + 2)
    return b


def write_job(d: Path, ranks: int = 2, steps: int = 6) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        rank_trace(r, ranks, steps).write(d / f"rank{r}.pt.trace.json")
    return d
