"""Shared fixtures: where ../shared lives, and skipping cleanly when it is absent.

Tests marked ``shared`` (or calling :func:`shared_path`) skip with the missing path as the
reason when ../shared is not beside the checkout (a fresh clone, an unpacked sdist); tests
marked ``gpu`` skip without an NVIDIA GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("RIGHTSIZE_SHARED", REPO.parent / "shared"))
SAMPLES = REPO / "samples"
# The user's HOME, kept for the one test that needs their package sources (an isolated build).
USER_HOME = os.environ.get("HOME", "")
# The settings of the user's that the suite keeps: where the shared data and Chromium are, and
# the test knobs. Every other RIGHTSIZE_* (a cache dir, a parser choice, a Prometheus token)
# and every RAY_* (an address, an auth mode or token) is the user's and is cleared.
KEPT_SETTINGS = ("RIGHTSIZE_SHARED", "RIGHTSIZE_CHROMIUM", "RIGHTSIZE_SHOTS", "RIGHTSIZE_FUZZ_")
_HOME: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs in a HOME of its own: nothing a user's earlier Ray (``~/.ray/auth_token``),
    Chromium, font or template cache left there is read, and nothing the suite's Ray, browser
    or caches write lands in the user's HOME. Loopback requests bypass a user's proxy."""
    global _HOME
    if _HOME is not None:
        return
    _HOME = tempfile.mkdtemp(prefix="rightsize-tests-home-")
    for name in list(os.environ):
        if (name.startswith("RAY_") or name.startswith("RIGHTSIZE_")
                and not name.startswith(KEPT_SETTINGS)):
            del os.environ[name]
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ.pop(name, None)
    os.environ["HOME"] = _HOME
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    loopback = "127.0.0.1,localhost,::1"
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = ",".join(filter(None, (os.environ.get(name), loopback)))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _HOME is not None:
        shutil.rmtree(_HOME, ignore_errors=True)


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the calling test when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared data sits beside a developer checkout)")
    return path


@pytest.fixture
def shared() -> Path:
    return shared_path()


def cli(*args: object, cwd: str | Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real ``rightsize`` CLI in a subprocess of this interpreter (``env`` adds to ours)."""
    return subprocess.run([sys.executable, "-m", "rightsize", *map(str, args)], cwd=cwd,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", **(env or {})),
                          capture_output=True, text=True, timeout=timeout, check=False)


def has_nvidia_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidia0").exists()


# The files whose tests start Ray (a local one, or tests/ray_cluster.py's two nodes).
RAY_TEST_FILES = frozenset({"test_engine.py", "fleet/test_ray.py", "job/test_job_engines.py"})


def xdist_scope(nodeid: str) -> str:
    """The unit of work one ``pytest -n N`` worker takes whole (``./dev test`` runs two): a
    test file, so its module fixtures (a Prometheus, a server, a real run) start once; every
    Ray test one unit (Ray binds ports of its own choosing, and a local Ray's folder under
    /tmp is checked); every serve test one unit (their servers run boosted, and the 100 ms
    /healthz bound is measured while no other boosted server competes for the CPU)."""
    path = nodeid.split("::", 1)[0].removeprefix("tests/")
    if path in RAY_TEST_FILES:
        return "ray"
    if path.startswith("serve/"):
        return "serve"
    return path


# The longest units first, so that no long one starts last while the other worker idles:
# those over 25 s in one process on the shared 2-core VM (2026-12-08, load 7-8), longest first.
LONGEST_SCOPES = (
    "serve", "profiler/test_run_cli.py", "ray", "traces/test_fast_paths.py",
    "profiler/test_ondemand.py", "fuzz/test_fuzz_regexes.py", "fleet_metrics/test_prometheus.py",
    "reports/test_page_layout.py", "profiler/test_run_signals.py",
    "serving/test_serving_mixed.py", "profiler/test_run_multiprocess.py",
    "fuzz/test_fuzz_readers.py", "cli/test_hostile_inputs.py", "cli/test_compare_cli.py",
    "reports/test_report_html.py", "serving/test_serving_plan.py",
    "profiler/test_run_invisible.py", "serving/test_serving_cli.py",
    "job/test_job_generated.py", "test_readme.py", "profiler/test_ondemand_upload.py",
    "reports/test_browser_shots.py", "analyzers/test_projection_accuracy.py",
    "fleet/test_resume.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's scope scheduling with :func:`xdist_scope` as the scope, in the order
    the workers collected them (:data:`LONGEST_SCOPES` first)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    config.option.loadscopereorder = False  # not by the number of tests: by the order above
    return ByScope(config, log)


def longest_first(items: list[pytest.Item]) -> None:
    """Under xdist, the items of :data:`LONGEST_SCOPES` first, each scope's in its order."""
    rank = {scope: i for i, scope in enumerate(LONGEST_SCOPES)}
    items.sort(key=lambda item: rank.get(xdist_scope(item.nodeid), len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every one sorts alike
        longest_first(items)
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU with a working driver")
    skip_shared = pytest.mark.skip(
        reason=f"{SHARED} is absent (the shared data sits beside a developer checkout)")
    gpu, shared_there = has_nvidia_gpu(), SHARED.is_dir()
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        if "shared" in item.keywords and not shared_there:  # first: its reason is the one shown
            item.add_marker(skip_shared, append=False)
