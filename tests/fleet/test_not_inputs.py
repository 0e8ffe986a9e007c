"""What a fleet scan leaves out under a folder, and says so: JSON documents that are not traces
(Hugging Face configs, samples/whatif/pairs.json), CSV tables that are no GPU log (a demand
curve), text logs that are no GPU metrics or nccl-tests log. A damaged trace stays an input
whose row says what is wrong; a file named on the command line is always an input."""

from __future__ import annotations

import shutil
from pathlib import Path

from rightsize.fleet.discover import walk
from rightsize.fleet.table import FleetTable
from tests.conftest import SAMPLES, cli
from tests.fleet.jobs import BAD, bad_inputs, trace, write


def test_samples_configs_pairs_demand_and_console_logs_are_not_inputs():
    _, files, left_out = walk([str(SAMPLES)])
    names = {f.name for f in files}
    # 6 Hugging Face configs + whatif/pairs.json; day.csv and serving-bimodal.csv (a demand
    # curve, a serving measurement); record_gpu.log + record-h200.log
    assert left_out["json"] == 7 and left_out["csv"] == 2 and left_out["text"] == 2
    assert not names & {"gpt2.json", "pairs.json", "day.csv", "serving-bimodal.csv",
                        "record-h200.log"}
    # the exports that are inputs stay inputs
    assert {"ncu-train_compute.csv", "nvidia-smi-query-gpu.csv"} <= names


def test_a_scan_counts_what_it_left_out_and_has_no_bad_rows_for_them(tmp_path):
    root = tmp_path / "in"
    write(root / "job" / "rank0.pt.trace.json", trace())
    shutil.copy(SAMPLES / "configs" / "gpt2.json", root / "job" / "config.json")
    shutil.copy(SAMPLES / "whatif" / "pairs.json", root / "pairs.json")
    shutil.copy(SAMPLES / "day.csv", root / "day.csv")
    (root / "train.log").write_text("epoch 1 loss 2.3\n")
    bad_inputs(root / "bad")
    res = cli("fleet", "scan", root, "--table", tmp_path / "t", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "4 jobs found" in res.stderr and ": 1 ok, 3 bad inputs, 0 failed" in res.stderr
    assert ("4 files under the folders are not inputs and were left out: CSV tables that are"
            " no nvidia-smi, DCGM or Nsight Compute export: 1; JSON documents that are not traces"
            " (no traceEvents: model configs, lists): 2; text files that are no nvidia-smi, DCGM"
            " or nccl-tests log: 1") in res.stderr
    rows = FleetTable(tmp_path / "t").rows().collect()
    bad = sorted(Path(p[0]).name for p in rows.filter(rows["status"] == "bad-input")["paths"])
    assert bad == sorted(BAD)  # the damaged files, and only they


def test_a_file_named_on_the_command_line_is_always_an_input(tmp_path):
    res = cli("fleet", "scan", SAMPLES / "configs" / "gpt2.json", "--table", tmp_path / "t",
              "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert ": 0 ok, 1 bad inputs, 0 failed" in res.stderr
    assert "no traceEvents array" in res.stderr
