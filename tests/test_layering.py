"""Architecture checks: imports go one way, the CLI starts light, package data ships."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PKG = REPO / "rightsize"
# layer -> layers it must never import
FORBIDDEN = {
    "traces": ("rightsize.profiler", "rightsize.analyzers", "rightsize.reports", "rightsize.cli",
               "rightsize.pipeline"),
    "analyzers": ("rightsize.profiler", "rightsize.reports", "rightsize.cli", "rightsize.pipeline"),
    "reports": ("rightsize.profiler", "rightsize.cli", "rightsize.pipeline"),
    "profiler": ("rightsize.analyzers", "rightsize.reports"),
}
HEAVY_OUTSIDE_PROFILER = ("torch", "pynvml")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_imports_go_one_way():
    wrong = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).parts
        layer = rel[0] if len(rel) > 1 else None
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
