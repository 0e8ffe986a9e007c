"""Terminal injection (issue 12): names from a trace never carry control characters to a
terminal or a pipe; colour codes come only from rightsize."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from rightsize.reports.fmt import safe_line, safe_text
from tests.cli.hostile import cli
from tests.tracebuilder import TraceBuilder, two_step_trace

EVIL = ("\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
        "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"  # OSC 8 hyperlink
        "\x1b[2J\x1b]0;title\x07"  # clear screen, window title
        "\x9b31m\x9d0;x\x9c"  # 8-bit CSI and OSC
        "real_kernel\rspoofed\x7f\u202eevil")
OWN_SGR = re.compile(r"\x1b\[[012]m")  # rightsize's bold, dim and reset


def _evil_trace(path):
    b = two_step_trace()
    doc = b.document()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = EVIL
    b2 = TraceBuilder()
    b2.events = doc["traceEvents"]
    b2.devices = [dict(doc["deviceProperties"][0], name="GPU" + EVIL)]
    return b2.write(path)


def _assert_clean(out: str) -> None:
    rest = OWN_SGR.sub("", out)
    bad = sorted({hex(ord(c)) for c in rest if (ord(c) < 0x20 and c not in "\n\t")
                  or 0x7f <= ord(c) <= 0x9f or c == "\u202e"})
    assert bad == [], bad


def test_safe_text_escapes_every_control():
    assert safe_text("a\x1b[2Jb\tc\nd\re\x9bf\x7f") == "a\\x1b[2Jb\tc\nd\\x0de\\x9bf\\x7f"
    assert safe_line("a\nb\tc") == "a\\x0ab\\x09c"
    assert safe_text("lone \udc80 surrogate") == "lone \\udc80 surrogate"
    assert safe_text("µs, 名前, emoji 🙂") == "µs, 名前, emoji 🙂"


def test_pipe_gets_no_controls(tmp_path):
    trace = _evil_trace(tmp_path / "evil\x1b[31m.json")
    res = cli("analyze", trace, "--format", "text", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out, err = res.stdout.decode(), res.stderr.decode()
    assert "real_kernel\\x0dspoofed" in out
    _assert_clean(out)
    _assert_clean(err)
    assert "\x1b" not in out  # not a terminal: no colour at all


def test_tty_gets_only_rightsize_colours(tmp_path):
    trace = _evil_trace(tmp_path / "evil.json")
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "rightsize", "analyze", str(trace),
                             "--format", "text", "--no-report"],
                            stdout=child, stderr=child, stdin=subprocess.DEVNULL,
                            cwd=tmp_path, env=dict(os.environ, TERM="xterm"))
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(60) == 0
    os.close(main)
    out = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    out = out.replace("\r\x1b[K", "")  # rightsize's own progress-line clearing
    assert "\x1b[1m" in out  # colours are rightsize's
    _assert_clean(out)


def test_error_messages_are_safe(tmp_path):
    bad = tmp_path / "x\x1b]52;c;QQ==\x07\nsecond line.json"
    bad.write_text("not a trace")
    res = cli("analyze", bad, cwd=tmp_path)
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1
    _assert_clean(err)
