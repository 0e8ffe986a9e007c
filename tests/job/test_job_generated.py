"""Jobs made by benchmarks/make_job.py from the real DLRM rank 0 (../shared): the straggler it
injects is named with its cause and its delay within 5%, and every matched call's arrivals,
waits, transfer and bus bandwidth equal the generator's truth."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from rightsize.analyzers.document import Document
from rightsize.analyzers.job import names
from rightsize.pipeline import analyze_document
from tests.conftest import REPO, shared_path

pytestmark = pytest.mark.shared


def _make_job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_job", REPO / "benchmarks" / "make_job.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job(tmp_path: Path, **kw) -> tuple[Document, dict]:
    shared_path("traces", "ranks", "param-dlrm-8rank-v100")
    truth = _make_job().make_job(tmp_path, **kw)
    return analyze_document([tmp_path]), truth


@pytest.mark.parametrize(("cause", "ranks", "straggler", "delay_ms"), [
    ("dataloader", 4, 2, 5.0), ("compute", 3, 0, 4.0), ("host", 2, 1, 3.0)])
def test_the_injected_straggler_is_named_with_its_cause_and_delay(tmp_path, cause, ranks,
                                                                   straggler, delay_ms):
    doc, truth = _job(tmp_path, ranks=ranks, straggler=straggler, delay_ms=delay_ms,
                      cause=cause, steps=3, seed=7)
    job = doc.job
    assert job is not None and job.rank_count == ranks
    s = job.stragglers[0]
    assert (s.rank, s.cause) == (straggler, cause)
    assert s.late_ms_per_step == pytest.approx(delay_ms, rel=0.05)
    # exactly the truth: its lateness (last - second-last arrival) where it was last
    mine = [c for c in truth["calls"] if c["last_rank"] == straggler and c["late_ns"] >= 1000]
    assert s.last_calls == len(mine)
    assert s.late_ms_per_step == round(sum(c["late_ns"] for c in mine) / 3 / 1e6, 6)
    assert s.cause_ms_per_step == pytest.approx(delay_ms, rel=0.05)
    assert doc.recommendations[0].id == "straggler"
    assert doc.recommendations[0].title == f"Rank {straggler} holds up the collectives"
    assert len(job.stragglers) == 1  # the jitter (0-20 µs) names no one else


def test_every_call_equals_the_truth(tmp_path):
    doc, truth = _job(tmp_path, ranks=4, straggler=1, delay_ms=5.0, cause="dataloader",
                      steps=3, seed=3)
    job = doc.job
    assert job is not None and job.matched_by == ("order per stream",)
    assert job.calls_total == len(truth["calls"]) == 24  # 8 collectives x 3 steps
    for got, want in zip(job.calls, truth["calls"], strict=True):
        first = min(want["arrival_ns"])
        assert got.ranks == (0, 1, 2, 3)
        assert got.arrival_ms == tuple(round((a - first) / 1e6, 6) for a in want["arrival_ns"])
        assert got.transfer_ms == want["transfer_ns"] / 1e6  # the shortest: the last rank's
        assert got.wait_ms_mean == round(sum(want["wait_ns"]) / 4 / 1e6, 6)
        tie = want["late_ns"] < 1000
        assert got.last_rank == (None if tie else want["last_rank"])
        assert got.late_ms == want["late_ns"] / 1e6
    # waits vs transfers per rank: its waits, and the rest of its collective kernels' time
    for r in job.ranks:
        waits = sum(c["wait_ns"][r.rank] for c in truth["calls"]) / 3 / 1e6
        assert r.wait_ms_per_step == round(waits, 6)
    for c in job.collectives:
        calls = [t for t in truth["calls"] if names.from_kernel(t["kernel"]) in (
            c.collective, "sendrecv" if c.collective == "alltoall" else None)]
        assert c.calls == len(calls)
        assert c.transfer_ms_per_step == round(sum(t["transfer_ns"] for t in calls) / 3 / 1e6, 6)
        assert c.wait_ms_per_step == round(sum(sum(t["wait_ns"]) for t in calls) / 4 / 3 / 1e6, 6)


def test_sixteen_ranks_two_nodes_seq_matching_and_bus_bandwidth(tmp_path):
    doc, truth = _job(tmp_path, ranks=16, straggler=5, delay_ms=5.0, cause="dataloader",
                      steps=2, seed=1, sizes=True)
    job = doc.job
    assert job is not None
    assert (job.nodes, job.gpus_per_node) == (2, 8)
    assert job.nodes_basis.startswith("inferred: 16 ranks on 8 distinct device indices (each "
                                      "used by 2 ranks)")
    assert job.fabric.startswith("2 nodes: NVLink (150 GB/s per direction per GPU) within a")
    assert job.matched_by == ("process group + sequence number",)
    assert [c.key for c in job.calls] == [f"pg 0 #{i}" for i in range(16)]
    assert job.stragglers[0].rank == 5
    assert job.stragglers[0].late_ms_per_step == pytest.approx(5.0, rel=0.05)
    for got, want in zip(job.calls, truth["calls"], strict=True):
        i = want["index"]
        nelems = 1 << (16 + i % 5)  # the generator's sizes: floats, 256 KiB .. 4 MiB
        kind = names.from_kernel(want["kernel"])
        kind = "alltoall" if kind == "sendrecv" else kind  # all_to_all's args name it
        size = nelems * 4
        assert (got.collective, got.bytes) == (kind, size)
        algbw = size / want["transfer_ns"]
        factor = {"allreduce": 2 * 15 / 16, "alltoall": 15 / 16}[kind]
        assert got.algbw_gbs == round(algbw, 3)
        assert got.busbw_gbs == round(algbw * factor, 3)
    # across nodes the link's peak is not known: no percentage of it is made up
    assert all(c.link_peak_gbs is None and c.busbw_pct_of_peak is None for c in job.collectives)


def test_the_job_from_a_process_pool_equals_the_pipelines(tmp_path):
    from rightsize import job_map
    from rightsize.engine import EngineOptions

    doc, _ = _job(tmp_path, ranks=3, straggler=2, delay_ms=2.0, cause="host", steps=2, seed=5)
    paths = sorted(tmp_path.glob("rank*.pt.trace.json"))
    pooled = job_map.job(paths, run=EngineOptions(workers=2))
    assert pooled is not None and doc.job is not None
    assert Document.from_json({**doc.to_json(), "job": pooled.to_json()}).job == doc.job
