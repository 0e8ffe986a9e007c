"""``rightsize comm check|fit|systems`` in a subprocess: the JSON contract, the text table,
one-line errors, and a fitted model read back by ``--comm-model``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.conftest import cli

# 8 H100s on one node, all-reduce at 1 and 64 MiB (the times a fit can meet exactly)
LOG = """\
# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 67108864 step: 64(factor) warmup iters: 5
""" + "".join(f"#  Rank  {r} Group  0 Pid  {10 + r} on node1 device  {r} [0x0{r}] NVIDIA H100 "
              "80GB HBM3\n" for r in range(8)) + """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)
     1048576        262144     float     sum      -1    30.00   34.95   61.17      0    30.00
    67108864      16777216     float     sum      -1   300.00  223.70  391.47      0   300.00
# Avg bus bandwidth    : 226.3
"""


def _log(tmp_path: Path, text: str = LOG, name: str = "h100.log") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_check_prints_the_json_contract(tmp_path: Path):
    res = cli("comm", "check", _log(tmp_path), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert list(doc) == ["system", "tables"]
    assert (doc["system"]["gpu"], doc["system"]["intra"], doc["system"]["link_gbs_per_direction"],
            doc["system"]["model"], doc["system"]["library"]) == (
        "H100 SXM", "nvswitch", 450.0, "shipped", "2.29.2")
    assert doc["system"]["tables"] == [{"collective": "all_reduce", "ranks": 8, "nodes": 1,
                                        "notes": []}]
    (table,) = doc["tables"]
    assert list(table) == ["collective", "rows"] and table["collective"] == "all_reduce"
    assert [list(r) for r in table["rows"]] == [["bytes", "measured_us", "predicted_us",
                                                 "algorithm", "protocol"]] * 2
    assert [(r["bytes"], r["measured_us"]) for r in table["rows"]] == [(1048576, 30.0),
                                                                     (67108864, 300.0)]
    assert table["rows"][1]["algorithm"] == "nvls" and table["rows"][1]["protocol"] == "Simple"
    assert all(r["predicted_us"] > 0 for r in table["rows"])


def test_check_prints_measured_and_predicted_per_size(tmp_path: Path):
    res = cli("comm", "check", _log(tmp_path))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("H100 SXM: nvswitch 450 GB/s per direction per GPU")
    assert "all_reduce: 8 ranks on 1 node" in lines
    row = next(line for line in lines if line.strip().startswith("64 MiB"))
    assert row.split()[2] == "300.0" and row.split()[-1] == "nvls/Simple"
    assert any(line.startswith("  median |error|: 1 MiB and more ") for line in lines)


def test_check_errors_are_one_line(tmp_path: Path):
    bad = _log(tmp_path, "just some text\n", "notes.txt")
    res = cli("comm", "check", bad)
    assert res.returncode == 1
    assert res.stderr.strip() == (f"rightsize: error: {bad}: not nccl-tests or rccl-tests "
                                  "output (no '# size count type ... time algbw busbw' result "
                                  "table)")
    empty = _log(tmp_path, "", "empty.log")
    res = cli("comm", "check", empty)
    assert res.returncode == 1 and res.stderr.strip().endswith("the file is empty")
    res = cli("comm", "check", _log(tmp_path), "--system", "intra=warp:9")
    assert res.returncode == 1
    assert res.stderr.strip().startswith("rightsize: error: --system intra=warp:9: KIND is")
    # two nodes of rank lines and no network known for the GPU's system: say it
    unknown = _log(tmp_path, LOG.replace("NVIDIA H100 80GB HBM3", "Mystery GPU"), "m.log")
    res = cli("comm", "check", unknown)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "'Mystery GPU' is not a catalog GPU: say what joins its ranks with --system" \
        in res.stderr
    res = cli("comm", "check", unknown, "--intra", "nvswitch:nvlink4x18", "--system",
              "arch=hopper", "--format", "json")
    assert res.returncode == 0, res.stderr


def test_fit_writes_a_model_that_analyze_and_check_read(tmp_path: Path):
    log = _log(tmp_path)
    out = tmp_path / "mine.json"
    res = cli("comm", "fit", log, "-o", out)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == f"next: rightsize analyze TRACES --comm-model {out}"
    model = json.loads(out.read_text())
    assert (model["format"], model["version"]) == ("rightsize-comm-model", 1)
    assert set(model["error_pct"]) == {"nvlink4"}
    # its own log: the error the file states is the median |error| over its rows
    res = cli("comm", "check", log, "--comm-model", out, "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["system"]["model"] == str(out)
    errs = [100 * abs(r["predicted_us"] / r["measured_us"] - 1) for r in doc["tables"][0]["rows"]]
    assert statistics.median(errs) == pytest.approx(model["error_pct"]["nvlink4"], abs=0.05)
    assert max(errs) < 10
    # never over an existing file without --force; a model that is not one is refused
    res = cli("comm", "fit", log, "-o", out)
    assert res.returncode == 1 and "--force" in res.stderr
    assert cli("comm", "fit", log, "-o", out, "--force").returncode == 0
    res = cli("analyze", tmp_path / "absent.json", "--comm-model", log, "--no-report")
    assert res.returncode == 1
    assert "not a communication model: not JSON" in res.stderr


def test_systems_lists_the_catalogs_systems():
    res = cli("comm", "systems")
    assert res.returncode == 0
    assert ("HPE Cray EX254n (CSCS Alps): 4 x GH200; 4 x HPE Slingshot-11 200 Gb/s, one per "
            "GH200 (slingshot, 200 Gb/s per GPU)") in res.stdout.splitlines()


def test_serving_predict_reads_a_users_comm_model(tmp_path: Path):
    """A fabric 100x slower than the shipped model's NVLink 4 (its file's factors): TP 4
    decode steps get slower by its all-reduces, TP 1 (no all-reduce) not at all."""
    from tests.serving.test_serving_ops import LLAMA

    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"format": "rightsize-comm-model", "version": 1,
                                "factors": {"link_eta": {"nvlink4": 0.01}, "nvls_eta": 0.01,
                                            "lat_scale": {"nvlink4": 100.0}},
                                "error_pct": {"nvlink4": 5.0}}))
    for tp, slower in ((4, True), (1, False)):
        args = ("serving", "predict", "--hf-config", tmp_path / "llama.json", "--gpu",
                "H100 SXM", "--tp", str(tp), "--batch", "8", "--isl", "1024", "--osl", "128",
                "--format", "json")
        plain = json.loads(cli(*args).stdout)["predictions"][0]
        res = cli(*args, "--comm-model", slow)
        assert res.returncode == 0, res.stderr
        mine = json.loads(res.stdout)["predictions"][0]
        assert (mine["tpot_ms"] > 2 * plain["tpot_ms"]) is slower
        assert (mine["tpot_ms"] == plain["tpot_ms"]) is not slower
