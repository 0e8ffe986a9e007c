"""The compiled Kineto module (``_kscan``), where the install built it, and its off switch.

``_kscan`` (``rightsize/traces/_kscan.c``, compiled by ``hatch_build.py`` when a C compiler is at
hand) cuts the event array into batches (:mod:`rightsize.traces.jsonscan`) and parses them
(:mod:`rightsize.traces.kineto_scan`). Without it, or with ``RIGHTSIZE_KINETO_PARSER=polars``,
numpy cuts and polars parses: the same frames, more CPU.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

PARSER_ENV = "RIGHTSIZE_KINETO_PARSER"  # "polars": never use the compiled module


def _load() -> Any:
    try:
        return importlib.import_module("rightsize.traces._kscan")
    except ImportError:  # built without a C compiler
        return None


BUILT: Any = _load()


def module() -> Any:
    """``_kscan``, or None when it was not built or is turned off."""
    if BUILT is None or os.environ.get(PARSER_ENV, "").strip().lower() == "polars":
        return None
    return BUILT
