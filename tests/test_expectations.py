"""The expectations suite: for each shared trace and sample run listed in
tests/expectations/expectations.json, the verdict, the recommended GPU (or none) and the rules
that must and must not fire, as a performance engineer reading the trace expects them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.pipeline import analyze_document
from tests.conftest import REPO, SHARED

EXPECTATIONS = json.loads((REPO / "tests" / "expectations" / "expectations.json").read_text())
ENTRIES = sorted(EXPECTATIONS["inputs"].items())


def _path(name: str) -> Path:
    return (SHARED / name.removeprefix("../shared/")) if name.startswith("../shared/") \
        else REPO / name


@pytest.mark.parametrize(("name", "want"), ENTRIES, ids=[Path(n).name[:48] for n, _ in ENTRIES])
def test_expectation(name, want):
    path = _path(name)
    if not path.exists():
        pytest.skip(f"{path} is absent")
    doc = analyze_document([path])
    fired = {r.id for r in doc.recommendations}
    got = {
        "bound": None if doc.diagnosis is None else str(doc.diagnosis.bound),
        "recommended": None if doc.sizing is None else doc.sizing.recommended,
        "missing": sorted(set(want["must_fire"]) - fired),
        "unwanted": sorted(set(want["must_not_fire"]) & fired),
    }
    expected = {"bound": want["bound"], "recommended": want["recommended"], "missing": [],
                "unwanted": []}
    assert got == expected, want["why"]


def test_every_expectation_says_why():
    for name, want in ENTRIES:
        assert len(want["why"]) > 40, name
        assert set(want) == {"bound", "recommended", "must_fire", "must_not_fire", "why"}, name
