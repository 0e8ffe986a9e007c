"""``rightsize.analyze()`` takes the CLI's options: steps, memory budget, engine and workers.

The API runs the same pipeline as ``rightsize analyze``; in this process (its default) it keeps
each rank's frames, on worker processes the document is the same and the frames stay with the
workers (``ranks`` says so in one line). Bad values are one-line ``RightsizeError``s.
"""

from __future__ import annotations

import pytest

import rightsize
from rightsize.api import NoFramesError
from rightsize.errors import RightsizeError
from rightsize.traces import budget, kineto
from tests.job.steps_job import write_job


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return write_job(tmp_path_factory.mktemp("api") / "job", ranks=2, steps=4)


def test_steps_and_a_memory_budget(job):
    a = rightsize.analyze(job, steps=(1, 2))
    assert a.steps.names == ("ProfilerStep#1", "ProfilerStep#2")
    assert [i["window"]["reason"] for i in a.to_json()["inputs"]] == ["asked", "asked"]
    # one rank of 24 events (4 steps of 6); a budget whose window (90% of it above the
    # floor) holds 18 events: 3 steps, from the second
    rank0 = min(job.glob("*.json"))
    cap = budget.need_for_events(kineto.MEMORY, 20)
    assert budget.estimate(rank0, kineto.MEMORY).need_bytes > cap  # so it is windowed
    window = rightsize.analyze(rank0, memory_budget=cap).to_json()["inputs"][0]["window"]
    assert (window["first_step"], window["last_step"], window["reason"],
            window["budget_bytes"]) == (1, 3, "memory budget", cap)
    assert rightsize.analyze(rank0, memory_budget="2G").to_json()["inputs"][0].get("window") \
        is None


def test_workers_give_the_same_document_and_keep_the_frames(job):
    here = rightsize.analyze(job)
    assert [r.rank for r in here.ranks] == [0, 1]
    pooled = rightsize.analyze(job, engine="local", workers=2)
    assert pooled.document == here.document
    with pytest.raises(NoFramesError, match=r"analyzed by worker processes \(engine='local', "
                                             r"workers=2\)"):
        pooled.ranks  # noqa: B018 - the property raises


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"steps": (3, 1)}, "steps must be (A, B), two step numbers with 0 <= A <= B"),
    ({"steps": "1-2"}, "steps must be (A, B)"),
    ({"memory_budget": "10M"}, "memory_budget must be at least 100,000,000 bytes"),
    ({"memory_budget": "lots"}, "memory_budget: not a size"),
    ({"engine": "spark"}, "unknown engine 'spark': use one of local, ray"),
    ({"workers": 0}, "workers must be a positive integer"),
    ({"engine": "ray", "workers": 2}, "workers must be a positive integer, for the local"),
    ({"ray_address": "x:1", "engine": "local"}, "ray_address needs engine='ray'"),
])
def test_bad_options_are_one_line(job, kwargs, message):
    with pytest.raises(RightsizeError) as err:
        rightsize.analyze(job, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)
