"""The communication model (analyzers/sizing/nccl_model.py, comm.py, comm_layout.py) and the
catalog's links and systems: NCCL's ring, tree and NVLS formulas worked by hand on two layouts,
the choice between algorithms at a crossover size, what a layout's collectives cross, a rank's
calls projected onto another fabric and into sizing, the --system spec grammar."""

from __future__ import annotations

import pytest

from rightsize.analyzers.sizing import nccl_model as nm
from rightsize.analyzers.sizing.comm import (
    CommModel,
    collective_us,
    layout_for,
    load_model,
    project_calls,
    span_for,
)
from rightsize.analyzers.sizing.comm_system import SpecError, parse_spec, system_for
from rightsize.analyzers.sizing.model import CommWork
from rightsize.analyzers.sizing.projection import Constraints, SizingError, Workload, project
from rightsize.catalog import GIB, load_catalog
from rightsize.catalog.links import links_of, system_of, systems
from tests.conftest import cli

# 8 H100 through NVSwitch: NVLink 4, 18 links, 450 GB/s per direction per GPU
H100_8 = nm.Span(8, 1, "nvlink", 450, topology="nvswitch", arch="hopper", links=18, link_gen=4)
# 2 DGX A100 of 8: NVLink 3 (300 GB/s), 12 links; HDR InfiniBand 200 Gb/s per GPU
A100_16 = nm.Span(16, 2, "nvlink", 300, "infiniband", 200, "nvswitch", "ampere", 12,
                  link_gen=3)


def test_ring_and_nvls_on_one_nvswitch_node_by_hand():
    """NCCL's nominal view (its NVLink at 0.8 of the line rate: 360 GB/s) of an all-reduce of
    8 ranks, nsteps = 2(n-1) = 14 hops of NVLink:

        ring Simple  lat 8.4 + 14 x 3.4 = 56.0 µs   algbw 360 x 8/14         = 205.714 GB/s
        ring LL      lat 6.6 + 14 x 0.6 = 15.0 µs   algbw min(360/2, 141) x 8/14 = 80.571
        ring LL128   lat 14 + 14 x 1.9  = 40.6 µs   algbw min(360 x .92, 18 x 36.7) x 8/14
                                                          = 331.2 x 8/14  = 189.257
        NVLS Simple  lat 25 µs                      algbw 360 x 5/6         = 300.0
    """
    got = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", H100_8, nm.NOMINAL)}
    assert set(got) == {("ring", "LL"), ("ring", "LL128"), ("ring", "Simple"), ("nvls", "Simple")}
    assert (got["ring", "Simple"].lat_us, got["ring", "Simple"].algbw_gbs) == pytest.approx(
        (56.0, 360 * 8 / 14))
    assert (got["ring", "LL"].lat_us, got["ring", "LL"].algbw_gbs) == pytest.approx(
        (15.0, 141 * 8 / 14))
    assert (got["ring", "LL128"].lat_us, got["ring", "LL128"].algbw_gbs) == pytest.approx(
        (40.6, 331.2 * 8 / 14))
    assert (got["nvls", "Simple"].lat_us, got["nvls", "Simple"].algbw_gbs) == pytest.approx(
        (25.0, 300.0))
    # an all-gather has no tree and its ring crosses n-1 = 7 hops: 8.4 + 7 x 3.4 = 32.2 µs
    ag = {(c.algorithm, c.protocol): c for c in nm.candidates("allgather", H100_8, nm.NOMINAL)}
    assert ag["ring", "Simple"].lat_us == pytest.approx(32.2)
    assert ag["ring", "Simple"].algbw_gbs == pytest.approx(360 * 8 / 7)


