"""README.md's commands, pasted: every ``$ rightsize ...`` line of its console blocks (with its
``\\`` continuations) runs, in the README's order, from a folder holding a copy of the
checkout's ``samples/`` (what pasting them from the repository root after ``./dev demo`` does,
without writing into the checkout), and exits 0. Later commands read what earlier ones wrote
(``fleet report`` the table ``fleet scan`` made), so they run in order.

A command marked ``# needs torch``, ``# needs a GPU``, ``# needs ../shared`` or ``# runs until
Ctrl-C`` is skipped with that reason, and the sample files it names must exist all the same;
one that needs ``../shared`` runs where the shared data is (``RIGHTSIZE_SHARED``). The
README's Python block runs too, and a line ending in ``# <literal>`` must give that value.
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLES, SHARED, cli

README = REPO / "README.md"
MARKS = ("needs torch", "needs a GPU", "needs ../shared", "runs until Ctrl-C")


def commands(text: str) -> list[tuple[str, str | None]]:
    """``(command, mark)`` for each ``$ rightsize`` line of the console blocks, in order."""
    out: list[tuple[str, str | None]] = []
    for block in re.findall(r"^```console\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.startswith("$ rightsize "):
                continue
            while line.rstrip().endswith("\\") and i < len(lines):
                line = line.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
            command, _, comment = line[2:].partition(" # ")
            mark = next((m for m in MARKS if comment.strip().startswith(m)), None)
            out.append((" ".join(command.split()), mark))
    return out


COMMANDS = commands(README.read_text())


def test_the_readme_is_a_front_door():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) < 300
    assert max(len(line) for line in lines) < 100
    first_screen = "\n".join(lines[:30])
    assert "./dev demo" in first_screen and "./dev test" in first_screen
    assert len(COMMANDS) >= 17
    named = {" ".join(c.split()[1:3]) for c, _ in COMMANDS}
    for command in ("analyze", "run", "report", "compare", "estimate", "gpus", "plan",
                    "serving predict", "serving simulate", "serving plan", "comm check",
                    "comm systems", "fleet scan", "fleet report", "fleet metrics", "serve"):
        assert any(n == command or n.split()[0] == command for n in named), command
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / link).exists(), link


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the commands are pasted in: a copy of samples/ (reports written beside a
    sample run land in the copy), nothing else."""
    where = tmp_path_factory.mktemp("pasted")
    shutil.copytree(SAMPLES, where / "samples")
    return where


@pytest.mark.parametrize(("command", "mark"), COMMANDS, ids=[c for c, _ in COMMANDS])
def test_every_readme_command_works_when_pasted(command, mark, root):
    args = shlex.split(command)
    assert args[0] == "rightsize"
    if mark == "needs ../shared" and SHARED.is_dir():  # a developer checkout: run it there
        args = [str(SHARED / a.removeprefix("../shared/")) if a.startswith("../shared/") else a
                for a in args]
    elif mark is not None:
        missing = [a for a in args if a.startswith("samples/") and not (SAMPLES.parent / a).exists()]
        assert missing == []
        pytest.skip(f"{mark}: {command}")
    res = cli(*args[1:], cwd=root, timeout=300)
    assert res.returncode == 0, f"{command}\n{res.stderr[-3000:]}"
    assert "Traceback" not in res.stderr


def test_the_python_block_runs_and_shows_what_it_says(root, monkeypatch):
    [block] = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.DOTALL | re.MULTILINE)
    monkeypatch.chdir(root)
    scope: dict[str, object] = {}
    for line in block.splitlines():
        code, _, comment = line.partition("  # ")
        if not code.strip():
            continue
        try:
            expected = ast.literal_eval(comment.strip())
        except (ValueError, SyntaxError):
            exec(code, scope)  # noqa: S102 - the README's own lines
            continue
        assert eval(code, scope) == expected, code
