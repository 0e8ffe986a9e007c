"""The communication model's second pass (analyzers/sizing/nccl_model.py, nccl_tables.py,
comm_check.py, comm_fit.py): PCIe through host memory worked by hand (8 GPUs without P2P at a
stated PCIe generation, a switch's uplink shared, a pair's one-way broadcast), NCCL's P2P rule
over PCIe, the CPU vendor's LL cap and network overhead, EFA's declared latency in NCCL's pick,
a NIC-bound tree, RoCE on InfiniBand's transport, the NCCL release out of the tables' scope,
PCIe switches read from an nccl-tests log's bus numbers, and the PCIe envelope of the fit."""

from __future__ import annotations

import pytest

from rightsize.analyzers.sizing import comm_fit
from rightsize.analyzers.sizing import nccl_model as nm
from rightsize.analyzers.sizing import nccl_tables as tb
from rightsize.analyzers.sizing.comm import load_model
from rightsize.analyzers.sizing.comm_check import check, fit_model, fit_tables, switch_groups
from rightsize.analyzers.sizing.comm_system import SpecError, system_for
from rightsize.catalog import load_catalog
from rightsize.catalog.links import systems
from rightsize.traces.nccl_tests import bus_number, parse_log

GIB = 1 << 30
# 8 GPUs on PCIe Gen4 x16 (32 GB/s per direction), no peer-to-peer: through host memory
SHM_8 = nm.Span(8, 1, "pcie", 32.0, topology="host", arch="ada")
F = nm.Factors(link_eta={"pcie_host": 0.5, "pcie": 0.6}, lat_scale={"pcie_host": 1.0},
               self_steps=0.4, pcie_oneway=1.4)


def test_a_ring_through_host_memory_on_8_pcie_gen4_gpus_by_hand():
    """Each GPU writes its outgoing chunk to host memory and reads its incoming one over its
    own x16 link: 0.5 x 32 = 16 GB/s per direction. A ring all-reduce of 8: 14 steps, no
    own-chunk step next to PCIe (self_steps is a GPU link's): algbw 16 x 8/14; latency
    8.4 + 14 x 5.7 (NCCL's PCIe hop, Simple) = 88.2 µs. At 1 GiB: 88.2 + 2^30 / 9142.857 µs
    = 117528.7 µs, a bus bandwidth of 15.98 GB/s (nccl-tests: algbw x 2 x 7/8)."""
    t = nm.timing("allreduce", GIB, SHM_8, F)
    assert t is not None and (t.algorithm, t.protocol) == ("ring", "Simple")
    assert t.us == pytest.approx(88.2 + GIB / (16 * 8 / 14 * 1e3))
    assert GIB / (t.us * 1e3) * 14 / 8 == pytest.approx(15.98, abs=0.01)
    # NCCL's own view (PCIe at 0.75 of the line: 24 GB/s) picks it too: LL runs at half that
    # and LL128 does not run over PCIe
    got = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", SHM_8, nm.NOMINAL)}
    assert set(got) == {("ring", "LL"), ("ring", "Simple")}
    assert got["ring", "Simple"].algbw_gbs == pytest.approx(24 * 8 / 14)


def test_gpus_behind_one_switch_share_its_uplink_without_p2p():
    """2 GPUs per PCIe switch, through host memory: the switch's x16 uplink carries both
    GPUs' writes up and both reads down -- 16 / 2 = 8 GB/s each. A pair's broadcast sends one
    way only (one flow each way on the uplink) and at the one-way rate: 16 x 1.4 = 22.4."""
    shared = nm.Span(8, 1, "pcie", 32.0, topology="host", arch="ada", switch_gpus=2)
    assert F.link(shared) == pytest.approx(8.0)
    pair = nm.Span(2, 1, "pcie", 16.0, topology="host", arch="turing", switch_gpus=2)
    assert F.link(pair) == pytest.approx(4.0)  # the RTX 2080 Ti pair: 4.0 GB/s measured
    bcast = {c.protocol: c for c in nm.candidates("broadcast", pair, F)}
    assert bcast["Simple"].algbw_gbs == pytest.approx(16 * 0.5 * 1.4)