def test_the_choice_between_algorithms_at_the_crossover_size():
    """LL's ring and NVLS cross where 15 + S / 80571.4 = 25 + S / 300000 (µs, bytes):
    S = 10 / (1/80571.43 - 1/300000) = 1,101,562 bytes; LL below, NVLS above (LL128 and the
    Simple ring are slower on both sides)."""
    s = 10 / (1 / (141 * 8 / 14 * 1e3) - 1 / 300e3)
    assert s == pytest.approx(1_101_562, abs=1)
    below, above = nm.choose("allreduce", s - 1000, H100_8), nm.choose("allreduce", s + 1000,
                                                                      H100_8)
    assert below is not None and (below.algorithm, below.protocol) == ("ring", "LL")
    assert above is not None and (above.algorithm, above.protocol) == ("nvls", "Simple")
    # int8 data: NVLS cannot reduce it, the ring keeps it
    pick = nm.choose("allreduce", s + 1000, H100_8, nvls_ok=False)
    assert pick is not None and pick.algorithm == "ring"


def test_the_fitted_time_of_nccls_pick_by_hand():
    """NVLS on 64 MiB with the factors below: latency 25 x 1.2 = 30 µs, bus 450 x 0.6 = 270,
    each GPU moving (1 + 1/8) of the buffer each way: algbw 270 x 8/9 = 240 GB/s:
    30 + 67108864 / 240e3 = 309.6203 µs."""
    f = nm.Factors(link_eta={"nvlink4": 0.75}, nvls_eta=0.6, self_steps=0.5,
                   lat_scale={"nvlink4": 1.2})
    t = nm.timing("allreduce", 64 << 20, H100_8, f)
    assert t is not None and (t.algorithm, t.protocol) == ("nvls", "Simple")
    assert t.us == pytest.approx(30 + 67108864 / 240e3)
    # a ring of 8 at 0.75 x 450 with half a step more: algbw 337.5 x 8 / 14.5 GB/s, and
    # latency 1.2 x 56 µs (int8: no NVLS; LL128 and LL are slower at 1 GiB)
    t = nm.timing("allreduce", 1 << 30, H100_8, f, nvls_ok=False)
    assert t is not None and (t.algorithm, t.protocol) == ("ring", "Simple")
    assert t.us == pytest.approx(1.2 * 56 + (1 << 30) / (337.5 * 8 / 14.5 * 1e3))


def test_ring_and_tree_across_two_nodes_by_hand():
    """16 ranks, 8 per node: NCCL's view (NVLink 240 GB/s, the NICs 8 x 25 = 200 GB/s a node).

    ring Simple: 30 hops, 2N = 4 between nodes: 8.4 + 26 x 3.4 + 4 x 14 = 152.8 µs (x 1.4 past
        64 B per channel and rank: 64 x 12 x 16 = 12288 B); bus min(240, 200) -> algbw
        200 x 16/30
    tree Simple: 8.4 + 2 x (7 x 4.0 + log2(2) x 14) = 92.4 µs; two nodes run at the in-node
        speed: min(240 x .92, 12 x 23.6) x 1/2 = 110.4 GB/s; x NCCL's per-size correction
        (1.0 at 1 GiB)
    tree LL128: 14 + 2 x (7 x 1.25 + 8.5) = 48.5 µs; min(220.8 x 120/128, 12 x 20) / 2 = 103.5
    At 1 GiB the tree is NCCL's pick: 92.4 + 2^30/110400 < 152.8 x 1.4 + 2^30/106666.7."""
    got = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", A100_16,
                                                                nm.NOMINAL)}
    ring, tree, ll128 = got["ring", "Simple"], got["tree", "Simple"], got["tree", "LL128"]
    assert (ring.lat_us, ring.algbw_gbs, ring.plateau_bytes) == pytest.approx(
        (152.8, 200 * 16 / 30, 12288))
    assert (tree.lat_us, tree.algbw_gbs) == pytest.approx((92.4, 110.4))
    assert (ll128.lat_us, ll128.algbw_gbs) == pytest.approx((48.5, 103.5))
    assert ring.time_us(1 << 30) == pytest.approx(152.8 * 1.4 + (1 << 30) / 106666.667)
    pick = nm.choose("allreduce", 1 << 30, A100_16)
    assert pick is not None and (pick.algorithm, pick.protocol) == ("tree", "Simple")
    # its time under fitted factors: bus min(300 x 0.7, 2 x 200 x 0.9) x .92 / 2 = 96.6 GB/s;
    # latency 1.5 x (8.4 + 2 x 7 x 4.0) in the node + 2 x 14.0 across = 124.6 µs
    f = nm.Factors(link_eta={"nvlink3": 0.7}, net_eta={"infiniband": 0.9},
                   lat_scale={"nvlink3": 1.5})
    t = nm.timing("allreduce", 1 << 30, A100_16, f)
    assert t is not None and t.us == pytest.approx(124.6 + (1 << 30) / 96.6e3)


