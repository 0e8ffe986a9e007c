"""``rightsize analyze DIR`` on the ranks of one job (the real CLI in a subprocess): the job
section in JSON, text and HTML; traces that are not one job refused in one line."""

from __future__ import annotations

import json
import re

from rightsize.analyzers.document import job as dj
from tests.conftest import REPO, cli
from tests.job.test_job_naming_schemes import _rank


def _dir(tmp_path, scheme="old"):
    d = tmp_path / "job"
    d.mkdir()
    for r in (0, 1):
        _rank(r, scheme).write(d / f"rank{r}.pt.trace.json")
    return d


def test_analyze_a_job_directory(tmp_path):
    d = _dir(tmp_path)
    res = cli("analyze", d, "--format", "json", "-q", "-o", tmp_path / "a.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert list(doc)[-1] == "job" and doc["job"]["rank_count"] == 2
    assert [s["rank"] for s in doc["job"]["stragglers"]] == [1]
    assert len(doc["ranks"]) == 2  # the per-rank documents stay as they are
    html = (tmp_path / "a.report.html").read_text()
    assert '<section id="job">' in html and "Rank 1 arrives last at 100%" in html
    text = cli("analyze", d, "-q", "--no-report", cwd=tmp_path)
    assert text.returncode == 0 and "Job across ranks" in text.stdout
    assert "Rank 1 holds up the collectives" in text.stdout


def test_analyze_refuses_traces_of_two_jobs(tmp_path):
    d = _dir(tmp_path)
    other = _rank(1, "old")
    other.extra["distributedInfo"] = {"backend": "nccl", "rank": 1, "world_size": 4}
    other.write(d / "rank1.pt.trace.json")
    res = cli("analyze", d, "-q", "--no-report", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "are not ranks of one job: world size/backend 2/nccl vs 4/nccl" in res.stderr


def test_analyze_refuses_ranks_that_disagree_on_a_process_group(tmp_path):
    d = _dir(tmp_path)
    for r, members in ((0, [0, 1]), (1, [1, 2])):
        b = _rank(r, "old")
        b.extra["distributedInfo"].update(pg_count=1, pg_config=[
            {"pg_name": "7", "pg_desc": "tp", "backend_config": "cuda:nccl", "pg_size": 2,
             "ranks": members}])
        b.write(d / f"rank{r}.pt.trace.json")
    res = cli("analyze", d, "-q", "--no-report", cwd=tmp_path)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "process group '7' has ranks [0, 1] vs [1, 2]" in res.stderr


def test_job_keys_are_documented():
    text = (REPO / "docs" / "json-contract.md").read_text()
    start = text.index("\n`job` (several ranks")
    section = text[start:text.index("\n\n", start + 2)]
    documented = set(re.findall(r"`([a-z_0-9]+)`", section))
    keys = set()
    for cls in (dj.Job, dj.JobRank, dj.Straggler, dj.CollectiveType, dj.CollectiveCall,
                dj.JobCost):
        keys |= {f for f in cls.__dataclass_fields__ if f != "extra"}
    assert keys - documented == set()