def test_nccls_peer_to_peer_rule_over_pcie():
    """NCCL copies GPU to GPU over PCIe only under a PCIe switch, or for a pair through an AMD
    CPU; GPUs on the CPU's own ports otherwise go through host memory (paths.cc)."""
    under_switch = nm.Span(8, 1, "pcie", 32.0, topology="p2p")
    assert under_switch.link_key == "pcie" and F.link(under_switch) == pytest.approx(19.2)
    on_ports = {(n, cpu): nm.Span(n, 1, "pcie", 32.0, topology="cpu", cpu=cpu).link_key
                for n in (2, 8) for cpu in ("amd", "intel", "")}
    assert on_ports == {(2, "amd"): "pcie", (2, "intel"): "pcie_host", (2, ""): "pcie_host",
                        (8, "amd"): "pcie_host", (8, "intel"): "pcie_host",
                        (8, ""): "pcie_host"}
    # switches of 2 with P2P: the ring leaves each switch through host memory
    pairs = nm.Span(8, 1, "pcie", 32.0, topology="p2p", switch_gpus=2)
    assert F.link(pairs) == pytest.approx(min(0.6, 0.5) * 32)


def test_the_cpu_sets_nccls_ll_cap_and_network_overhead_across_nodes():
    """NCCL's LL cap is the GPU generation's in one node and the CPU vendor's across nodes
    (AMD 22.5 / 19.0 GB/s at 2 / more nodes, Intel and others 39.0 / 20.4); a multi-node
    ring's hop waits NCCL's network post overhead: 2 µs on AMD (x3 for Simple), 1 else."""
    assert tb.ll_max(2, "", 1) == 141.0
    assert (tb.ll_max(2, "amd", 2), tb.ll_max(2, "amd", 4)) == (22.5, 19.0)
    assert (tb.ll_max(2, "intel", 2), tb.ll_max(2, "arm", 8)) == (39.0, 20.4)
    amd = nm.Span(16, 2, "nvlink", 300, "infiniband", 200, "nvswitch", "ampere", 12, cpu="amd")
    ring = {c.protocol: c for c in nm.candidates("allreduce", amd, nm.NOMINAL)
            if c.algorithm == "ring"}
    # Simple: 30 steps, 4 between nodes: 8.4 + 26 x max(3.4, 2 x 3) + 4 x 14 = 220.4 µs
    assert ring["Simple"].lat_us == pytest.approx(8.4 + 26 * 6.0 + 4 * 14.0)
    # LL: min(240 x 0.5, 22.5) x 16/30
    assert ring["LL"].algbw_gbs == pytest.approx(22.5 * 16 / 30)


def test_efas_declared_latency_is_in_nccls_pick_not_in_the_fitted_time():
    """aws-ofi-nccl declares 150 µs per EFA hop; NCCL adds it to each network hop when it
    picks (twice for Simple). 2 p4de nodes (Intel), tree LL: NCCL's view 6.8 + 2 x (7 x 0.6
    + 1 x (5.0 + 150)) = 325.2 µs; the fitted time with a 40 µs hop: 6.8 + 2 x (4.2 + 45.0)
    = 105.2 µs."""
    p4de = nm.Span(16, 2, "nvlink", 300, "efa", 50, "nvswitch", "ampere", 12, cpu="intel")
    nominal = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", p4de,
                                                                    nm.NOMINAL)}
    assert nominal["tree", "LL"].lat_us == pytest.approx(6.8 + 2 * (7 * 0.6 + 155.0))
    fitted = nm.Factors(net_lat_us={"efa": 40.0}, lat_scale={"nvlink3": 1.0})
    got = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", p4de, fitted)}
    assert got["tree", "LL"].lat_us == pytest.approx(6.8 + 2 * (4.2 + 45.0))