def test_point_to_point_collectives_by_hand():
    """All-to-all of 16 ranks on 2 nodes: each GPU sends 7/16 of the buffer in its node and
    8/16 through its share of the NICs (200 GB/s a node / 8 = 25 GB/s): the slower,
    0.5 / 25 GB/s, sets the Simple bandwidth (50 GB/s); send/receive across nodes runs at one
    NIC (25 GB/s) in NCCL's view."""
    a2a = {c.protocol: c for c in nm.candidates("alltoall", A100_16, nm.NOMINAL)}
    assert a2a["Simple"].algbw_gbs == pytest.approx(50.0)
    assert a2a["LL"].algbw_gbs == pytest.approx(25.0)
    sr = {c.protocol: c for c in nm.candidates("sendrecv", A100_16, nm.NOMINAL)}
    assert sr["Simple"].algbw_gbs == pytest.approx(25.0)
    assert nm.candidates("allreduce", nm.Span(1, 1, "nvlink", 450), nm.NOMINAL) == []


def test_the_shipped_model_reads_and_times():
    model = load_model()
    assert model.source == "shipped"
    assert {"nvlink3", "nvlink4", "xgmi", "pcie", "pcie_host", "infiniband", "efa",
            "slingshot"} <= set(model.error_by_class)
    t = model.timing("allreduce", 1 << 30, H100_8)
    assert t is not None and t.algorithm == "nvls" and t.us > 0
    assert model.predict_us("barrier", 0, H100_8) == model.timing("allreduce", 8, H100_8).us
    assert model.predict_us("unknown", 1e6, H100_8) is None
    assert model.predict_us("allreduce", 1e6, nm.Span(1, 1, "nvlink", 450)) == 0.0
    # a class no system covers takes its scope's largest error as its range
    assert model.error_pct(nm.Span(16, 2, "nvlink", 450, "ethernet", 100)) == max(
        v for k, v in model.error_by_class.items() if k in nm.NET_CLASSES)


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
    assert links_of(cat.gpu("MI355X")).link_gbs_per_direction == 537.5
    gh200 = cat.gpu("GH200")
    assert links_of(gh200).words == ("NVLink 4 joining 4 GPUs all-to-all (450 GB/s per "
                                     "direction per GPU)")
    assert system_of(gh200).name == "HPE Cray EX254n (CSCS Alps)"
    assert cat.match("NVIDIA GH200 120GB").gpu is gh200
    # the priced instance's network: the AWS p4d row is EFA at 400 Gbps / 8 GPUs
    p4d = next(p for p in cat.prices if p.instance_type == "p4d.24xlarge")
    assert system_of(cat.gpu("A100 40GB SXM"), p4d).nic_gbps_per_gpu == 50


def test_what_a_layouts_collectives_cross():
    cat = load_catalog()
    h100 = layout_for(cat.gpu("H100 SXM"), 16)
    assert (h100.nodes, h100.per_node) == (2, 8)
    assert h100.span(16) == nm.Span(16, 2, "nvlink", 450.0, "infiniband", 400.0, "nvswitch",
                                    "hopper", 18, link_gen=4, cpu="intel")  # a DGX H100's Xeon
    assert h100.span(4) == nm.Span(4, 1, "nvlink", 450.0, topology="nvswitch", arch="hopper",
                                   links=18, link_gen=4, cpu="intel")  # a tensor-parallel 4
    gb = cat.gpu("GB200 (per GPU)")
    assert layout_for(gb, 64).span(64).nodes == 1  # an NVL72 rack's NVLink domain
    assert layout_for(gb, 144).span(144).nodes == 2
    nvl = cat.gpu("H100 NVL")  # bridged pairs: 2 ranks over NVLink, 8 over PCIe Gen5
    assert layout_for(nvl, 8).span(2).link_class == "nvlink"
    assert (layout_for(nvl, 8).span(8).link_class, layout_for(nvl, 8).span(8).link_gbs) == (
        "pcie", 64.0)
    assert layout_for(cat.gpu("GH200"), 16).span(16).nic_via_cpu
    assert layout_for(cat.gpu("A100 40GB SXM"), 16).words == (
        "16 ranks on 2 nodes of 8: NVLink 3 through NVSwitch (300 GB/s per direction per GPU)"
        " within a node; NVIDIA DGX A100: 8 x single-port ConnectX-6 HDR InfiniBand 200 Gb/s"
        " (200 Gb/s per GPU) between nodes")


