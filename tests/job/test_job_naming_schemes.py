"""Two-rank jobs built by hand, one per collective naming scheme: NCCL's ``ncclKernel_*`` (the
type in the name, no args), ``ncclDevKernel_*`` with collective args (matched by process group
and sequence number) and RCCL's ``ncclDevKernel_Generic`` (the type only from the launching
op's args or name, or unknown). Every expected value is worked out from the times below."""

from __future__ import annotations

import pytest

from rightsize.analyzers.document import Document
from rightsize.catalog import load_catalog
from rightsize.pipeline import analyze_document
from tests.tracebuilder import H100, TraceBuilder

OLD = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
DEV = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
RCCL = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
BASE = 1_700_000_000_000_000  # µs

# Per rank: (compute kernel end, [(arrival, duration) of the two collectives]); both end at
# 300 and 450. Rank 1 computes 30 µs longer before the first call and idles 20 µs longer
# before the second: it arrives last at both, 30 and 20 µs after rank 0.
TIMES = {0: (200, [(210, 90), (400, 50)]), 1: (230, [(240, 60), (420, 30)])}


def _rank(rank: int, scheme: str) -> TraceBuilder:
    b = TraceBuilder(devices=[dict(H100, id=0), dict(H100, id=1)])
    b.extra["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    pid = 1000 + rank
    b.x("user_annotation", "ProfilerStep#1", BASE, 1000, pid=pid, tid=pid)
    end, calls = TIMES[rank]
    b.x("cuda_runtime", "cudaLaunchKernel", BASE + 95, 3, pid=pid, tid=pid, correlation=1)
    b.x("kernel", GEMM, BASE + 100, end - 100, pid=rank, tid=7, device=rank, stream=7,
        correlation=1)
    if scheme == "dev" and rank == 0:  # a call of another group that rank 1 never makes
        b.x("cuda_runtime", "cudaLaunchKernel", BASE + 45, 3, pid=pid, tid=pid, correlation=99)
        b.x("kernel", DEV, BASE + 50, 10, pid=rank, tid=20, device=rank, stream=20,
            correlation=99, **_args(5, 0))
    for seq, (arrival, dur) in enumerate(calls):
        corr = 10 + seq
        launch = BASE + arrival - 5
        args: dict = {}
        if scheme == "dev":
            args = _args(0, seq)
        elif scheme == "rccl-args":
            b.x("cpu_op", "record_param_comms", launch - 2, 6, pid=pid, tid=pid,
                **{"Collective name": "allreduce", "In msg nelems": 1024,
                   "Out msg nelems": 1024, "dtype": "Float", "Group size": 2})
        elif scheme == "rccl-op":
            b.x("user_annotation", "nccl:all_reduce", launch - 2, 6, pid=pid, tid=pid,
                **{"Input Dims": [[1024]], "Input type": ["float"]})
        b.x("cuda_runtime", "cudaLaunchKernel", launch, 3, pid=pid, tid=pid, correlation=corr)
        name = {"old": OLD, "dev": DEV}.get(scheme, RCCL)
        b.x("kernel", name, BASE + arrival, dur, pid=rank, tid=20, device=rank, stream=20,
            correlation=corr, **args)
    return b


def _args(pg: int, seq: int) -> dict:
    return {"Collective name": "_allgather_base", "In msg nelems": 1024,
            "Out msg nelems": 2048, "dtype": "BFloat16", "Group size": 2,
            "Process Group Name": str(pg), "Process Group Ranks": "[0, 1]", "Seq": seq}


def _job(tmp_path, scheme: str) -> Document:
    paths = [_rank(r, scheme).write(tmp_path / f"rank{r}.json") for r in (0, 1)]
    return analyze_document(paths)


@pytest.mark.parametrize(("scheme", "kind", "source", "size", "factor", "matched"), [
    ("old", "allreduce", "kernel", None, 1.0, "order per stream"),  # 2(n-1)/n = 1 for n = 2
    ("dev", "allgather", "args", 2048 * 2, 0.5, "process group + sequence number"),
    ("rccl-args", "allreduce", "op args", 4096, 1.0, "order per stream"),
    ("rccl-op", "allreduce", "op", 4096, 1.0, "order per stream"),
    ("rccl-bare", "unknown", "none", None, None, "order per stream"),
])
def test_naming_schemes(tmp_path, scheme, kind, source, size, factor, matched):
    doc = _job(tmp_path, scheme)
    job = doc.job
    assert job is not None and job.rank_count == 2 and job.world_size == 2
    assert job.matched_by == (matched,)
    calls = [c for c in job.calls if len(c.ranks) == 2]
    assert [c.collective for c in calls] == [kind, kind]
    assert [c.arrival_ms for c in calls] == [(0.0, 0.03), (0.0, 0.02)]
    assert [(c.last_rank, c.late_ms, c.transfer_ms) for c in calls] == [
        (1, 0.03, 0.06), (1, 0.02, 0.03)]
    assert [c.wait_ms_mean for c in calls] == [0.015, 0.01]  # (30 + 0) / 2, (20 + 0) / 2
    assert [c.bytes for c in calls] == [size, size]
    if size is None:
        assert [c.busbw_gbs for c in calls] == [None, None]
    else:  # algbw = bytes / transfer (GB/s = bytes per ns); busbw x the type's factor
        assert [c.algbw_gbs for c in calls] == [round(size / 60_000, 3), round(size / 30_000, 3)]
        assert factor is not None
        assert [c.busbw_gbs for c in calls] == [round(size / 60_000 * factor, 3),
                                                round(size / 30_000 * factor, 3)]
    ranks = {r.rank: r for r in job.ranks}
    assert (ranks[0].wait_ms_per_step, ranks[1].wait_ms_per_step) == (0.05, 0.0)
    assert (ranks[0].last_calls, ranks[1].last_calls) == (0, 2)
    (s,) = job.stragglers
    assert (s.rank, s.last_calls, s.calls, s.last_pct) == (1, 2, 2, 100.0)
    assert s.late_ms_per_step == 0.05  # 30 + 20 µs, one step
    # lead-ins: 30 µs more compute before the first call, 20 µs more host before the second
    assert s.excess_ms_per_step == {"compute": 0.03, "copy": 0.0, "dataloader": 0.0,
                                    "host": 0.02}
    assert (s.cause, s.cause_ms_per_step) == ("compute", 0.03)
    assert doc.recommendations[0].id == "straggler"
    assert doc.recommendations[0].title == "Rank 1 holds up the collectives"


def test_seq_matching_survives_a_call_one_rank_lacks(tmp_path):
    """Rank 0 alone made a call of process group 5 on the same stream first: matched by order
    on that stream it would pair rank 0's first call with rank 1's second."""
    job = _job(tmp_path, "dev").job
    assert job is not None
    assert [(c.key, c.ranks) for c in job.calls] == [
        ("pg 5 #0", (0,)), ("pg 0 #0", (0, 1)), ("pg 0 #1", (0, 1))]
    assert job.calls_total == 3
    assert "1 of 3 calls were not found on every rank (matched by order: a rank recorded " \
        "fewer collectives)" in job.notes
    (coll,) = job.collectives
    # per type over the three calls: algbw = all bytes / all transfer time
    assert coll.algbw_gbs == round(3 * 4096 / (10_000 + 60_000 + 30_000), 3)


def test_nodes_cost_and_single_trace(tmp_path):
    doc = _job(tmp_path, "old")
    job = doc.job
    assert job is not None
    assert (job.nodes, job.gpus_per_node) == (1, 2)
    assert job.nodes_basis.startswith("inferred: 2 ranks on 2 distinct device indices")
    assert job.device == "H100 SXM"
    assert job.fabric == ("NVLink within one node (450 GB/s per direction per GPU; NVLink 4"
                          " through NVSwitch)")
    price = load_catalog().price("H100 SXM")
    assert price is not None and job.cost is not None
    assert (job.cost.gpus, job.cost.usd_per_hour) == (2, round(2 * price.usd_per_gpu_hour, 4))
    assert [r.step_ms for r in job.ranks] == [(1.0,), (1.0,)]
    # one rank alone: no job section, no key
    single = analyze_document([tmp_path / "rank0.json"])
    assert single.job is None and "job" not in single.to_json()
    assert Document.from_json(doc.to_json()) == doc
