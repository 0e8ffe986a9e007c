"""The startup hook (rightsize/profiler/bootstrap) runs inside the user's job and cannot import
rightsize, so it keeps copies of the schedule defaults and the trace-name rule: these tests hold
every copy equal to the one in rightsize.rundir."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

import rightsize.profiler
from rightsize import rundir
from rightsize.cli.run import run as run_command
from rightsize.profiler.session import RunOptions

BOOTSTRAP = Path(rightsize.profiler.__file__).parent / "bootstrap" / "_rightsize_state.py"


@pytest.fixture(scope="module")
def state():
    sys.path.insert(0, str(BOOTSTRAP.parent))  # the state module imports _rightsize_common
    try:
        spec = importlib.util.spec_from_file_location("_rightsize_state_pinned", BOOTSTRAP)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BOOTSTRAP.parent))
    return module


def test_schedule_defaults_are_one(state):
    options = {f.name: f.default for f in dataclasses.fields(RunOptions)}
    cli = {p.name: p.default for p in run_command.params}
    for key, value in rundir.SCHEDULE_DEFAULTS.items():
        assert state.DEFAULTS[key] == options[key] == cli[key] == value, key


def test_every_hook_setting_defaults_like_run_options(state):
    options = {f.name: f.default for f in dataclasses.fields(RunOptions)}
    for key, value in state.DEFAULTS.items():
        if key != "run_dir":
            assert options[key] == value, key
    # the keys the hook reads are the ones run passes (RunOptions.hook_config)
    assert set(RunOptions().hook_config(Path("x"))) == set(state.DEFAULTS)


@pytest.mark.parametrize("rank, pid, window", [(0, 1234, 1), (3, 77, 2), (12, 5, 10)])
def test_trace_names_are_one(state, rank, pid, window):
    name = state._trace_name(rank, pid, window)
    assert name == rundir.trace_name(rank, pid, window)
    assert rundir.parse_trace_name(name) == (rank, pid, window)


@pytest.mark.parametrize(("cuda", "preset", "expected"), [
    ("13.0", None, "1"),  # the H100 runs: CUPTI finalized when the window ends
    ("12.6", None, "1"),
    ("12.4", None, None),  # before 12.6 teardown could crash jobs with CUDA graphs
    (None, None, None),  # a CPU build: no CUPTI
    ("13.0", "0", "0"),  # the user's choice stands
])
def test_cupti_teardown_is_asked_for_from_cuda_12_6(monkeypatch, cuda, preset, expected):
    monkeypatch.syspath_prepend(str(BOOTSTRAP.parent))
    spec = importlib.util.spec_from_file_location("_rightsize_inject_pinned",
                                                  BOOTSTRAP.parent / "_rightsize_inject.py")
    inject = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inject)
    if preset is None:
        monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    else:
        monkeypatch.setenv("TEARDOWN_CUPTI", preset)
    fake_torch = types.SimpleNamespace(version=types.SimpleNamespace(cuda=cuda))
    inject._teardown_cupti(fake_torch)
    assert os.environ.get("TEARDOWN_CUPTI") == expected