def test_the_stable_entry_point_times_one_call_by_any_name_of_its_type():
    h100 = load_catalog().gpu("H100 SXM")
    span = span_for(h100, 8)
    assert span == layout_for(h100, 8).span(8)
    want = load_model().predict_us("allreduce", 2**20, span)
    assert collective_us("allreduce", 2**20, span) == want
    assert collective_us("all_reduce", 2**20, span) == want
    assert collective_us("c10d::allreduce_", 2**20, span) == want
    assert collective_us("no such op", 2**20, span) is None


TOY = CommModel(nm.Factors(link_eta={"nvlink2": 0.5, "nvlink4": 0.8}, nvls_eta=0.7,
                           lat_scale={"nvlink2": 1.0, "nvlink4": 1.0}),
                {"nvlink4": 20.0, "nvlink2": 50.0})


def test_calls_keep_their_wait_and_get_the_targets_transfer():
    cat = load_catalog()
    v100, h100 = layout_for(cat.gpu("V100 32GB SXM2"), 8), layout_for(cat.gpu("H100 SXM"), 8)
    work = (CommWork("allreduce", 1_000_000, None, 2, 1.0, 0.5, wait_ms=0.6),
            CommWork("alltoall", None, None, 1, 0.3, 0.3))  # no size: held
    p = project_calls(work, v100, h100, TOY)
    transfer = 2 * TOY.predict_us("allreduce", 1_000_000, h100.span(8)) / 1e3
    assert p.transfer_ms == pytest.approx(transfer)
    assert p.wait_ms == 0.6 and p.held_ms == 0.3 and not p.wait_estimated
    assert p.error_pct == 20.0  # the target's class error
    # exposed' = exposed x (wait + transfer') / kernel, plus the held call's exposed time
    assert p.exposed_ms == pytest.approx(0.5 * (0.6 + transfer) / 1.0 + 0.3)
    assert p.exposed_high_ms == pytest.approx(0.5 * (0.6 + transfer * 1.2) + 0.3)
    # one rank's trace: the wait is the kernel time beyond the model's transfer on V100
    p = project_calls((CommWork("allreduce", 1_000_000, None, 2, 1.0, 0.5),), v100, h100, TOY)
    now = 2 * TOY.predict_us("allreduce", 1_000_000, v100.span(8)) / 1e3
    assert p.wait_estimated and p.wait_ms == pytest.approx(1.0 - now)


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
    transfer = 4 * model.predict_us("allreduce", 25e6, span_for(cat.gpu("H100 SXM"), 8)) / 1e3
    assert h100.communication_ms == pytest.approx(30 * 6.0 * (2.0 + transfer) / 8.0 / 6.0,
                                                  rel=1e-9)
    assert h100.like_for_like and h100.ranks == 8
    assert h100.fabric == "8 ranks on 1 node: NVLink 4 through NVSwitch (450 GB/s per " \
                          "direction per GPU)"
    assert h100.warnings[-1].startswith("communication projected with NCCL's cost model")
    assert l4.communication_ms > 30 > h100.communication_ms  # PCIe Gen4: slower


def test_a_comm_model_of_the_users_own_replaces_the_shipped_one():
    cat = load_catalog()
    slow = CommModel(nm.Factors(link_eta={"nvlink4": 0.1}, nvls_eta=0.1), {"nvlink4": 5.0})
    s = project(_job(), cat, Constraints(comm_model=slow))
    fast = project(_job(), cat, Constraints())
    assert s.candidate("H100 SXM").communication_ms > fast.candidate("H100 SXM").communication_ms


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


