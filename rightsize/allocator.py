"""Nothing left to undo in a job's environment: rightsize no longer sets allocator options.

rightsize used to set polars' private jemalloc variable for its own process, and
:func:`job_env` took it out again for a job that ``rightsize run`` starts. The setting is gone
(it is a private variable of another package, and on a 175 MB trace it changed neither the peak
RSS nor the time: benchmarks/README.md, "Fixed cost"), so :func:`job_env` passes the environment
through. It stays only because :mod:`rightsize.profiler.launch` still calls it; remove both
together.
"""

from __future__ import annotations


def job_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` unchanged: rightsize adds nothing of its own that a job should not see."""
    return env
