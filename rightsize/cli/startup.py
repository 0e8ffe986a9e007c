"""Start-up tuning of the ``rightsize`` command's own process: the garbage collector, numpy's
BLAS threads and how soon polars' allocator returns freed memory.

Role: the only process-wide settings rightsize makes. Only :func:`rightsize.cli.entry` (the
console script and ``python -m rightsize``) imports and calls this module;
:func:`rightsize.cli.main`, which tests and notebooks call, and all library code leave the
process as they found it (a test checks both). Public APIs and documented variables only, no
private exit path; the interpreter's normal exit still runs every ``atexit`` handler. numpy is
imported with OpenBLAS' documented ``OPENBLAS_NUM_THREADS=1`` for the import only; polars'
jemalloc gets a shorter decay through the override polars documents (``rightsize.allocator``:
the user's own value wins, and a job ``rightsize run`` starts gets the user's environment).

Inputs: none. Outputs: the collector's thresholds and its permanent generation, numpy loaded,
polars' allocator variable set unless the user set it (``rightsize.allocator``).
The gain is measured by ``benchmarks/fixed_cost.py`` (``--tuning both``: the same tree with and
without it).
"""

from __future__ import annotations

import gc
import os
import sys

from rightsize import allocator

# Start-up creates ~100k long-lived objects (polars, numpy, click, the dataclasses): at the
# default threshold (700) that is ~130 young collections that free nearly nothing. At 150k a
# short command collects nothing; frames live in Arrow/numpy buffers, not in cyclic Python
# objects, so collecting less often costs no memory worth counting (mypy's command line does
# the same).
GEN0_THRESHOLD_OBJECTS = 150_000


def before_command() -> None:
    """Collect the youngest generation after 150k allocations instead of 700; polars' freed
    pages back after 50 ms (before anything imports polars); numpy with one BLAS thread."""
    allocator.configure()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD_OBJECTS, gen1, gen2)
    import_numpy_lean()


def import_numpy_lean() -> None:
    """Import numpy with one OpenBLAS thread, before anything else in this process imports it.

    numpy's bundled OpenBLAS starts a thread per core at import and gives each its buffers:
    ~45 ms of CPU on 2 cores, close to a tenth of ``rightsize analyze`` on a small trace.
    rightsize calls no BLAS routine (no matmul, no linalg), so those threads would only wait.
    The variable is set for the import only, so a job rightsize starts inherits the user's
    environment unchanged; a value the user set is kept.
    """
    if "numpy" in sys.modules:
        return
    ours = "OPENBLAS_NUM_THREADS" not in os.environ
    if ours:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if ours:
            del os.environ["OPENBLAS_NUM_THREADS"]


def before_exit() -> None:
    """Move every object to the permanent generation, so the interpreter's teardown does not
    traverse them again in its final full collections (~27 ms each after a short command).
    The exit itself stays the normal one: ``atexit`` handlers, flushes, temporary files."""
    gc.freeze()
