"""How quickly polars' allocator hands freed memory back to the system, for rightsize's own
process.

polars (Linux wheels) allocates through jemalloc, which its ``__init__`` configures to keep
freed pages for 0.5 s ("dirty") and then another 1 s as MADV_FREE pages ("muzzy") that still
count in the process's resident size. Reading a trace frees most of what it allocates within
milliseconds (each batch's parse), so during a read the resident size holds seconds of garbage:
on a 175 MB Kineto trace the command peaked at ~390 MiB with polars' decay and ~300 MiB with
pages released after 50 ms and no muzzy stage, at about the same CPU time (benchmarks/README.md,
"Allocator"). jemalloc reads ``_RJEM_MALLOC_CONF`` once, when polars is first imported, and
polars appends the variable's value to its defaults (the last value of an option wins).
:func:`configure` sets it for this process only if the user has not; :func:`job_env` takes it
out again of the environment of a job that ``rightsize run`` starts, so the user's program
keeps its own allocator settings.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "_RJEM_MALLOC_CONF"
SETTING = "dirty_decay_ms:50,muzzy_decay_ms:0"

_configured = False


def configure() -> None:
    """Set the decay for this process, unless the user chose one or polars is loaded already
    (then jemalloc has read its options and the variable would change nothing). polars'
    ``__init__`` then appends our setting to its own defaults (later options win)."""
    global _configured
    if VARIABLE in os.environ or "polars" in sys.modules:
        return
    os.environ[VARIABLE] = SETTING
    _configured = True


def job_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the variable when :func:`configure` set it: the user had none, and
    neither ours nor the one polars' import leaves behind should reach their job."""
    if _configured and VARIABLE in env:
        env = dict(env)
        del env[VARIABLE]
    return env