def test_a_nic_bound_tree_runs_at_its_nics_rate():
    """4 GH200 nodes of 4 on Slingshot (4 x 25 GB/s a node): NCCL's view of the tree is its
    NICs' rate x 0.92, 92 GB/s of bus; the fitted tree, bound by the NICs (x 0.9: 90 GB/s)
    rather than its NVLink chain (450 x 0.8 x 0.92), runs at their rate: algbw 45."""
    gh = nm.Span(16, 4, "nvlink", 450, "slingshot", 200, "mesh", "hopper", 18, True, 4, "arm")
    nominal = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", gh, nm.NOMINAL)}
    assert nominal["tree", "Simple"].algbw_gbs == pytest.approx(92 / 2)
    f = nm.Factors(link_eta={"nvlink4": 0.8}, net_eta={"slingshot": 0.9})
    got = {(c.algorithm, c.protocol): c for c in nm.candidates("allreduce", gh, f)}
    assert got["tree", "Simple"].algbw_gbs == pytest.approx(90 / 2)


def test_roce_takes_infinibands_latency_where_it_has_none_of_its_own():
    roce = nm.Span(16, 2, "nvlink", 450, "roce", 400, "nvswitch", "hopper", 18)
    f = nm.Factors(net_lat_us={"infiniband": 4.0}, net_ll_eta={"infiniband": 0.5})
    assert f.net_lat(roce) == 4.0 and f.nics(roce, "LL") == pytest.approx(8 * 50 * 0.5)
    assert nm.Factors(net_lat_us={"infiniband": 4.0, "roce": 9.0}).net_lat(roce) == 9.0
    assert nm.Factors(net_lat_us={"infiniband": 4.0}).net_lat(
        nm.Span(16, 2, "nvlink", 450, "efa", 400)) == 0.0  # EFA is not IB's transport


PCIE_LOG = """\
# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=20804
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 4 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5
#  Rank  0 Group  0 Pid  1 on box device  0 [0x1a] NVIDIA GeForce RTX 4090
#  Rank  1 Group  0 Pid  1 on box device  1 [0x1b] NVIDIA GeForce RTX 4090
#  Rank  2 Group  0 Pid  1 on box device  2 [0x3d] NVIDIA GeForce RTX 4090
#  Rank  3 Group  0 Pid  1 on box device  3 [0x3e] NVIDIA GeForce RTX 4090
#       size         count      type   redop    root     time   algbw   busbw #wrong
     1048576        262144     float     sum      -1    642.4    1.63    2.45      0
     2097152        524288     float     sum      -1   1251.1    1.68    2.51      0
# Out of bounds values : 0 OK
"""


def test_a_logs_bus_numbers_show_its_pcie_switches_and_its_release_its_scope():
    """The rank lines' buses pair up (0x1a/0x1b, 0x3d/0x3e): 2 GPUs per PCIe switch, whose
    uplink they share through host memory; the log prints NCCL 2.8.4 (nccl-library=20804),
    older than the tables the model carries: checked and said, not fitted on."""
    assert (bus_number("0x1b"), bus_number("0000:b4:00"), bus_number("00000000:B5:00.0"),
            bus_number("?")) == (0x1B, 0xB4, 0xB5, None)
    log = parse_log(PCIE_LOG)
    assert log.library == "2.8.4" and switch_groups(log.tables[0]) == 2
    system = system_for(None, load_catalog().match("NVIDIA GeForce RTX 4090").gpu,
                        load_catalog())
    assert system.intra == "pcie-shm"  # GeForce 40 cards: peer-to-peer disabled
    (table,) = fit_tables(log, system)
    assert (table.span.switch_gpus, table.span.link_key, table.in_scope) == (2, "pcie_host",
                                                                             False)
    notes = check(log, system, load_model()).tables[0].notes
    assert notes[0].startswith("NCCL 2.8.4 predates the tuning tables this model carries")
    assert notes[1].startswith("bus numbers show 2 GPUs per PCIe switch")
    # a spec that says the switches wins over the bus numbers
    own = system_for("gpus_per_switch=1", load_catalog().gpu("RTX 4090"), load_catalog())
    assert fit_tables(log, own)[0].span.switch_gpus == 1
    assert not comm_fit.fit([table]).link_eta  # out of scope: nothing fitted on it
    # ... but a user's own `comm fit` fits it, by its release's rules
    own_fit = fit_model([(log, system)], load_model())
    assert set(own_fit["factors"]["link_eta"]) >= {"pcie_host"}


