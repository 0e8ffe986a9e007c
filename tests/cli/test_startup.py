"""Process-wide state: the library and :func:`rightsize.cli.main` leave it as they found it;
only the console entry point imports :mod:`rightsize.cli.startup`, which uses public ``gc``
APIs only; the hacks it replaced stay gone."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from rightsize import allocator
from rightsize.profiler.launch import child_env
from tests.conftest import REPO, shared_path

TRACE = ("traces", "kineto", "tracelens-h100-gaunernst_bert-small-uncased__1016001.json.gz")

# polars is imported first: its own __init__ writes a variable of its allocator's into
# os.environ, which is polars' doing, not rightsize's.
UNCHANGED = """
import gc, json, os, sys
import polars
env, threshold = dict(os.environ), gc.get_threshold()
from rightsize.cli import main
for argv in (["--version"], sys.argv[1:]):
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
print(json.dumps({"env": dict(os.environ) == env, "threshold": gc.get_threshold() == threshold,
                  "frozen": gc.get_freeze_count(), "startup": "rightsize.cli.startup" in sys.modules}))
"""


def test_main_changes_nothing_process_wide(tmp_path: Path) -> None:
    trace = shared_path(*TRACE)
    res = subprocess.run([sys.executable, "-c", UNCHANGED, "analyze", str(trace), "--quiet",
                          "--format", "json", "-o", str(tmp_path / "out.json")],
                         capture_output=True, text=True, timeout=300, check=True)
    state = json.loads(res.stdout.splitlines()[-1])
    assert state == {"env": True, "threshold": True, "frozen": 0, "startup": False}
    assert (tmp_path / "out.json").stat().st_size > 0  # the command did run


def _imported(node: ast.AST, package: str) -> list[str]:
    """The modules (and module.name) an import statement in ``package`` names, made absolute."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
    module = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
    return [module, *(f"{module}.{a.name}" for a in node.names)]


def _startup_importers(path: Path) -> set[str]:
    """Where ``path`` imports rightsize.cli.startup: the enclosing function, or <module>."""
    parts = path.relative_to(REPO).with_suffix("").parts
    package = ".".join(parts if parts[-1] == "__init__" else parts[:-1]).removesuffix(".__init__")
    found: set[str] = set()

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            named = _imported(child, package)
            text = child.value if isinstance(child, ast.Constant) else None
            if "rightsize.cli.startup" in named or text == "rightsize.cli.startup":
                found.add(scope)
            visit(child, scope)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_only_the_console_entry_point_imports_startup() -> None:
    importers = {str(p.relative_to(REPO)): found for p in sorted((REPO / "rightsize").rglob("*.py"))
                 if (found := _startup_importers(p))}
    assert importers == {"rightsize/cli/__init__.py": {"entry"}}
    main_py = (REPO / "rightsize" / "__main__.py").read_text(encoding="utf-8")
    assert "entry()" in main_py and "main()" not in main_py


ENTRY = """
import atexit, gc, sys
import rightsize.cli as c
atexit.register(lambda: print(gc.get_threshold()[0], gc.get_freeze_count() > 0))
sys.argv = ["rightsize", "--version"]
c.entry()
"""


def test_the_console_entry_point_tunes_the_collector_and_exits_normally() -> None:
    res = subprocess.run([sys.executable, "-c", ENTRY], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "150000 True"  # the atexit handler still runs


def test_no_process_hacks_in_the_package() -> None:
    """polars' documented allocator override is named in rightsize/allocator.py alone (set by
    the console entry point only, below); the private exit, the dataclass cache and glibc's
    mallopt stay gone."""
    hacks = ("_run_exitfuncs", "_RJEM_MALLOC_CONF", "dataclasses.exec", "os._exit(status)", "mallopt")
    found = {(str(p.relative_to(REPO)), h)
             for p in (REPO / "rightsize").rglob("*.py") for h in hacks
             if h in p.read_text(encoding="utf-8")}
    assert found == {("rightsize/allocator.py", "_RJEM_MALLOC_CONF")}
    assert not (REPO / "rightsize" / "dataclass_cache.py").exists()


ALLOCATOR = """
import atexit, os, sys
import rightsize.cli as c
atexit.register(lambda: print(repr(os.environ.get("_RJEM_MALLOC_CONF")),
                              "polars" in sys.modules))
sys.argv = ["rightsize"] + sys.argv[1:]
c.entry()
"""


def _entry_allocator(env: dict[str, str], *argv: str) -> str:
    res = subprocess.run([sys.executable, "-c", ALLOCATOR, *argv], capture_output=True,
                         text=True, timeout=300, check=False, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()[-1]


def test_the_entry_point_sets_polars_allocator_decay_unless_the_user_did(tmp_path: Path) -> None:
    """Before polars is imported: polars then appends it to its defaults (the last value of an
    option wins); a value the user exported is kept as it was."""
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    ours = allocator.setting(os.cpu_count())
    assert _entry_allocator(env, "--version") == f"{ours!r} False"
    trace = shared_path(*TRACE)
    analyzed = _entry_allocator(env, "analyze", str(trace), "--quiet", "--format", "json",
                                "-o", str(tmp_path / "out.json"))
    assert analyzed == f"'dirty_decay_ms:500,muzzy_decay_ms:1000,{ours}' True"
    assert _entry_allocator({**env, "_RJEM_MALLOC_CONF": "narenas:2"}, "--version") \
        == "'narenas:2' False"


def test_a_job_gets_the_allocator_variable_as_the_user_had_it(monkeypatch) -> None:
    base = {"A": "1", "_RJEM_MALLOC_CONF": "dirty_decay_ms:500,muzzy_decay_ms:1000,x"}
    assert allocator.job_env(dict(base)) == base  # configure() never ran: passed through
    monkeypatch.setattr(allocator, "_user_value", None)
    assert allocator.job_env(dict(base)) == {"A": "1"}
    monkeypatch.setattr(allocator, "_user_value", "narenas:2")
    assert allocator.job_env(dict(base)) == {"A": "1", "_RJEM_MALLOC_CONF": "narenas:2"}
    assert child_env({})["_RJEM_MALLOC_CONF"] == "narenas:2"


def test_setting_uses_one_arena_on_small_machines_only() -> None:
    assert allocator.setting(2) == "dirty_decay_ms:50,muzzy_decay_ms:0,narenas:1"
    assert allocator.setting(64) == allocator.setting(None) == "dirty_decay_ms:50,muzzy_decay_ms:0"
