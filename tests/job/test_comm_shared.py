"""The communication model against ../shared: the real DLRM job (8 V100s) against the model on
its own fabric (the goal: its all-reduce transfer within 15%), the job projected onto other
GPUs and layouts, jobs generated from it (benchmarks/make_job.py), every shared nccl-tests log
through ``rightsize comm check``, and docs/comm.md's leave-one-out table equal to the shipped
model's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rightsize.analyzers.job.fabric_check import expected_us, latency_us
from rightsize.analyzers.sizing.comm import layout_for, load_model, span_for
from rightsize.catalog import load_catalog
from rightsize.pipeline import analyze_document
from tests.conftest import REPO, cli, shared_path
from tests.job.test_job_generated import _make_job

pytestmark = pytest.mark.shared
DLRM_SIZES = [1576964, 448, 907840]  # 394241, 112 and 226960 floats (test_job_dlrm)


@pytest.fixture(scope="module")
def dlrm():
    return analyze_document([shared_path("traces", "ranks", "param-dlrm-8rank-v100")])


def test_dlrm_all_reduce_transfer_within_15_percent_of_the_model(dlrm):
    """8 V100 SXM2 in a DGX-1 hybrid cube-mesh (NVLink 2, 150 GB/s, 6 links): the model picks
    NCCL's ring LL128 for 1.6 and 0.9 MB (latency 14 + 14 x 1.9 hops) and LL for 448 B; the
    job's own small all-reduce (448 B: 20 µs) replaces the model's latency at 8 bytes.
    Measured transfer (shortest rank's kernel after the last arrival): 86 + 20 + 69 = 175 µs
    per step; the model's, with the trace's latency, about 167 µs (-4%)."""
    allreduce = next(c for c in dlrm.job.collectives if c.collective == "allreduce")
    assert allreduce.transfer_ms_per_step == 0.175
    assert [c.bytes for c in dlrm.job.calls if c.collective == "allreduce"] == DLRM_SIZES
    layout = layout_for(load_catalog().gpu("V100 32GB SXM2"), 8)
    model = load_model()
    want = [expected_us("allreduce", s, 8, layout, model, {"allreduce": 20.0})[0]
            for s in DLRM_SIZES]
    assert allreduce.model_transfer_ms_per_step == round(sum(want) / 1e3, 6)
    assert abs(allreduce.model_transfer_ms_per_step / 0.175 - 1) <= 0.15
    checks = {(c.collective, c.bytes): c for c in dlrm.job.collective_checks}
    big = checks["allreduce", 1576964]
    assert (big.algorithm, big.protocol, big.verdict, big.transfer_us) == ("ring", "LL128",
                                                                           "expected", 86.0)
    assert big.model_us == pytest.approx(model.predict_us("allreduce", 1576964,
                                                          layout.span(8)), abs=1e-3)
    assert checks["allreduce", 448].expected_us == pytest.approx(20.0, abs=0.05)


def test_dlrm_on_an_8_h100_nvswitch_node(dlrm):
    """Every call of the job projected onto an H100 node by the model: each call type keeps
    its wait for late ranks and gets the model's transfer."""
    model = load_model()
    h100 = span_for(load_catalog().gpu("H100 SXM"), 8)
    a2a = [c.bytes for c in dlrm.job.calls if c.collective == "alltoall"]
    assert a2a == [24576, 192, 1536, 13568, 24576]
    transfer = sum(model.predict_us("allreduce", s, h100) for s in DLRM_SIZES) + sum(
        model.predict_us("alltoall", s, h100) for s in a2a)
    cand = dlrm.sizing.candidate("H100 SXM")
    assert cand is not None and cand.like_for_like and cand.ranks == 8
    assert f"transfers {transfer / 1e3:.3f} ms per step" in " ".join(cand.warnings)
    assert cand.fabric == ("8 ranks on 1 node: NVLink 4 through NVSwitch (450 GB/s per "
                           "direction per GPU)")
    current = dlrm.sizing.candidate("V100 32GB SXM2")
    assert current is not None and cand.communication_ms is not None
    assert current.communication_ms is not None
    # rank 7's lateness stays: the waits are most of the measured communication, held
    assert 0.95 * current.communication_ms < cand.communication_ms < current.communication_ms


def test_a_generated_job_gets_the_models_transfer(tmp_path: Path):
    """4 ranks on one V100 node (make_job --sizes: call i of a step has 2^(16 + i % 5) floats,
    the types of the DLRM step; groups of 4): per type and step, the sum of the model's
    expected transfer of its calls, with the latency of the job's own small calls."""
    shared_path("traces", "ranks", "param-dlrm-8rank-v100")
    truth = _make_job().make_job(tmp_path, ranks=4, straggler=1, delay_ms=5.0,
                                 cause="dataloader", steps=2, seed=2, sizes=True)
    doc = analyze_document([tmp_path])
    assert doc.job is not None
    layout = layout_for(load_catalog().gpu("V100 32GB SXM2"), 4)
    model = load_model()
    import polars as pl
    calls = pl.DataFrame({"collective": [c.collective for c in doc.job.calls],
                          "bytes": [c.bytes for c in doc.job.calls],
                          "transfer_ns": [round(c.transfer_ms * 1e6) for c in doc.job.calls]})
    latency = latency_us(calls)
    kinds = ["alltoall"] * 4 + ["allreduce", "alltoall", "allreduce", "allreduce"]
    want = {"allreduce": 0.0, "alltoall": 0.0}
    for call in truth["calls"]:
        i = call["index"]
        kind = kinds[i % 8]
        want[kind] += expected_us(kind, 4 << (16 + i % 5), 4, layout, model, latency)[0] / 2e3
    got = {c.collective: c.model_transfer_ms_per_step for c in doc.job.collectives}
    assert got == pytest.approx({k: round(v, 6) for k, v in want.items()}, abs=2e-6)
    h100 = doc.sizing.candidate("H100 SXM")
    v100 = doc.sizing.candidate("V100 32GB SXM2")
    assert h100 is not None and v100 is not None and h100.like_for_like
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


def test_comm_check_on_a_shared_log_matches_its_sources():
    """The 80-H100 log: five tables read apart, each on 10 nodes of 8 (its rank lines); the
    fabric stated on the command line (not in the log)."""
    log = shared_path("nccl", "h100-80gpu-10node-unstated-fabric-allreduce_allgather_"
                              "reducescatter_alltoall_sendrecv.txt")
    res = cli("comm", "check", log, "--inter", "ib:400", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [(t["collective"], t["ranks"], t["nodes"]) for t in doc["system"]["tables"]] == [
        (c, 80, 10) for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
                              "sendrecv")]
    assert [len(t["rows"]) for t in doc["tables"]] == [10] * 5
    assert doc["system"]["inter"] == "infiniband"


def test_the_docs_table_is_the_shipped_models():
    """docs/comm.md states the leave-one-system-out table benchmarks/fit_comm.py printed when
    it wrote the shipped model (``python benchmarks/fit_comm.py ../shared --write ...``)."""
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location("fit_comm", REPO / "benchmarks" /
                                                  "fit_comm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_comm"] = module
    spec.loader.exec_module(module)
    shipped = json.loads((REPO / "rightsize" / "catalog" / "data" / "comm_model.json")
                         .read_text())
    docs = (REPO / "docs" / "comm.md").read_text()
    for line in module.markdown(shipped).splitlines():
        assert line in docs, line
