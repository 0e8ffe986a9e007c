"""Fixtures and helpers for the reader tests."""

from __future__ import annotations

import pytest

from rightsize.traces import kineto_scan, kscan
from rightsize.traces.schema import Trace

KINETO_FRAMES = ("kernels", "transfers", "runtime", "cpu_ops", "gpu_annotations", "steps",
                 "memory", "flows", "syncs", "windows", "devices", "comms")


def assert_same_trace(a: Trace, b: Trace) -> None:
    """Every frame of two reads of one Kineto trace equal, schema and values, and the events
    counted alike."""
    for name in KINETO_FRAMES:
        fa, fb = getattr(a, name), getattr(b, name)
        assert fa.schema == fb.schema, name
        assert fa.equals(fb), name
    assert a.meta.event_count == b.meta.event_count


@pytest.fixture(params=["compiled", "polars"])
def both_parsers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a Kineto test with the compiled batch parser and again with polars alone (what an
    install without a C compiler gets)."""
    if request.param == "polars":
        monkeypatch.setenv(kscan.PARSER_ENV, "polars")
    elif not kineto_scan.available():
        pytest.skip("_kscan was not compiled")
    return str(request.param)
