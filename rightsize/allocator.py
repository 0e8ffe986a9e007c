"""How quickly polars' allocator hands freed memory back to the system, for rightsize's own process.

polars (Linux wheels) allocates through jemalloc, which its ``__init__`` configures to keep freed
pages for 0.5 s ("dirty") and then another 1 s as MADV_FREE pages ("muzzy") that still count in the
process's resident size. Reading a trace frees most of what it allocates within milliseconds (each
batch's parse), so during a read the resident size holds seconds of garbage: on a 175 MB Kineto
trace the command peaked at ~390 MiB with polars' decay and ~300 MiB with pages released after 50
ms and no muzzy stage, at about the same CPU time (benchmarks/README.md, "Allocator"). Each thread
also allocates from an arena of its own (jemalloc makes four per CPU), and a page freed in one
arena serves only that arena: the pieces the parser threads build are freed on the main thread,
whose frames and analysis then take fresh pages. On a machine of a few CPUs one arena for all
threads lets them reuse each other's pages: on 2 CPUs, 4 runs each, a 175 MB trace peaked at
235-245 MiB against 254-264 (2 arenas: 245-257), a 1 GB trace alike (810-857 MiB), a 5 GB one in 26
s against 29 s at the same peak. With more CPUs threads would queue on the one arena's locks, so
there jemalloc keeps its arenas. jemalloc reads ``_RJEM_MALLOC_CONF`` once, when polars is first
imported, and polars appends the variable's value to its defaults (the last value of an option
wins). :func:`configure` sets it for this process only if the user has not; :func:`job_env` takes
it out again of the environment of a job that ``rightsize run`` starts, so the user's program keeps
its own allocator settings.
"""

from __future__ import annotations

import os
import sys

from rightsize.traces.limits import usable_cpus

VARIABLE = "_RJEM_MALLOC_CONF"
SETTING = "dirty_decay_ms:50,muzzy_decay_ms:0"
ONE_ARENA = ",narenas:1"  # where at most ONE_ARENA_CPUS CPUs are usable
ONE_ARENA_CPUS = 4

_configured = False


def configure() -> None:
    """Set the decay for this process, unless the user chose one or polars is loaded already
    (then jemalloc has read its options and the variable would change nothing). polars'
    ``__init__`` then appends our setting to its own defaults (later options win)."""
    global _configured
    if VARIABLE in os.environ or "polars" in sys.modules:
        return
    os.environ[VARIABLE] = setting(usable_cpus())
    _configured = True


def setting(cpus: int) -> str:
    """The jemalloc options for a process that may use ``cpus`` CPUs."""
    return SETTING + (ONE_ARENA if cpus <= ONE_ARENA_CPUS else "")


def job_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the variable when :func:`configure` set it: the user had none, and
    neither ours nor the one polars' import leaves behind should reach their job."""
    if _configured and VARIABLE in env:
        env = dict(env)
        del env[VARIABLE]
    return env
