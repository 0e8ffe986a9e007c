"""rightsize's allocator setting: set for its own process only, never over the user's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rightsize import allocator
from rightsize.profiler.launch import child_env
from rightsize.traces.limits import usable_cpus

PROBE = ("import os\n{pre}from rightsize import allocator\nallocator.configure()\n{post}"
         "print(os.environ.get(allocator.VARIABLE))\n")


def _probe(pre: str = "", post: str = "", user: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != allocator.VARIABLE}
    if user is not None:
        env[allocator.VARIABLE] = user
    code = PROBE.format(pre=pre, post=post)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def test_set_before_polars_loads_and_polars_applies_it_last() -> None:
    ours = allocator.setting(usable_cpus())
    assert _probe() == ours
    # polars prepends its defaults; jemalloc takes the last value of each option: ours
    assert _probe(post="import polars\n") == "dirty_decay_ms:500,muzzy_decay_ms:1000," + ours


def test_one_arena_on_a_machine_of_few_cpus() -> None:
    assert allocator.setting(1) == "dirty_decay_ms:50,muzzy_decay_ms:0,narenas:1"
    assert allocator.setting(4) == "dirty_decay_ms:50,muzzy_decay_ms:0,narenas:1"
    assert allocator.setting(5) == "dirty_decay_ms:50,muzzy_decay_ms:0"
    assert allocator.setting(64) == "dirty_decay_ms:50,muzzy_decay_ms:0"


def test_not_set_once_polars_is_loaded() -> None:
    # jemalloc has read its options by then: the variable stays what polars made it
    assert _probe(pre="import polars\n") == "dirty_decay_ms:500,muzzy_decay_ms:1000"


def test_the_users_setting_wins() -> None:
    assert _probe(user="dirty_decay_ms:0") == "dirty_decay_ms:0"


def test_a_job_gets_the_environment_the_user_had(monkeypatch: pytest.MonkeyPatch) -> None:
    leaked = {"A": "1", allocator.VARIABLE: "dirty_decay_ms:500,muzzy_decay_ms:1000,"
              + allocator.SETTING}
    monkeypatch.setattr(allocator, "_configured", True)  # we set it: the user had none
    assert allocator.VARIABLE not in child_env({}, base=leaked)
    assert child_env({}, base=leaked)["A"] == "1"
    monkeypatch.setattr(allocator, "_configured", False)  # the user's own value: kept
    assert child_env({}, base={allocator.VARIABLE: "narenas:1"})[allocator.VARIABLE] == \
        "narenas:1"
