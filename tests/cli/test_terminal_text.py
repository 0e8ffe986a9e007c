"""What the terminal shows: the sizing advice and its why, wrapped to 80 columns when piped,
``--no-color`` on every command, money that never reads $0.0000, CPU-only advice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rightsize.analyzers.diagnosis.advise import Measures, recommend
from rightsize.reports import fmt
from rightsize.reports.text import wrap
from tests.conftest import shared_path


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "rightsize", *args], capture_output=True,
                          text=True, check=False, env=base | (env or {}), timeout=300)


def test_text_has_the_advice_and_fits_80_columns_when_piped():
    trace = shared_path("traces", "kineto",
                        "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz")
    res = _cli("analyze", str(trace), "--format", "text", "--no-report", "--no-color")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = res.stdout.replace("\n    ", " ")
    assert "Verdict: dataloader-bound" in text
    assert "Recommended GPU: none; 33% of each step waits for the data loader, which a" \
           " bigger GPU will not shrink: raise DataLoader num_workers" in text
    # the catalog has no price for the V100 32GB SXM2: cheaper cannot be told, the option is
    # named (RTX 6000 Ada, whose whole range stays within 10% of the 177.59 ms step; 130.6 ms
    # by the per-kernel-class projection after 67cf7d9 (borrowed GEMM shapes,
    # rates refitted); 130.8 before that, 129.8 before the per-class projection)
    assert "the catalog has no price for the V100 32GB SXM2, so no GPU is recommended; the" \
           " cheapest per step that meets the constraints within 10% of its step time" \
           " (--slower-ok) is RTX 6000 Ada at 130.6 ms" in text
    assert "\033[" not in res.stdout


@pytest.mark.parametrize("command", ["analyze", "report", "run", "gpus", "estimate"])
def test_no_color_is_accepted_everywhere(command):
    res = _cli(command, "--no-color", "--help")
    assert res.returncode == 0 and "--no-color" in res.stdout


def test_wrap_indents_items_and_keeps_paths_whole():
    long = "  - " + "word " * 30 + "/a/very/long/path/" * 6
    out = wrap([long, "Label: " + "x " * 50], width=40).splitlines()
    assert all(len(line) <= 40 for line in out if "/" not in line)
    assert out[1].startswith("    word") and "/a/very/long/path/" * 6 in out[-4] + out[-3]


def test_money_never_reads_zero_dollars():
    assert fmt.usd(1306.6) == "$1,307" and fmt.usd(150) == "$150"
    assert fmt.usd(12.345) == "$12.35" and fmt.usd(0.1) == "$0.10"
    assert fmt.usd(0.0423) == "$0.042"
    assert fmt.usd(0.00423) == "$0.0042"
    assert fmt.usd(0.0004) == "$0.0004" and fmt.usd(0.05) == "$0.05"
    assert fmt.usd(0.0) == "$0.00"
    assert fmt.usd_per_steps(0.27) == "$0.27 per 1k steps"
    assert fmt.usd_per_steps(0.0088) == "$0.0088 per 1k steps"  # one unit: never per 1M
    assert fmt.usd_per_steps(None) == "n/a"


def test_gpu_advice_only_where_a_gpu_was_traced():
    cpu = [r.id for r in recommend(Measures(dataloader_pct=30.0, gpu_util_pct=None))]
    gpu = [r.id for r in recommend(Measures(dataloader_pct=30.0, gpu_util_pct=60.0))]
    assert "dataloader-stall-cpu" in cpu and "dataloader-stall" not in cpu
    assert "dataloader-stall" in gpu and "dataloader-stall-cpu" not in gpu
    titles = [r.title for r in recommend(Measures(dataloader_pct=30.0))]
    assert not any("GPU" in t for t in titles)


@pytest.mark.parametrize("args", [("gpus",), ("estimate", "--params", "7e9", "--mode", "train")])
def test_tables_fit_80_columns_when_piped(args):
    res = _cli(*args)
    assert res.returncode == 0, res.stderr
    assert max(len(line) for line in res.stdout.splitlines()) <= 80