@pytest.mark.parametrize(("args", "error"), [
    (("--gpus", "12", "--gpus-per-node", "8"), ("Error: --gpus 12 does not fill nodes of "
                                                "--gpus-per-node 8: give a multiple of it")),
    (("--gpus", "4", "--gpus-per-node", "8"), "Error: --gpus-per-node 8 is more than --gpus 4"),
])
def test_an_impossible_layout_is_a_usage_error_before_any_reading(tmp_path, args, error):
    res = cli("analyze", tmp_path / "absent.json", *args, "--no-report")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == error


def test_system_specs_fill_in_and_override_the_catalog():
    cat = load_catalog()
    s = system_for("gpu=H100 SXM,gpus_per_node=8,intra=nvswitch:nvlink4x18,inter=ib:400",
                   None, cat)
    assert (s.gpu, s.arch, s.intra, s.link_gbs, s.links, s.link_gen, s.inter, s.nic_gbps) == (
        "H100 SXM", "hopper", "nvswitch", 450.0, 18, 4, "infiniband", 400.0)
    assert s.span(16, 2) == nm.Span(16, 2, "nvlink", 450.0, "infiniband", 400.0, "nvswitch",
                                    "hopper", 18, link_gen=4, cpu="intel")
    box = system_for("intra=pcie-nop2p:gen4,arch=ada,gpus_per_node=8", None, cat)
    assert (box.link_gbs, box.span(8).link_key) == (32.0, "pcie_host")
    polaris = system_for("gpu=A100 40GB SXM,system=HPE Cray EX235n (ALCF Polaris)", None, cat)
    assert (polaris.gpus_per_node, polaris.inter, polaris.nic_gbps) == (4, "slingshot", 100.0)
    assert system_for("intra=xgmi:7x64", None, cat).link_gbs == 448.0
    assert parse_spec(" gpu = x , , nodes=2") == {"gpu": "x", "nodes": "2"}


@pytest.mark.parametrize(("spec", "error"), [
    ("speed=9", "'speed=9' is not one of gpu=, system=,"),
    ("intra=optical:9", "intra=optical:9: KIND is one of nvswitch, nvlink, xgmi, pcie"),
    ("intra=pcie:gen9", "DETAIL is nvlinkGxL, genN, LxGBS or GB/s"),
    ("intra=pcie", "say its bandwidth"),
    ("gpu=H100 SXM,inter=ib", "say the Gb/s per GPU (ib:400)"),
    ("gpu=H100 SXM,nodes=0", "nodes=0: a whole number of at least 1"),
    ("gpu=H100 SXM,arch=kepler", "arch=kepler: one of volta"),
    ("system=Nope", "system=Nope: not a catalog system"),
    ("gpu=Nope", "'Nope' is not a catalog GPU"),
])
def test_bad_system_specs_are_one_line_errors(spec, error):
    with pytest.raises(SpecError, match=error.replace("(", r"\(").replace(")", r"\)")):
        system_for(spec, None, load_catalog())


def test_a_models_timings_are_worked_out_once_and_are_the_models_own(monkeypatch):
    from rightsize.analyzers.sizing import comm

    span = layout_for(load_catalog().gpu("H100 SXM"), 8).span(8)
    model = CommModel(TOY.factors, TOY.error_by_class)
    calls: list[str] = []
    real = nm.timing
    monkeypatch.setattr(nm, "timing", lambda c, *a: calls.append(c) or real(c, *a))
    first = model.timing("allreduce", 2**20, span)
    assert model.timing("allreduce", 2**20, span) is first and calls == ["allreduce"]
    assert first == real("allreduce", 2.0**20, span, TOY.factors, True)
    assert model == TOY and "known" not in repr(model)  # not part of the model's value
    monkeypatch.setattr(comm, "MAX_KNOWN_TIMINGS", 1)  # full: forgotten, then worked out again
    model.timing("alltoall", 2**20, span)
    assert model.timing("allreduce", 2**20, span) == first and calls[-1] == "allreduce"
    assert len(calls) == 3
