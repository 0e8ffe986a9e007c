"""The communication model against ../shared: one fitted number re-derived by hand from a
published nccl-tests file, the shipped table and docs/validation.md's leave-one-system-out errors
re-fitted from ../shared/nccl, and what the model makes of the real DLRM job (8 V100s) and of
jobs generated from it (benchmarks/make_job.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rightsize.analyzers.sizing.comm import layout_for, load_model
from rightsize.catalog import load_catalog
from rightsize.pipeline import analyze_document
from tests.conftest import REPO, cli, shared_path
from tests.job.test_comm_model import fit_comm
from tests.job.test_job_generated import _make_job

pytestmark = pytest.mark.shared


def test_the_infiniband_fit_by_hand():
    """ALCF Sophia, 2 DGX A100 (16 ranks, 8 per node, HDR InfiniBand 200 Gb/s per GPU): the
    only infiniband system, so its class fit is this file's alone. Per row (4 B .. 1 GiB, the
    out-of-place time t in µs), the ideal time is the slower of the in-node part,
    1.75 x S / 300e3 (NVLink 3: 300 GB/s per direction), and the network part,
    F(2 nodes) = 1 x S / 8 / 25e3 (200 Gb/s = 25e3 bytes/µs, each GPU carrying 1/8 of its node's
    bytes): x = 1.75 S / 300e3 (5.83e-6 S > 5e-6 S). alpha and b = 1/eta minimize
    sum(((alpha + b x) / t - 1)^2): with u = 1/t, v = x/t, Cramer's rule on
    [[Suu, Suv], [Suv, Svv]] (alpha, b) = (Su, Sv)."""
    text = shared_path("nccl", "a100-40gb-16gpu-2node-ib-dgxa100-allreduce.txt").read_text()
    suu = suv = svv = su = sv = 0.0
    rows = 0
    for line in text.splitlines():
        cells = line.split()
        if len(cells) == 13 and cells[0].isdigit():
            size, t = int(cells[0]), float(cells[5])
            u, v = 1 / t, 1.75 * size / 300e3 / t
            suu, suv, svv, su, sv = suu + u * u, suv + u * v, svv + v * v, su + u, sv + v
            rows += 1
    assert rows == 29
    det = suu * svv - suv * suv
    alpha, b = (su * svv - sv * suv) / det, (suu * sv - suv * su) / det
    ib = load_model().classes["infiniband"]
    assert alpha > 0 and (ib.alpha_us, ib.eta) == (float(f"{alpha:.6g}"), float(f"{1 / b:.6g}"))
    assert (round(alpha, 1), round(1 / b, 3)) == (40.9, 0.493)


def test_the_shipped_table_and_the_stated_errors_are_the_fit_of_the_shared_files():
    fc = fit_comm()
    rebuilt = fc._rounded(fc.build(shared_path("nccl")))
    shipped = json.loads((REPO / "rightsize" / "catalog" / "data" / "comm_model.json")
                         .read_text())
    assert rebuilt == shipped
    table = fc.markdown(shipped)
    validation = (REPO / "docs" / "validation.md").read_text()
    sizing = (REPO / "docs" / "sizing.md").read_text()
    for line in table.splitlines():
        assert line in validation and line in sizing, line
    # the numbers the prose states
    loo = {e["system"]: e["time_error_pct_median"]["allreduce"] for e in shipped["leave_one_out"]}
    assert round(loo["2 x AWS p4de.24xlarge, EFA"]) == 49
    assert round(loo["8 x 4 A100 (ALCF Polaris), Slingshot-11"]) == 30
    assert round(loo["8 x H100 SXM, NVSwitch"]) == 164


@pytest.fixture(scope="module")
def dlrm():
    return analyze_document([shared_path("traces", "ranks", "param-dlrm-8rank-v100")])


def test_dlrm_all_reduces_on_an_8_h100_nvswitch_node(dlrm):
    """The DLRM job's three all-reduces (394241, 112 and 226960 floats: 1576964, 448 and 907840
    bytes, test_job_dlrm) on 8 x H100 SXM through NVSwitch (NVLink 4: 450 GB/s per direction
    per GPU; nvlink class: alpha 21.4383 µs, eta 0.9718):

        t = 21.4383 + 1.75 x S / 450e3 / 0.9718
        1576964 B: 21.4383 + 6.13263 / 0.9718 = 21.4383 + 6.31059 = 27.749 µs
            448 B: 21.4383 + 0.00174 / 0.9718                      = 21.440 µs
         907840 B: 21.4383 + 3.53049 / 0.9718 = 21.4383 + 3.63294 = 25.071 µs

    74.26 µs in all, where the V100s' transfers (the shortest rank's kernel) took 86, 20 and
    69 µs: the model puts them on the V100 node (NVLink 2, 150 GB/s) at
    3 x 21.4383 + 1.75 x 2485252 / 150e3 / 0.9718 = 64.315 + 29.836 = 94.151 µs."""
    cat = load_catalog()
    model = load_model()
    h100 = layout_for(cat.gpu("H100 SXM"), 8).span(8)
    sizes = [c.bytes for c in dlrm.job.calls if c.collective == "allreduce"]
    assert sizes == [1576964, 448, 907840]
    got = [model.predict_us("allreduce", s, h100) for s in sizes]
    assert [round(t, 3) for t in got] == [27.749, 21.440, 25.071]
    nv = model.classes["nvlink"]
    assert got == [pytest.approx(nv.alpha_us + 1.75 * s / 450e3 / nv.eta, rel=1e-12)
                   for s in sizes]
    allreduce = next(c for c in dlrm.job.collectives if c.collective == "allreduce")
    assert allreduce.transfer_ms_per_step == 0.175
    assert allreduce.model_transfer_ms_per_step == 0.094151
    # every call of the job on the H100 node: the all-reduces above and five all-to-alls at
    # alpha + 0.875 x S / 450e3 / (eta x 0.712139), the NVSwitch H100's all-to-all ratio
    a2a = [c.bytes for c in dlrm.job.calls if c.collective == "alltoall"]
    assert a2a == [24576, 192, 1536, 13568, 24576]
    ratio = model.ratios["nvlink"]["alltoall"]
    transfer = sum(got) + sum(nv.alpha_us + 0.875 * s / 450e3 / (nv.eta * ratio) for s in a2a)
    cand = dlrm.sizing.candidate("H100 SXM")
    assert cand is not None and cand.like_for_like and cand.ranks == 8
    assert f"transfers {transfer / 1e3:.3f} ms per step" in " ".join(cand.warnings)
    assert cand.fabric == ("8 ranks on 1 node: NVLink 4 through NVSwitch (450 GB/s per "
                           "direction per GPU)")
    # rank 7's lateness stays: the waits are most of the measured communication, held
    current = dlrm.sizing.candidate("V100 32GB SXM2")
    assert current is not None and cand.communication_ms is not None
    assert current.communication_ms is not None
    assert 0.95 * current.communication_ms < cand.communication_ms < current.communication_ms


def test_a_generated_job_gets_the_models_transfer_by_hand(tmp_path: Path):
    """4 ranks on one V100 node (make_job --sizes: call i of a step has 2^(16 + i % 5) floats,
    the types of the DLRM step: 4 all-to-alls, an all-reduce, an all-to-all, 2 all-reduces;
    groups of 4). Per step, by the model on NVLink 2 (150 GB/s):
    all-reduce: alpha + 1.5 x S / 150e3 / eta; all-to-all: alpha + 0.75 x S / 150e3 / (eta x
    0.712139)."""
    shared_path("traces", "ranks", "param-dlrm-8rank-v100")
    truth = _make_job().make_job(tmp_path, ranks=4, straggler=1, delay_ms=5.0,
                                 cause="dataloader", steps=2, seed=2, sizes=True)
    doc = analyze_document([tmp_path])
    model = load_model()
    nv = model.classes["nvlink"]
    ratio = model.ratios["nvlink"]["alltoall"]
    kinds = ["alltoall"] * 4 + ["allreduce", "alltoall", "allreduce", "allreduce"]
    want = {"allreduce": 0.0, "alltoall": 0.0}
    for call in truth["calls"]:
        i = call["index"]
        size = 4 << (16 + i % 5)
        kind = kinds[i % 8]
        factor = 1.5 if kind == "allreduce" else 0.75 * 1 / ratio
        want[kind] += (nv.alpha_us + factor * size / 150e3 / nv.eta) / 2 / 1e3
    assert doc.job is not None
    got = {c.collective: c.model_transfer_ms_per_step for c in doc.job.collectives}
    assert got == {k: round(v, 6) for k, v in want.items()}
    # the straggler's 5 ms per step is waiting, not transfer: the H100 node keeps it
    h100 = doc.sizing.candidate("H100 SXM")
    v100 = doc.sizing.candidate("V100 32GB SXM2")
    assert h100 is not None and v100 is not None and h100.like_for_like
    assert h100.communication_ms is not None and v100.communication_ms is not None
    assert v100.communication_ms > 4.0
    assert h100.communication_ms > 0.9 * v100.communication_ms
    assert re.search(r"waiting for late ranks held at \d+\.\d+ ms", " ".join(h100.warnings))


def test_analyze_at_another_layout_from_the_cli(tmp_path: Path):
    """The DLRM job projected at 16 ranks, 8 per node: every candidate costs 16 GPUs and
    crosses its system's network; H100s cross the DGX H100's NDR InfiniBand."""
    job = shared_path("traces", "ranks", "param-dlrm-8rank-v100")
    out = tmp_path / "a.json"
    res = cli("analyze", job, "--gpus", "16", "--gpus-per-node", "8", "--format", "json",
              "-o", out, "--no-report", "-q")
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    cands = {c["gpu"]: c for c in doc["sizing"]["candidates"]}
    assert {c["ranks"] for c in cands.values()} == {16}
    assert cands["H100 SXM"]["fabric"] == (
        "16 ranks on 2 nodes of 8: NVLink 4 through NVSwitch (450 GB/s per direction per GPU)"
        " within a node; NVIDIA DGX H100: 8 x ConnectX-7 NDR InfiniBand 400 Gb/s (400 Gb/s per"
        " GPU) between nodes")
    price = load_catalog().price("H100 SXM")
    assert price is not None
    assert cands["H100 SXM"]["usd_per_hour"] == round(16 * price.usd_per_gpu_hour, 4)
