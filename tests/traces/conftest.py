"""Fixtures for the reader tests."""

from __future__ import annotations

import pytest

from rightsize.traces import kineto_scan


@pytest.fixture(params=["compiled", "polars"])
def both_parsers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a Kineto test with the compiled batch parser and again with polars alone (what an
    install without a C compiler gets)."""
    if request.param == "polars":
        monkeypatch.setenv(kineto_scan.PARSER_ENV, "polars")
    elif not kineto_scan.available():
        pytest.skip("_kscan was not compiled")
    return str(request.param)
