"""The communication model (analyzers/sizing/comm.py) and the catalog's links and systems: the
ideal times by the nccl-tests factors, the alpha-beta prediction, what a layout's collectives
cross, a rank's calls projected onto another fabric and into sizing, with exact values; the
nccl-tests table parser of benchmarks/fit_comm.py on inline output."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from rightsize.analyzers.sizing.comm import (
    ClassFit,
    CommModel,
    Span,
    ideal_us,
    layout_for,
    load_model,
    project_calls,
)
from rightsize.analyzers.sizing.model import CommWork
from rightsize.analyzers.sizing.projection import Constraints, SizingError, Workload, project
from rightsize.catalog import GIB, load_catalog
from rightsize.catalog.links import links_of, system_of, systems
from tests.conftest import REPO, cli

TOY = CommModel(
    {"nvlink": ClassFit("nvlink", "intra", 20.0, 0.8, ("a",), 50.0),
     "pcie": ClassFit("pcie", "intra", 10.0, 0.2, ("b",), 100.0),
     "infiniband": ClassFit("infiniband", "inter", 40.0, 0.5, ("c",), 30.0),
     "intra": ClassFit("intra", "intra", 15.0, 0.6, ("a", "b"), 100.0),
     "inter": ClassFit("inter", "inter", 50.0, 0.6, ("c",), 80.0)},
    {"nvlink": {"alltoall": 0.5}, "inter": {"sendrecv": 0.25}})


def fit_comm() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_comm", REPO / "benchmarks" / "fit_comm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_comm"] = module  # its dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


def test_ideal_times_follow_the_nccl_tests_factors():
    one = Span(8, 1, "nvlink", 450)
    # one node: F(n) x size / link; 450 GB/s = 450e3 bytes per µs
    assert ideal_us("allreduce", 1e6, one) == pytest.approx(2 * 7 / 8 * 1e6 / 450e3)
    assert ideal_us("allgather", 1e6, one) == pytest.approx(7 / 8 * 1e6 / 450e3)
    assert ideal_us("broadcast", 1e6, one) == pytest.approx(1e6 / 450e3)
    assert ideal_us("barrier", 1e6, one) == 0.0
    assert ideal_us("allreduce", 1e6, Span(1, 1, "nvlink", 450)) == 0.0
    # 16 ranks on 2 nodes of 8, 300 GB/s in a node, 200 Gb/s (25e3 bytes/µs) per GPU across:
    two = Span(16, 2, "nvlink", 300, "infiniband", 200)
    inside = 1.75 * 1e6 / 300e3  # 5.833 µs
    across = 1.0 * 1e6 / 8 / 25e3  # F(2 nodes) = 1, each GPU carries 1/8 of its node's bytes
    assert ideal_us("allreduce", 1e6, two) == pytest.approx(max(inside, across))
    # all-to-all: every GPU sends its own (N-1)/N across: 0.5 x 1e6 / 25e3 = 20 µs
    assert ideal_us("alltoall", 1e6, two) == pytest.approx(20.0)
    assert ideal_us("sendrecv", 1e6, two) == pytest.approx(40.0)
    slow = Span(16, 2, "nvlink", 300, "efa", 50)  # 6.25e3 bytes/µs per GPU
    assert ideal_us("allreduce", 1e6, slow) == pytest.approx(1e6 / 8 / 6.25e3)


def test_prediction_is_alpha_plus_ideal_over_eta_and_the_ratio():
    one = Span(8, 1, "nvlink", 450)
    assert TOY.predict_us("allreduce", 1e6, one) == pytest.approx(20 + 1.75e6 / 450e3 / 0.8)
    assert TOY.predict_us("alltoall", 1e6, one) == pytest.approx(
        20 + 0.875e6 / 450e3 / (0.8 * 0.5))
    assert TOY.predict_us("unknown", 1e6, one) is None
    assert TOY.predict_us("barrier", 0, one) == 20.0
    # no fit for xgmi or roce here: the pooled fits of the scope stand in, with its ratios
    assert TOY.predict_us("allreduce", 1e6, Span(8, 1, "xgmi", 448)) == pytest.approx(
        15 + 1.75e6 / 448e3 / 0.6)
    roce = Span(16, 2, "xgmi", 448, "roce", 400)
    assert TOY.predict_us("sendrecv", 1e6, roce) == pytest.approx(50 + 1e6 / 50e3 / (0.6 * .25))
    # nccl-tests' bus bandwidth of the prediction
    t = TOY.predict_us("allreduce", 1e6, one)
    assert TOY.busbw_gbs("allreduce", 1e6, one) == pytest.approx(1e6 / (t * 1e3) * 1.75)


def test_the_shipped_table_has_every_class_and_error():
    model = load_model()
    assert set(model.classes) == {"nvlink", "xgmi", "pcie", "infiniband", "roce", "efa",
                                  "slingshot", "ethernet", "intra", "inter"}
    assert all(c.alpha_us > 0 and c.eta > 0 and c.error_pct > 0 for c in model.classes.values())
    assert model.classes["ethernet"].fallback.startswith("no published nccl-tests result")
    assert model.classes["ethernet"].eta == model.classes["inter"].eta


def test_every_catalog_gpu_has_links_and_a_system():
    cat = load_catalog()
    names = {g.name for g in cat.gpus}
    for gpu in cat.gpus:
        links = links_of(gpu)
        assert "derived" not in links.source, gpu.name
        assert system_of(gpu).nic_gbps_per_gpu > 0
    assert all(s.gpu in names for s in systems() if s.gpu)
    h100 = links_of(cat.gpu("H100 SXM"))
    assert (h100.nvlink_generation, h100.nvlink_links, h100.topology, h100.nvl_domain_gpus,
            h100.link_gbs_per_direction, h100.pcie_generation) == (4, 18, "nvswitch", 8, 450.0, 5)
    assert links_of(cat.gpu("GB200 (per GPU)")).nvl_domain_gpus == 72
    assert links_of(cat.gpu("L4")).link_class == "pcie"
    assert links_of(cat.gpu("MI300X")).link_class == "xgmi"
    # the priced instance's network: the AWS p4d row is EFA at 400 Gbps / 8 GPUs
    p4d = next(p for p in cat.prices if p.instance_type == "p4d.24xlarge")
    assert system_of(cat.gpu("A100 40GB SXM"), p4d).nic_gbps_per_gpu == 50
    assert system_of(cat.gpu("A100 40GB SXM")).name == "NVIDIA DGX A100"


def test_what_a_layouts_collectives_cross():
    cat = load_catalog()
    h100 = layout_for(cat.gpu("H100 SXM"), 16)
    assert (h100.nodes, h100.per_node) == (2, 8)
    assert h100.span(16) == Span(16, 2, "nvlink", 450.0, "infiniband", 400.0)
    assert h100.span(4) == Span(4, 1, "nvlink", 450.0)  # a tensor-parallel group of 4
    # an NVL72 rack: 64 ranks stay in one NVLink domain, 144 cross two
    gb = cat.gpu("GB200 (per GPU)")
    assert layout_for(gb, 64).span(64) == Span(64, 1, "nvlink", 900.0)
    assert layout_for(gb, 144).span(144).nodes == 2
    # bridged pairs: 2 ranks over NVLink, 8 over PCIe Gen5
    nvl = cat.gpu("H100 NVL")
    assert layout_for(nvl, 8).span(2) == Span(2, 1, "nvlink", 300.0)
    assert layout_for(nvl, 8).span(8) == Span(8, 1, "pcie", 64.0)
    assert layout_for(cat.gpu("A100 40GB SXM"), 16, 4).span(16).nodes == 4
    assert layout_for(cat.gpu("A100 40GB SXM"), 16).words == (
        "16 ranks on 2 nodes of 8: NVLink 3 through NVSwitch (300 GB/s per direction per GPU)"
        " within a node; NVIDIA DGX A100: 8 x single-port ConnectX-6 HDR InfiniBand 200 Gb/s"
        " (200 Gb/s per GPU) between nodes")


def test_calls_keep_their_wait_and_get_the_targets_transfer():
    cat = load_catalog()
    v100, h100 = layout_for(cat.gpu("V100 32GB SXM2"), 8), layout_for(cat.gpu("H100 SXM"), 8)
    work = (CommWork("allreduce", 1_000_000, None, 2, 1.0, 0.5, wait_ms=0.6),
            CommWork("alltoall", None, None, 1, 0.3, 0.3))  # no size: held
    p = project_calls(work, v100, h100, TOY)
    transfer = 2 * (20 + 1.75e6 / 450e3 / 0.8) / 1e3  # 0.0197 ms
    assert p.transfer_ms == pytest.approx(transfer)
    assert p.wait_ms == 0.6 and p.held_ms == 0.3 and not p.wait_estimated
    # exposed' = exposed x (wait + transfer') / kernel, plus the held call's exposed time
    assert p.exposed_ms == pytest.approx(0.5 * (0.6 + transfer) / 1.0 + 0.3)
    assert p.exposed_high_ms == pytest.approx(0.5 * (0.6 + transfer * 1.5) + 0.3)
    assert p.exposed_low_ms == pytest.approx(0.5 * (0.6 + transfer / 1.5) + 0.3)
    # one rank's trace: the wait is the kernel time beyond the model's transfer on V100
    p = project_calls((CommWork("allreduce", 1_000_000, None, 2, 1.0, 0.5),), v100, h100, TOY)
    now = 2 * (20 + 1.75e6 / 150e3 / 0.8) / 1e3
    assert p.wait_estimated and p.wait_ms == pytest.approx(1.0 - now)
    # 16 ranks: the world group grows and crosses the DGX H100's InfiniBand
    sixteen = layout_for(cat.gpu("H100 SXM"), 16)
    p = project_calls((CommWork("allreduce", 1_000_000, 8, 1, 1.0, 1.0, 0.0),), v100, sixteen,
                      TOY)
    across = 1.0 * 1e6 / 8 / 50e3  # 400 Gb/s = 50e3 bytes/µs per GPU, 1/8 of the node's bytes
    inside = 1.75e6 / 450e3
    assert p.transfer_ms == pytest.approx((40 + max(inside, across * 1) / 0.5) / 1e3)


def _job(ranks: int = 8, **kw) -> Workload:
    work = (CommWork("allreduce", 25_000_000, None, 4, 8.0, 6.0, wait_ms=2.0),)
    return Workload(step_ms=100, shares_ms={"compute": 50, "communication": 30, "host": 20},
                    precision="tf32", peak_memory_bytes=10 * GIB,
                    current_device_name="NVIDIA A100-SXM4-40GB",
                    current_memory_bytes=42505273344, current_sm_count=108, ranks=ranks,
                    collectives=work, **kw)


def test_sizing_projects_the_communication_of_each_candidate():
    cat = load_catalog()
    model = load_model()
    s = project(_job(), cat, Constraints(include_consumer=True))
    cands = {c.gpu: c for c in s.candidates}
    a100, h100, l4 = cands["A100 40GB SXM"], cands["H100 SXM"], cands["L4"]
    assert a100.communication_ms == 30 and a100.like_for_like  # measured GPU and layout
    # H100: 4 all-reduces of 25 MB on 8 x NVLink 4: kernel' = 2 ms wait + 4 x the model's
    nv = model.classes["nvlink"]
    transfer = 4 * (nv.alpha_us + 1.75 * 25e6 / 450e3 / nv.eta) / 1e3
    exposed = 6.0 * (2.0 + transfer) / 8.0
    assert h100.communication_ms == pytest.approx(30 * exposed / 6.0, rel=1e-12)
    assert h100.like_for_like and h100.ranks == 8
    assert h100.fabric == "8 ranks on 1 node: NVLink 4 through NVSwitch (450 GB/s per " \
                          "direction per GPU)"
    assert h100.warnings[-1].startswith("communication projected with the alpha-beta model")
    # L4: the same calls over PCIe Gen4: slower than measured
    pc = model.classes["pcie"]
    transfer = 4 * (pc.alpha_us + 1.75 * 25e6 / 32e3 / pc.eta) / 1e3
    assert l4.communication_ms == pytest.approx(30 * (2.0 + transfer) / 8.0, rel=1e-12)
    assert l4.communication_ms > 30 > h100.communication_ms


def test_a_layout_projects_the_job_at_n_ranks_m_per_node():
    cat = load_catalog()
    s = project(_job(), cat, Constraints(layout_gpus=16, layout_gpus_per_node=8))
    h100 = s.candidate("H100 SXM")
    assert h100 is not None and h100.ranks == 16
    assert h100.fabric is not None and h100.fabric.startswith("16 ranks on 2 nodes of 8:")
    price = cat.price("H100 SXM")
    assert price is not None and h100.usd_per_hour == pytest.approx(16 * price.usd_per_gpu_hour)
    # the measured A100 at another layout is projected, not held
    a100 = s.candidate("A100 40GB SXM")
    assert a100 is not None and a100.communication_ms != 30 and a100.ranks == 16
    # a node of 16 H100s is no HGX board
    s = project(_job(), cat, Constraints(layout_gpus=16, layout_gpus_per_node=16))
    h100 = s.candidate("H100 SXM")
    assert h100 is not None and not h100.recommendable
    assert "one of its nodes holds 8 GPUs, not 16" in " ".join(h100.warnings)


@pytest.mark.parametrize(("gpus", "per_node", "ranks", "error"), [
    (12, 8, 8, "12 GPUs do not fill nodes of 8"),
    (4, 8, 8, "--gpus-per-node 8 is more than the 4 GPUs in all"),
    (16, None, 1, "this trace is one rank"),
    (1, None, 8, "has no collectives"),
])
def test_impossible_layouts_are_one_line_errors(gpus, per_node, ranks, error):
    with pytest.raises(SizingError, match=error):
        project(_job(ranks), load_catalog(),
                Constraints(layout_gpus=gpus, layout_gpus_per_node=per_node))


NEW_FORMAT = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid  1 on a device  0 [0x01] NVIDIA GH200 120GB
#  Rank  1 Group  0 Pid  2 on b device  0 [0x01] NVIDIA GH200 120GB
 0: #       size         count      type   redop    root     time   algbw   busbw #wrong
 0:      1048576        262144     float     sum      -1    100.0   10.49   10.49      0
 0:      2097152        524288     float     sum      -1    150.0   13.98   13.98      0
"""
OLD_FORMAT = """\
# Using devices
#   Rank  0 Pid 1 on      a0048 device  0 [0x27] A100-SXM4-40GB
#   Rank  1 Pid 2 on      a0048 device  1 [0x2a] A100-SXM4-40GB
#       size         count    type   redop     time   algbw   busbw  error     time
     1048576        262144   float     sum    75.38   13.91   13.91  2e-07    74.40
"""


