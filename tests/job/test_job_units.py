"""Collective names and sizes, nccl-tests' bus bandwidth factors, and the words for a job's
fabric (16 A100s are two nodes; an 8-rank NVLink job is not told to use NVLink)."""

from __future__ import annotations

import pytest

from rightsize.analyzers.diagnosis import advise
from rightsize.analyzers.job import fabric, names
from rightsize.analyzers.sizing.model import Workload
from rightsize.analyzers.sizing.projection import Constraints, project
from rightsize.catalog import load_catalog

GIB = 1 << 30


@pytest.mark.parametrize(("name", "kind"), [
    ("allreduce", "allreduce"), ("allreduce_coalesced", "allreduce"),
    ("_allgather_base", "allgather"), ("allgather_into_tensor_coalesced", "allgather"),
    ("_reduce_scatter_base", "reducescatter"), ("reduce_scatter_tensor_coalesced",
                                                "reducescatter"),
    ("all_to_all", "alltoall"), ("alltoall_base", "alltoall"), ("broadcast", "broadcast"),
    ("reduce", "reduce"), ("send", "sendrecv"), ("recv", "sendrecv"), ("barrier", "barrier"),
    ("c10d::allreduce_", "allreduce"), ("c10d::alltoall_base_", "alltoall"),
    ("nccl:all_reduce", "allreduce"), ("nccl:_all_gather_base", "allgather"),
    ("wait", None), ("record_param_comms", None), ("gather", None), (None, None),
])
def test_collective_names(name, kind):
    assert names.from_name(name) == kind


@pytest.mark.parametrize(("kernel", "kind"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "allreduce"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "sendrecv"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "reducescatter"),
    ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "broadcast"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", None),  # RCCL: says nothing
    ("ncclDevKernel_Generic_4(ncclDevComm*, unsigned long, ncclWork*)", None),
    ("void at::native::vectorized_elementwise_kernel<4>()", None),
])
def test_kernel_names(kernel, kind):
    assert names.from_kernel(kernel) == kind


def test_bus_factors_are_nccl_tests():
    """nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter and
    all-to-all (n-1)/n; broadcast, reduce and send/recv 1."""
    assert names.bus_factor("allreduce", 8) == 2 * 7 / 8 == 1.75
    assert names.bus_factor("allgather", 8) == names.bus_factor("reducescatter", 8) == 7 / 8
    assert names.bus_factor("alltoall", 16) == 15 / 16
    assert names.bus_factor("broadcast", 8) == names.bus_factor("reduce", 8) == 1.0
    assert names.bus_factor("sendrecv", 2) == 1.0
    assert names.bus_factor("barrier", 8) is None and names.bus_factor("unknown", 8) is None


def test_sizes_from_args_and_inputs():
    # all-gather: the output (8 x the input); reduce-scatter: the input; bf16 is 2 bytes
    assert names.size_from_args(25136, 201088, "BFloat16") == 201088 * 2
    assert names.size_from_args(1024, 128, "Float") == 4096
    assert names.size_from_args(10, 10, "NoSuchType") is None
    assert names.size_from_inputs('[[6144], [6144], [], []]', '["float", "float", "", ""]') \
        == 6144 * 4
    assert names.size_from_inputs('[[768], [3392]]', '["int", "int"]') == 3392 * 4
    assert names.size_from_inputs('[[24]]', '["long int"]') == 24 * 8
    assert names.size_from_inputs('[[], [], [], []]', '["TensorList", "", "", "Scalar"]') is None
    assert names.group_ranks("[0, 1, 2, 3]") == (0, 1, 2, 3)
    assert names.group_ranks("[]") is None


def test_fabric_words_name_the_nodes():
    cat = load_catalog()
    a100, v100 = cat.gpu("A100 40GB SXM"), cat.gpu("V100 32GB SXM2")
    sixteen = fabric.fabric_of(a100, 16)
    assert sixteen.kind == "network" and sixteen.nodes == 2 and sixteen.peak_gbs is None
    assert sixteen.words == (
        "2 nodes: NVLink (300 GB/s per direction per GPU) within a node and the inter-node "
        "network between them (not recorded in the traces; such nodes usually have one like "
        "the NVIDIA DGX A100: 8 x single-port ConnectX-6 HDR InfiniBand 200 Gb/s (200 Gb/s per"
        " GPU))")
    eight = fabric.fabric_of(v100, 8)
    assert (eight.kind, eight.nodes, eight.peak_gbs) == ("nvlink", 1, 150.0)
    assert eight.words == ("NVLink within one node (150 GB/s per direction per GPU; NVLink 2 in"
                           " a hybrid cube-mesh)")
    mi300x = fabric.fabric_of(cat.gpu("MI300X"), 8)
    assert mi300x.words == ("Infinity Fabric within one node (448 GB/s per direction per GPU;"
                            " xGMI mesh of 8)")
    l4 = fabric.fabric_of(cat.gpu("L4"), 4)
    assert l4.kind == "pcie" and l4.peak_gbs == 32 and "no NVLink" in l4.words
    assert fabric.fabric_of(None, 8).kind == "unknown"


