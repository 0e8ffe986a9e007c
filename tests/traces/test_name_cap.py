"""One cap on every string taken from an input (issue 40, 2): at the readers, so the CLI's
text, the JSON document and the fleet table hold at most 512 characters of any name, then an
ellipsis and the byte count cut."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl

from rightsize.traces import limits
from rightsize.traces.fleet_series import SeriesInfo
from tests.tracebuilder import long_names_trace

CAPPED = re.compile(r"…\(\+\d+ bytes\)$")
MAX_CAPPED = 512 + len("…(+99999999 bytes)")


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def test_cap_text_keeps_512_characters_then_says_how_many_bytes_were_cut() -> None:
    assert limits.cap_text("x" * 512) == "x" * 512
    assert limits.cap_text("x" * 513) == "x" * 512 + "…(+1 bytes)"
    assert limits.cap_text("é" * 600) == "é" * 512 + "…(+176 bytes)"  # 88 two-byte letters
    assert limits.cap_text("cudnn" * 800_000) == ("cudnn" * 103)[:512] + "…(+3999488 bytes)"


def test_cap_strings_caps_names_and_keeps_data_text() -> None:
    frame = pl.DataFrame({"name": ["x" * 600, "short", None], "input_dims": ["[" * 900, None,
                                                                            None],
                          "device": [1, 2, 3]})
    out = limits.cap_strings(frame)
    assert out["name"].to_list() == [limits.cap_text("x" * 600), "short", None]
    assert out["input_dims"].to_list() == frame["input_dims"].to_list()  # parsed, not shown
    short = frame.head(0)
    assert limits.cap_strings(short) is short
    assert limits.cap_strings(frame.slice(1, 2)) is not None


def test_the_environment_moves_the_cap(monkeypatch: Any) -> None:
    monkeypatch.setenv("RIGHTSIZE_MAX_NAME_CHARS", "8")
    assert limits.cap_text("abcdefghij") == "abcdefgh…(+2 bytes)"


def test_metrics_labels_are_capped_where_every_metrics_reader_makes_its_series() -> None:
    info = SeriesInfo("gpu_util_pct", "DCGM_FI_DEV_GPU_UTIL", {"pod": "p" * 2000, "k" * 600: "v"})
    assert info.labels == {"pod": limits.cap_text("p" * 2000), limits.cap_text("k" * 600): "v"}


def test_every_name_of_a_trace_is_capped_in_the_document_and_the_text(tmp_path: Path) -> None:
    """Kernel, op, annotation, runtime call, memcpy, device, thread, process and backend of
    100,000 characters each: no string of the JSON document and no line of the text report is
    longer than the cap (with its ellipsis)."""
    trace = long_names_trace().write(tmp_path / "long.json")
    done = subprocess.run([sys.executable, "-m", "rightsize", "analyze", str(trace),
                           "--format", "json", "--quiet"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    texts = strings(doc)
    # a name, or a note that quotes one ("matched 'NAME' to H100 SXM")
    assert max(len(s) for s in texts) <= MAX_CAPPED + 40
    device = "NVIDIA H100 " + "d" * 500 + "…(+99500 bytes)"
    assert doc["devices"][0]["name"] == device
    capped = {s for s in texts if CAPPED.search(s)}
    for start in ("void kkk", "aten::ooo"):  # the kernel, the op
        assert any(s.startswith(start) for s in capped), start
    text = subprocess.run([sys.executable, "-m", "rightsize", "analyze", str(trace),
                           "--format", "text", "--quiet"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert text.returncode == 0, text.stderr
    assert max(len(line) for line in text.stdout.splitlines()) <= MAX_CAPPED + 200
    assert len(text.stdout) < 200_000
