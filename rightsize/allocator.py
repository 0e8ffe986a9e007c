"""How soon polars' allocator gives freed memory back, for the ``rightsize`` command's own
process; and the user's own setting again for a job that ``rightsize run`` starts.

polars (Linux wheels) allocates through jemalloc and configures it in its ``__init__`` from
``_RJEM_MALLOC_CONF``: its defaults (freed pages kept 0.5 s "dirty", then 1 s "muzzy", both
still counted in the resident size) with the variable's value appended, so a value there wins
(polars' documented override, pola-rs/polars#21829). jemalloc reads it once, when polars is
first imported. Reading a trace frees most of what it allocates within milliseconds (each
batch's parse), so with polars' defaults the peak holds a second of garbage: on the 175 MB
Kineto trace of benchmarks/README.md the command peaked at 1.51-1.67x the file without this
setting and 1.33-1.35x with it, at the same CPU time (docs/benchmarks.md).

:func:`configure` is called by ``rightsize.cli.startup`` only (the console entry point; the
library and ``rightsize.cli.main`` never change the process) and sets the variable only when
the user has not and polars is not imported yet. :func:`job_env` gives a job the variable as
the user had it (absent, or their value), not what polars or rightsize left in ``os.environ``.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "_RJEM_MALLOC_CONF"
# Freed pages back after 50 ms, no muzzy stage (releasing at once, dirty_decay_ms:0, measured
# +60% CPU); one arena for all threads on small machines, so pages the parser threads free are
# reused by the main thread (on more CPUs the threads would queue on its lock).
DECAY = "dirty_decay_ms:50,muzzy_decay_ms:0"
ONE_ARENA_MAX_CPUS = 4

_UNSET = object()
_user_value: object = _UNSET  # what the user had, once configure() ran: a str, or None


def setting(cpus: int | None) -> str:
    """The value :func:`configure` sets on a machine of ``cpus`` CPUs."""
    return DECAY + (",narenas:1" if cpus is not None and cpus <= ONE_ARENA_MAX_CPUS else "")


def configure() -> bool:
    """Set the variable for this process unless the user set one or polars is loaded already
    (jemalloc has read its options then); True when it was set."""
    global _user_value
    if "polars" in sys.modules:
        return False
    _user_value = os.environ.get(VARIABLE)
    if _user_value is not None:
        return False
    os.environ[VARIABLE] = setting(os.cpu_count())
    return True


def job_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the variable as the user had it when :func:`configure` ran (unchanged when
    it did not run)."""
    if _user_value is _UNSET or env.get(VARIABLE) == _user_value:
        return env
    env = dict(env)
    if _user_value is None:
        env.pop(VARIABLE, None)
    else:
        env[VARIABLE] = str(_user_value)
    return env