def test_the_nccl_tests_parser_reads_both_formats_and_checks_busbw():
    fc = fit_comm()
    system = fc.System("x-allreduce.txt", "x", 2, 1, "nvlink", 450, None, None, "test")
    rows = fc.parse(NEW_FORMAT, system)
    assert [(r.collective, r.ranks, r.size, r.time_us, r.busbw_gbs) for r in rows] == [
        ("allreduce", 2, 1048576, 100.0, 10.49), ("allreduce", 2, 2097152, 150.0, 13.98)]
    assert [(r.size, r.time_us) for r in fc.parse(OLD_FORMAT, system)] == [(1048576, 75.38)]
    with pytest.raises(ValueError, match="rank count misread"):
        fc.parse(NEW_FORMAT.replace("13.98      0", "27.96      0"), system)
    # the fit: alpha and eta from two exact points t = 10 + x / 0.5
    assert fc.fit([(10.0, 30.0, 1.0), (100.0, 210.0, 1.0)]) == pytest.approx((10.0, 0.5))


@pytest.mark.parametrize(("args", "error"), [
    (("--gpus", "12", "--gpus-per-node", "8"), ("Error: --gpus 12 does not fill nodes of "
                                                "--gpus-per-node 8: give a multiple of it")),
    (("--gpus", "4", "--gpus-per-node", "8"), "Error: --gpus-per-node 8 is more than --gpus 4"),
])
def test_an_impossible_layout_is_a_usage_error_before_any_reading(tmp_path, args, error):
    res = cli("analyze", tmp_path / "absent.json", *args, "--no-report")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == error


def test_the_stable_entry_point_times_one_call_by_any_name_of_its_type():
    from rightsize.analyzers.sizing.comm import collective_us, span_for
    h100 = load_catalog().gpu("H100 SXM")
    span = span_for(h100, 8)
    assert span == layout_for(h100, 8).span(8)
    model = load_model()
    want = model.predict_us("allreduce", 2**20, span)
    assert collective_us("allreduce", 2**20, span) == want
    assert collective_us("all_reduce", 2**20, span) == want
    assert collective_us("c10d::allreduce_", 2**20, span) == want
    assert collective_us("no such op", 2**20, span) is None
