"""The expectations suite: for each shared trace and sample run listed in
tests/expectations/expectations.json, the verdict, the recommended GPU (or none) and the rules
that must and must not fire, as a performance engineer reading the trace expects them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.pipeline import Options, analyze_document
from tests.conftest import REPO, SHARED
from tests.expectations.built import PREFIX, build

EXPECTATIONS = json.loads((REPO / "tests" / "expectations" / "expectations.json").read_text())
ENTRIES = sorted(EXPECTATIONS["inputs"].items())
STEPS = " --steps "  # "PATH --steps A-B": the analysis of steps A-B only
KEYS = {"bound", "recommended", "must_fire", "must_not_fire", "why"}
# optional: phrases the document must say (evidence, sizing reason, rules' details and
# what-ifs) and must never say
OPTIONAL = {"says", "never_says"}


def _path(name: str, tmp_path: Path) -> Path:
    name = name.split(STEPS)[0]
    if name.startswith(PREFIX):
        return build(name, tmp_path)
    return (SHARED / name.removeprefix("../shared/")) if name.startswith("../shared/") \
        else REPO / name


def _words(doc) -> str:
    d, s = doc.diagnosis, doc.sizing
    parts = [*(d.evidence if d is not None else ()), s.reason if s is not None else ""]
    for r in doc.recommendations:
        parts += [r.title, r.detail, r.what_if.assumes if r.what_if else ""]
    return "\n".join(p or "" for p in parts)


@pytest.mark.parametrize(("name", "want"), ENTRIES,
                         ids=[Path(n.split(STEPS)[0]).name[:40] + (
                             "-steps" if STEPS in n else "") for n, _ in ENTRIES])
def test_expectation(name, want, tmp_path):
    path = _path(name, tmp_path)
    if not path.exists():
        pytest.skip(f"{path} is absent")
    steps = tuple(int(x) for x in name.split(STEPS)[1].split("-")) if STEPS in name else None
    doc = analyze_document([path], Options(steps=steps) if steps else Options())
    fired = {r.id for r in doc.recommendations}
    words = _words(doc)
    got = {
        "bound": None if doc.diagnosis is None or doc.diagnosis.bound is None
        else str(doc.diagnosis.bound),
        "recommended": None if doc.sizing is None else doc.sizing.recommended,
        "missing": sorted(set(want["must_fire"]) - fired),
        "unwanted": sorted(set(want["must_not_fire"]) & fired),
        "unsaid": [w for w in want.get("says", ()) if w not in words],
        "wrongly said": [w for w in want.get("never_says", ()) if w in words],
    }
    expected = {"bound": want["bound"], "recommended": want["recommended"], "missing": [],
                "unwanted": [], "unsaid": [], "wrongly said": []}
    assert got == expected, want["why"]


def test_every_expectation_says_why():
    for name, want in ENTRIES:
        assert len(want["why"]) > 40, name
        assert KEYS <= set(want) <= KEYS | OPTIONAL, name
