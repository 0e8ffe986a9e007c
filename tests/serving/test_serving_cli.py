"""The real ``rightsize serving predict`` in a subprocess: the JSON contract, points in order,
one-line errors for bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.serving.test_serving_ops import LLAMA

KEYS = ["gpu", "tp", "pp", "batch", "isl", "osl", "ttft_ms", "ttft_ms_low", "ttft_ms_high",
        "tpot_ms", "tpot_ms_low", "tpot_ms_high", "memory_per_gpu_bytes", "fits", "engine",
        "calibrated_by", "assumes"]


def rightsize(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("RIGHTSIZE_CATALOG", None)
    return subprocess.run([sys.executable, "-m", "rightsize", *args], check=False, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_points_in_order_with_the_json_keys(tmp_path: Path) -> None:
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    (tmp_path / "points.csv").write_text(
        "gpu,tp,batch,isl,osl\nH100 SXM,2,4,512,64\nl4,1,64,8000,100\nH100 SXM,1,4,512,64\n")
    out = rightsize("serving", "predict", "--hf-config", "llama.json", "--points", "points.csv",
                    "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["predictions"]
    assert [list(r) for r in rows] == [KEYS] * 3
    assert [(r["gpu"], r["tp"], r["batch"]) for r in rows] == [
        ("H100 SXM", 2, 4), ("L4", 1, 64), ("H100 SXM", 1, 4)]
    assert [r["fits"] for r in rows] == [True, False, True]
    assert rows[1]["assumes"][0].startswith("does not fit: the KV cache of 64 sequences of"
                                            " 8,100 tokens needs")
    for r in rows:
        assert r["ttft_ms_low"] < r["ttft_ms"] < r["ttft_ms_high"]
        assert r["tpot_ms_low"] < r["tpot_ms"] < r["tpot_ms_high"]
    assert rows[0]["ttft_ms"] < rows[2]["ttft_ms"]  # TP 2 prefills faster than TP 1
    # weights (16.06 GB) split 2 ways plus the KV of 4 x 576 tokens
    assert rows[0]["memory_per_gpu_bytes"] < rows[2]["memory_per_gpu_bytes"]


def test_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    (tmp_path / "bad.csv").write_text("gpu,tp,isl\nL4,1,3\n")
    cases = [
        (("--gpu", "H900", "--batch", "1", "--isl", "8", "--osl", "8"),
         "no GPU called 'H900' in the catalog (known: T4, L4,"),
        (("--gpu", "H100 SXM", "--tp", "3", "--batch", "1", "--isl", "8", "--osl", "8"),
         "H100 SXM TP 3 PP 1: tensor parallel 3 does not split 32 query heads and 8 KV heads"),
        (("--points", "bad.csv"),
         "bad.csv: the points CSV has no column batch, osl (it needs gpu, tp, batch, isl, osl)"),
        (("--gpu", "L4", "--isl", "8"), "missing --batch, --osl (or give --points CSV)"),
        (("--gpu", "L4", "--batch", "0", "--isl", "8", "--osl", "8"),
         "--batch: '0' must be between 1 and 2^40"),
    ]
    for args, message in cases:
        out = rightsize("serving", "predict", "--hf-config", "llama.json", *args, cwd=tmp_path)
        assert out.returncode == 1, (args, out.stderr)
        assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_text_output(tmp_path: Path) -> None:
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    out = rightsize("serving", "predict", "--hf-config", "llama.json", "--gpu", "H100 SXM",
                    "--batch", "8", "--isl", "1024", "--osl", "128", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("GPU       TP  PP  batch  isl   osl  TTFT (range)")
    assert "calibrated by: nothing (uncalibrated: pass --measured to calibrate)" in out.stdout


def test_measured_csv_calibrates(tmp_path: Path) -> None:
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    (tmp_path / "m.csv").write_text("gpu,tp,batch,isl,osl,ttft_ms,tpot_ms\n"
                                    "H100 SXM,1,8,1024,128,250,9.0\n")
    args = ("serving", "predict", "--hf-config", "llama.json", "--gpu", "H100 SXM", "--batch",
            "8", "--isl", "1024", "--osl", "128", "--format", "json")
    plain = json.loads(rightsize(*args, cwd=tmp_path).stdout)["predictions"][0]
    out = rightsize(*args, "--measured", "m.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    tuned = json.loads(out.stdout)["predictions"][0]
    assert tuned["calibrated_by"] == "m.csv: 2 measured steps on H100 SXM"
    # the measured point itself is reproduced within its noise (3%), the raw model was not
    assert abs(tuned["ttft_ms"] / 250 - 1) < 0.03 < abs(plain["ttft_ms"] / 250 - 1)
    assert abs(tuned["tpot_ms"] / 9.0 - 1) < 0.03 < abs(plain["tpot_ms"] / 9.0 - 1)
    assert any(a.startswith("calibrated on H100 SXM: ") for a in tuned["assumes"])
    (tmp_path / "bad.csv").write_text("gpu,tp,batch,isl,osl\nH100 SXM,1,8,1024,128\n")
    bad = rightsize(*args, "--measured", "bad.csv", cwd=tmp_path)
    assert bad.returncode == 1
    assert "bad.csv: the measured CSV has no column ttft_ms, tpot_ms" in bad.stderr
    nogpu = rightsize(*args, "--measured", "http://127.0.0.1:9", cwd=tmp_path)
    assert nogpu.stderr == ("rightsize: error: a Prometheus --measured needs --measured-gpu and"
                            " --measured-tp: vLLM's metrics do not say which GPU served"
                            " them\n")


def test_html_page_through_the_renderer(tmp_path: Path) -> None:
    # the model's name comes from the config file's name: a hostile one is shown as text
    name = "<img src=x onerror=alert(1)>"
    (tmp_path / f"{name}.json").write_text(json.dumps(LLAMA))
    (tmp_path / "points.csv").write_text("gpu,tp,batch,isl,osl\nH100 SXM,1,4,512,64\n"
                                         "L4,1,1,256,32\n")
    args = ("serving", "predict", "--hf-config", f"{name}.json", "--points", "points.csv",
            "--format", "html", "-o", "p.html")
    out = rightsize(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == "wrote p.html\n" and out.stdout == ""
    page = (tmp_path / "p.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count("<tr>") == 3  # the header and the two points, in order
    assert page.index("H100 SXM") < page.index("<td>L4</td>")
    assert "calibrated by: nothing (uncalibrated: pass --measured to calibrate)" in page
    again = rightsize(*args, cwd=tmp_path)
    assert again.returncode == 1 and "already exists; pass --force" in again.stderr


def test_engine_vllm_v0_adds_its_cpu_work_at_the_predicted_batch(tmp_path: Path) -> None:
    """predict's TTFT is one prefill of the batch's 8 prompts and its TPOT one decode step of
    8 sequences: under vllm-v0 each is longer by 8 x 0.0975 = 0.78 ms (JSON times rounded to
    0.001 ms, so the difference of two is within 0.001 of it)."""
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    args = ("serving", "predict", "--hf-config", "llama.json", "--gpu", "H100 SXM", "--batch",
            "8", "--isl", "512", "--osl", "64", "--format", "json")
    v1 = json.loads(rightsize(*args, cwd=tmp_path).stdout)["predictions"][0]
    out = rightsize(*args, "--engine", "vllm-v0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    v0 = json.loads(out.stdout)["predictions"][0]
    assert (v1["engine"], v0["engine"]) == ("vllm", "vllm-v0")
    assert abs(v0["ttft_ms"] - v1["ttft_ms"] - 0.78) <= 0.0011
    assert abs(v0["tpot_ms"] - v1["tpot_ms"] - 0.78) <= 0.0011
    assert v0["assumes"][-1] == ("vllm-v0: 0.0975 ms of engine CPU work per scheduled"
                                 " sequence a step (vLLM issue #6801's figure)")
    assert not any("engine CPU work" in a for a in v1["assumes"])
    text = rightsize(*args[:-2], "--engine", "vllm-v0", cwd=tmp_path)
    assert text.returncode == 0 and "vllm-v0: 0.0975 ms of engine CPU work" in text.stdout
    bad = rightsize(*args, "--engine", "sglang", cwd=tmp_path)
    assert bad.returncode == 2 and "'sglang' is not one of 'vllm', 'vllm-v0'" in bad.stderr


def test_engine_vllm_v0_under_a_measured_step_shorter_than_its_cpu_work(tmp_path: Path) -> None:
    """--engine names the measured steps' engine too: a 15 ms decode step of 200 sequences
    cannot hold V0's 200 x 0.0975 = 19.5 ms of CPU work, so it is one line, not a fit."""
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA))
    (tmp_path / "m.csv").write_text("gpu,tp,batch,isl,osl,ttft_ms,tpot_ms\n"
                                    "H100 SXM,1,200,512,64,900,15\n")
    out = rightsize("serving", "predict", "--hf-config", "llama.json", "--gpu", "H100 SXM",
                    "--batch", "8", "--isl", "512", "--osl", "64", "--measured", "m.csv",
                    "--engine", "vllm-v0", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == (
        "rightsize: error: a measured decode step of 15 ms at 200 sequences is not longer than"
        " vllm-v0's CPU work alone (19.5 ms): was it measured on another engine?")