def test_the_pcie_class_takes_its_fastest_systems_efficiency():
    """Two boxes through host memory, one at 0.5 of its link per flow, one at a fifth of it:
    the class keeps 0.5 (a slower PCIe path is a finding, not the class's rate)."""
    def table(system: str, eta: float) -> comm_fit.Table:
        span = nm.Span(8, 1, "pcie", 32.0, topology="host", arch="ada")
        sizes = tuple(float(2**k) for k in range(26, 31))
        bw = 32.0 * eta * 8 / 14
        return comm_fit.Table(system, "allreduce", span, sizes,
                              tuple(88.2 + s / (bw * 1e3) for s in sizes))

    f = comm_fit.fit([table("healthy", 0.5), table("slow", 0.1)])
    assert f.link_eta["pcie_host"] == pytest.approx(0.5, rel=0.01)


@pytest.mark.parametrize(("spec", "error"), [
    ("gpu=H100 SXM,cpu=sparc", "cpu=sparc: one of intel, amd, arm"),
    ("gpu=H100 SXM,nccl=latest", "nccl=latest: a release such as 2.21.5"),
    ("gpu=H100 SXM,gpus_per_switch=0", "gpus_per_switch=0: a whole number of at least 1"),
    ("gpu=H100 SXM,nic_path=pcie", "nic_path=pcie: switch or cpu"),
])
def test_the_new_spec_keys_are_checked(spec, error):
    with pytest.raises(SpecError, match=error):
        system_for(spec, None, load_catalog())


def test_the_new_spec_keys_reach_the_span():
    s = system_for("intra=pcie-shm:gen4,arch=ada,gpus_per_node=8,gpus_per_switch=2,cpu=amd,"
                   "nccl=2.21.5", None, load_catalog())
    assert (s.intra, s.link_gbs, s.switch_gpus, s.cpu, s.nccl) == ("pcie-shm", 32.0, 2, "amd",
                                                                    "2.21.5")
    span = s.span(8)
    assert (span.topology, span.switch_gpus, span.cpu, span.link_key) == ("host", 2, "amd",
                                                                          "pcie_host")
    assert system_for("intra=pcie-switch:gen5", None, load_catalog()).span(4).link_key == "pcie"
    assert tb.version("NCCL version 2.21.5+cuda12.2") == (2, 21, 5)
    assert (tb.modelled((2, 8, 4)), tb.modelled((2, 12)), tb.modelled(None)) == (False, True,
                                                                                   True)