def test_advice_for_a_job_already_on_nvlink_is_not_use_nvlink():
    cat = load_catalog()
    words = fabric.interconnect_advice(cat.gpu("V100 32GB SXM2"), 8)
    assert "NVLink" in words and "already" in words and "not the fix" in words
    assert "use a faster interconnect" not in words.lower()
    sixteen = fabric.interconnect_advice(cat.gpu("A100 40GB SXM"), 16)
    assert "2 nodes" in sixteen and "inter-node network" in sixteen
    # the network named is the one such nodes have, and the advice says what beats it
    assert "HDR InfiniBand 200 Gb/s" in sixteen and "more than 200 Gb/s" in sixteen
    rule = next(r for r in advise.rules() if r["id"] == "exposed-communication")
    assert "(NVLink)" not in rule["detail"] and "{interconnect}" in rule["detail"]


def _comm_workload(ranks: int) -> Workload:
    return Workload(step_ms=100, shares_ms={"compute": 50, "communication": 30, "host": 20},
                    precision="tf32", peak_memory_bytes=10 * GIB,
                    current_device_name="NVIDIA A100-SXM4-40GB",
                    current_memory_bytes=42505273344, current_sm_count=108, ranks=ranks)


def test_sixteen_a100_ranks_are_two_nodes_and_cost_the_whole_job():
    cat = load_catalog()
    s16 = project(_comm_workload(16), cat, Constraints(include_consumer=True))
    s1 = project(_comm_workload(1), cat, Constraints(include_consumer=True))
    rtx = {c.gpu: c for c in s16.candidates}["RTX 4090"]
    assert rtx.warnings[-1].startswith(
        "not like-for-like: the measured job ran 16 ranks over 2 nodes: NVLink (300 GB/s per"
        " direction per GPU) within a node")
    assert "16 ranks over NVLink" not in " ".join(w for c in s16.candidates for w in c.warnings)
    # the same A100 per rank: 16 ranks pay 16 GPUs (the step is the same)
    a16 = s16.candidate("A100 40GB SXM")
    a1 = s1.candidate("A100 40GB SXM")
    assert a16 is not None and a1 is not None and a16.ranks == 16 and a1.ranks is None
    assert a16.usd_per_hour == pytest.approx(16 * a1.usd_per_hour, rel=1e-12)
    assert a16.usd_per_1k_steps == pytest.approx(16 * a1.usd_per_1k_steps, rel=1e-12)
    assert "ranks" in a16.to_json() and "ranks" not in a1.to_json()


def test_summaries_that_are_not_one_job_are_refused():
    import polars as pl

    from rightsize.analyzers.job import collectives, summary
    from rightsize.analyzers.job.job import JobError, job_of

    def rank(r: int, world: int = 2, groups=(("0", (0, 1)),)) -> summary.RankSummary:
        return summary.RankSummary(
            path=f"/x/rank{r}.json", rank=r, world_size=world, backend="nccl", pid=str(r),
            hostname=None, device=r, device_name=None, visible_gpus=2, process_groups=groups,
            steps=pl.DataFrame(schema=summary.STEPS),
            calls=pl.DataFrame(schema=collectives.CALLS))

    assert job_of([rank(0)]) is None  # one rank is no job
    with pytest.raises(JobError, match="rank1.json is of world size/backend 4/nccl, not 2/nccl"):
        job_of([rank(0), rank(1, world=4)])
    with pytest.raises(JobError, match="rank0.json and rank0.json are both rank 0"):
        job_of([rank(0), rank(0)])
    with pytest.raises(JobError, match=r"record process group '0' with different ranks"):
        job_of([rank(0), rank(1, groups=(("0", (1, 2)),))])
    job = job_of([rank(0), rank(1)])
    assert job is not None and job.calls == () and job.stragglers == ()
    assert job.notes == (("no collective kernels (NCCL/RCCL) in the ranks' traces: nothing to "
                         "match"),)
    assert (job.nodes, job.gpus_per_node) == (1, 2)  # devices 0 and 1 of 2 visible


def test_windows_of_one_rank_are_no_job():
    """A run directory's traces of one process (``--repeat`` windows) are not a job: no job
    section, no error; two ranks are."""
    from rightsize.analyzers.analysis import analyze
    from tests.framebuilder import FrameBuilder

    def trace(rank: int):
        b = FrameBuilder(rank=rank, world_size=2, backend="nccl")
        b.step(1, 0, 1000).kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 50, corr=1)
        return b.trace(f"rank{rank}.json")

    assert analyze([trace(0), trace(0)]).job is None
    job = analyze([trace(0), trace(1)]).job
    assert job is not None and job.rank_count == 2 and job.calls_total == 1
