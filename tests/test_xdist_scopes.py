"""The two-worker schedule's promise (tests/conftest.py): every test file that starts Ray is
in RAY_TEST_FILES, so that no two Ray clusters run at once under ``./dev test``'s ``-n 2``."""

import re
from pathlib import Path

from tests.conftest import RAY_TEST_FILES, REPO, xdist_scope

STARTS_RAY = re.compile(r'ray_cluster|^\s*import ray\b|"--engine", "ray"|ray\.init\(',
                        re.MULTILINE)


def test_every_file_that_starts_ray_shares_the_ray_scope():
    tests = REPO / "tests"
    starting = {str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
                if p != Path(__file__) and STARTS_RAY.search(p.read_text())}
    assert starting == set(RAY_TEST_FILES)
    assert {xdist_scope(f"tests/{f}::t") for f in starting} == {"ray"}


def test_serve_tests_share_one_scope_and_other_files_are_their_own():
    assert xdist_scope("tests/serve/test_serve_jobs.py::test_x") == "serve"
    assert xdist_scope("tests/cli/test_plan_cli.py::test_y[a]") == "cli/test_plan_cli.py"
