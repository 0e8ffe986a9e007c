"""Only readers know formats: no format name is written outside ``rightsize/traces/``.

The pipeline, the document, fleet and serve go by what readers declare (what they contribute,
their memory per byte, their file names, what a file's head says of its job); a string literal
equal to a registered reader's name anywhere else is format knowledge leaking out of the
readers, and fails here with its file and line.
"""

from __future__ import annotations

import ast

from rightsize.traces import registry
from tests.conftest import REPO

# "ncu" is also a word of the analysis vocabulary: the evidence that Nsight Compute rows gave
# (Signal.NCU, DeviceKind.NCU), defined in vocab.py and labelled in the reports. Those places
# name the evidence, not the file format.
VOCABULARY = {("rightsize/vocab.py", "ncu"), ("rightsize/reports/labels.py", "ncu")}


def leaks(source: str, rel: str, names: set[str]) -> list[str]:
    """``file:line: 'name'`` of each format name written in ``source`` (the file ``rel``)."""
    if rel.startswith("rightsize/traces/"):
        return []
    return [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and n.value in names
            and (rel, n.value) not in VOCABULARY]


def test_no_format_name_outside_the_readers():
    names = {r.name for r in registry.READERS}
    assert names == {"kineto", "nsys", "ncu", "metrics-log", "nccl-tests"}  # searched for
    found = [leak for path in sorted((REPO / "rightsize").rglob("*.py"))
             for leak in leaks(path.read_text(encoding="utf-8"),
                               path.relative_to(REPO).as_posix(), names)]
    assert found == []


def test_the_check_finds_a_format_name():
    code = 'def f(trace):\n    return trace.meta.format != "kineto" or "ncu"\n'
    names = {"kineto", "ncu"}
    assert sorted(leaks(code, "rightsize/analyzers/x.py", names)) == [
        "rightsize/analyzers/x.py:2: 'kineto'", "rightsize/analyzers/x.py:2: 'ncu'"]
    assert leaks(code, "rightsize/vocab.py", names) == ["rightsize/vocab.py:2: 'kineto'"]
    assert leaks(code, "rightsize/traces/x.py", names) == []
