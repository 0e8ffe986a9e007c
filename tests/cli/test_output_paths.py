"""Output paths (issue 12): never an input, --force only for named files, no sibling of a
device, the optional report never fails an analysis, replaced files keep their mode."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.cli.hostile import cli, one_line_error
from tests.tracebuilder import two_step_trace


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return two_step_trace().write(tmp_path / "in.json")


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_never_writes_an_input(tmp_path, trace, command):
    before = trace.read_bytes()
    res = cli(command, trace, "--format", "json", "-o", trace, "--force", cwd=tmp_path)
    assert one_line_error(res) == f"rightsize: error: refusing to write {trace}: it is one of the inputs"
    assert trace.read_bytes() == before
    link = tmp_path / "link.json"
    os.link(trace, link)  # the same file under another name
    res = cli(command, trace, "--format", "json", "-o", link, "--force", cwd=tmp_path)
    assert "it is one of the inputs" in one_line_error(res)
    assert trace.read_bytes() == before


def test_force_does_not_replace_an_unrelated_sibling(tmp_path, trace):
    out = tmp_path / "d"
    out.mkdir()
    (out / "a.json").write_text("old")
    mine = out / "a.report.html"
    mine.write_text("my own notes")
    res = cli("analyze", trace, "--format", "json", "-o", out / "a.json", "--force", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "a.json").read_text())["schema_version"] == 1
    assert mine.read_text() == "my own notes"
    assert (f"kept the existing report {mine} (it is not a report rightsize wrote)"
            in res.stderr.decode())


def test_json_to_a_file_named_report_html_stays_json(tmp_path, trace):
    target = tmp_path / "report.html"
    target.write_text("x")
    res = cli("analyze", trace, "--format", "json", "-o", target, "--force", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(target.read_text())["schema_version"] == 1
    assert "<!doctype html>" in (tmp_path / "report.report.html").read_text()


def test_rightsize_report_is_replaced_under_force(tmp_path, trace):
    assert cli("analyze", trace, "-o", tmp_path / "a.txt", cwd=tmp_path).returncode == 0
    page = tmp_path / "a.report.html"
    page.write_text(page.read_text().replace("<title>", "<title>OLD "))
    res = cli("analyze", trace, "-o", tmp_path / "a.txt", "--force", cwd=tmp_path)
    assert res.returncode == 0 and "OLD" not in page.read_text()


def test_dev_null_gets_no_sibling(tmp_path, trace):
    res = cli("analyze", trace, "--format", "json", "-o", "/dev/null", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.decode().splitlines()[-1] == "no HTML report: /dev/null is not a regular file"
    assert not Path("/dev/report.html").exists() and not Path("/dev/null.report.html").exists()


def test_fifo_output_is_written_in_place(tmp_path, trace):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = cli("analyze", trace, "--format", "json", "-o", fifo, cwd=tmp_path)
    reader.join(10)
    assert res.returncode == 0, res.stderr
    assert json.loads(got[0])["schema_version"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json", "out.fifo"]


def test_dev_full_is_one_line(tmp_path, trace):
    res = cli("analyze", trace, "--format", "json", "-o", "/dev/full", cwd=tmp_path)
    assert one_line_error(res) == "rightsize: error: cannot write /dev/full: No space left on device"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_cwd_is_a_warning(tmp_path, trace):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        res = cli("analyze", trace, "--format", "json", cwd=ro)
    finally:
        ro.chmod(0o755)
    assert res.returncode == 0 and json.loads(res.stdout)["schema_version"] == 1
    assert "rightsize: warning: no HTML report: cannot write" in res.stderr.decode()


def test_report_failure_is_a_warning_when_the_sibling_is_a_directory(tmp_path, trace):
    (tmp_path / "in.rightsize.html").mkdir()
    res = cli("analyze", trace, "--format", "json", cwd=tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["schema_version"] == 1
    assert res.stderr.decode().splitlines() == [
        ("rightsize: warning: no HTML report: cannot write in.rightsize.html: "
        "it is a directory")]


def test_force_keeps_mode(tmp_path, trace):
    out = tmp_path / "a.json"
    out.write_text("old")
    out.chmod(0o440)
    res = cli("analyze", trace, "--format", "json", "-o", out, "--force", "--no-report",
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o440
    assert json.loads(out.read_text())["schema_version"] == 1


def test_symlinked_output_stays_a_symlink(tmp_path, trace):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    res = cli("analyze", trace, "--format", "json", "-o", link, "--force", "--no-report",
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and json.loads(real.read_text())["schema_version"] == 1


def test_report_honours_rightsize_catalog(tmp_path, trace):
    prices = tmp_path / "prices.csv"
    prices.write_text("gpu,provider,instance_type,gpus_per_instance,usd_per_gpu_hour,seen_on\n"
                      "L4,myco,box,1,0.01,2026-01-01\n")
    res = cli("report", trace, "--format", "json", "-q", cwd=tmp_path,
              env={"RIGHTSIZE_CATALOG": str(prices)})
    assert res.returncode == 0, res.stderr
    assert b'"price_provider": "myco"' in res.stdout
    plain = cli("report", trace, "--format", "json", "-q", cwd=tmp_path)
    assert b"myco" not in plain.stdout


def test_stdout_on_a_full_device_is_one_line(tmp_path, trace):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "rightsize", "analyze", str(trace),
                              "--format", "json", "-q", "--no-report"], stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    assert res.returncode == 1
    assert res.stderr == "rightsize: error: cannot write the output: No space left on device\n"
