"""The helpers every command shares: colors only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import io

import pytest

from rightsize.cli.common import use_color


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream, no_color, expected", [
    (Tty(), None, True), (Tty(), "1", False), (io.StringIO(), None, False),
])
def test_use_color(monkeypatch, stream, no_color, expected):
    monkeypatch.delenv("NO_COLOR", raising=False)
    if no_color:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert use_color(stream) is expected
