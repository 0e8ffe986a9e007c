"""Architecture checks: imports go one way, the CLI starts light, package data ships."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PKG = REPO / "rightsize"
# layer (a subpackage, or a top-level module by its name) -> what it must never import
_ABOVE_ANALYZERS = ("rightsize.profiler", "rightsize.reports", "rightsize.cli", "rightsize.pipeline",
                    "rightsize.api")
FORBIDDEN = {
    "vocab": ("rightsize.",),
    "node": ("rightsize.",),  # the node classes every layer declares its results with
    "errors": ("rightsize.",),
    "catalog": ("rightsize.analyzers", "rightsize.traces", *_ABOVE_ANALYZERS),
    "rundir": ("rightsize.analyzers", "rightsize.traces", *_ABOVE_ANALYZERS),
    "traces": ("rightsize.analyzers", *_ABOVE_ANALYZERS),
    "analyzers": _ABOVE_ANALYZERS,
    "reports": ("rightsize.profiler", "rightsize.cli", "rightsize.pipeline", "rightsize.api"),
    "profiler": ("rightsize.analyzers", "rightsize.reports", "rightsize.pipeline",
                 "rightsize.catalog"),
    "pipeline": ("rightsize.profiler", "rightsize.cli", "rightsize.api"),
    "api": ("rightsize.profiler", "rightsize.cli"),  # the Python front end, beside the CLI
}
HEAVY_OUTSIDE_PROFILER = ("torch", "pynvml")


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, with ``from a import b`` recorded as both ``a`` and
    ``a.b`` (``from rightsize import pipeline`` imports ``rightsize.pipeline``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else path.stem


def test_imports_go_one_way():
    wrong = []
    for path in PKG.rglob("*.py"):
        layer = layer_of(path)
        for name in imports_of(path):
            if layer in FORBIDDEN and name.startswith(FORBIDDEN[layer]):
                wrong.append(f"{path.relative_to(REPO)} imports {name}")
            if layer != "profiler" and name.split(".")[0] in HEAVY_OUTSIDE_PROFILER:
                wrong.append(f"{path.relative_to(REPO)} imports {name} outside rightsize.profiler")
    assert wrong == []


def test_help_imports_neither_torch_nor_polars():
    code = ("import sys\nfrom rightsize.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('torch', 'polars', 'numpy', 'pynvml') if m in sys.modules]\n"
            "print('HEAVY', bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=False)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "analyze" in out.stdout


def test_python_dash_m_and_version():
    out = subprocess.run([sys.executable, "-m", "rightsize", "--version"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.startswith("rightsize, version ")


def test_from_imports_are_resolved_to_modules(tmp_path):
    """The wrong-way edge the first version missed: ``from rightsize import pipeline``."""
    probe = tmp_path / "probe.py"
    probe.write_text("from rightsize import pipeline\n")
    assert imports_of(probe) == {"rightsize", "rightsize.pipeline"}


def test_type_hints_resolve_without_import_cycles():
    """Every public function and node of the diagnosis resolves its annotations (an import
    cycle hidden behind TYPE_CHECKING made typing.get_type_hints fail on evidence.py)."""
    import typing

    from rightsize.analyzers.diagnosis import advise, counters, evidence, ncu_only, verdict
    from rightsize.analyzers.document import Document, diagnosis, metrics, sizing

    for module in (evidence, verdict, counters, ncu_only, advise, diagnosis, metrics, sizing):
        for name in dir(module):
            obj = getattr(module, name)
            if getattr(obj, "__module__", None) == module.__name__ and callable(obj):
                typing.get_type_hints(obj)
    typing.get_type_hints(Document)