def test_an_nccl_before_2_12_is_timed_with_its_own_ll_and_ll128_rules_by_hand():
    """8 A100s on NVSwitch in NCCL's view: 12 channels, 300 x 0.8 = 240 GB/s of bus, which
    NCCL 2.8 caps at 235 on Ampere. Its ring LL runs an all-reduce at a quarter of that
    (58.75, under its 87.7 cap) -> algbw x 8/14 = 33.571; LL128 at min(235 x 0.92, 12 x 20)
    = 216.2 -> 123.543; Simple 235 -> 134.286; an all-gather's LL at a third (78.33 x 8/7 =
    89.524). Today's tables: LL at half the bus, capped at 87.7 -> 50.114. The latencies are
    today's: LL 6.6 + 14 x 0.6 = 15.0, LL128 14 + 14 x 1.9 = 40.6. LL128 overtakes LL at
    25.6 / (1/33571.4 - 1/123542.9) = 1,180,115 B under 2.8 (2 MiB runs LL128) and at
    25.6 / (1/50114.3 - 1/126171.4) = 2,128,273 B today (2 MiB runs LL). No NVLS, and no
    LL128 off Volta and Ampere, before 2.12."""
    def view(legacy: bool, collective: str = "allreduce") -> dict[str, tuple[float, float]]:
        span = nm.Span(8, 1, "nvlink", 300.0, topology="nvswitch", arch="ampere", links=12,
                       link_gen=3, legacy=legacy)
        return {c.protocol: (c.lat_us, c.algbw_gbs)
                for c in nm.candidates(collective, span, nm.NOMINAL)}

    old, new = view(True), view(False)
    assert old["LL"] == pytest.approx((15.0, 58.75 * 8 / 14))
    assert old["LL128"] == pytest.approx((40.6, 216.2 * 8 / 14))
    assert old["Simple"] == pytest.approx((56.0, 235 * 8 / 14))
    assert view(True, "allgather")["LL"][1] == pytest.approx(235 / 3 * 8 / 7)
    assert new["LL"] == pytest.approx((15.0, 87.7 * 8 / 14))
    a100 = nm.Span(8, 1, "nvlink", 300.0, topology="nvswitch", arch="ampere", links=12,
                   link_gen=3, legacy=True)
    for size, proto in ((1_180_000, "LL"), (1_181_000, "LL128"), (2 << 20, "LL128")):
        pick = nm.choose("allreduce", size, a100)
        assert pick is not None and pick.protocol == proto, size
    pick = nm.choose("allreduce", 2 << 20, nm.Span(8, 1, "nvlink", 300.0, topology="nvswitch",
                                                   arch="ampere", links=12, link_gen=3))
    assert pick is not None and pick.protocol == "LL"
    h100 = nm.Span(8, 1, "nvlink", 450.0, topology="nvswitch", arch="hopper", links=18,
                   link_gen=4, legacy=True)
    assert {(c.algorithm, c.protocol) for c in nm.candidates("allreduce", h100, nm.NOMINAL)
            } == {("ring", "LL"), ("ring", "Simple")}
    # the release a spec or a log names sets it
    catalog = load_catalog()
    assert system_for("gpu=A100 40GB SXM,nccl=2.8.4", None, catalog).span(8).legacy
    assert not system_for("gpu=A100 40GB SXM,nccl=2.21.5", None, catalog).span(8).legacy
    assert not system_for("gpu=A100 40GB SXM", None, catalog).span(8).legacy


def test_a_nic_reached_through_the_cpu_runs_no_ll128_across_nodes():
    """ALCF Polaris: each Slingshot NIC is PHB to one A100 and SYS to the others (ALCF's
    nvidia-smi topo table; systems.csv nic_path=cpu), as GH200's NICs hang off Grace: NCCL runs
    LL128 across nodes only where a GPU reaches its NIC through a PCIe switch (PXB). Inside one
    node the path does not matter; the same A100s on a DGX A100 keep LL128 across nodes."""
    catalog = load_catalog()
    polaris = system_for("gpu=A100 40GB SXM,system=HPE Cray EX235n (ALCF Polaris)", None,
                         catalog)
    assert polaris.nic_path == "cpu" and polaris.to_json()["nic_path"] == "cpu"
    protocols = {c.protocol for c in nm.candidates("allreduce", polaris.span(32, 8),
                                                   nm.NOMINAL)}
    assert protocols == {"LL", "Simple"}
    assert "LL128" in {c.protocol for c in nm.candidates("allreduce", polaris.span(4, 1),
                                                         nm.NOMINAL)}
    dgx = system_for("gpu=A100 40GB SXM,inter=ib:200", None, catalog)
    assert dgx.nic_path == "" and "LL128" in {
        c.protocol for c in nm.candidates("allreduce", dgx.span(16, 2), nm.NOMINAL)}
    # a spec says it either way, over the catalog
    assert system_for("gpu=A100 40GB SXM,inter=ib:200,nic_path=cpu", None,
                      catalog).span(16, 2).nic_via_cpu
    assert not system_for("gpu=A100 40GB SXM,system=HPE Cray EX235n (ALCF Polaris),"
                          "nic_path=switch", None, catalog).span(32, 8).nic_via_cpu
    assert {s.name for s in systems() if s.nic_path == "cpu"} == {
        "HPE Cray EX254n (CSCS Alps)", "JUPITER Booster (JSC)",
        "HPE Cray EX235n (ALCF Polaris)"}
