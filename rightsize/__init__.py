"""rightsize: what holds a PyTorch job back, and which GPU should it run on.

Subpackages, in the one direction data flows:

* ``rightsize.profiler`` - wraps a job with PyTorch Profiler and NVML/host sampling (the only
  code that imports torch or NVML) and writes a run directory;
* ``rightsize.traces`` - readers that turn vendor files into one normalized schema;
* ``rightsize.analyzers`` - pure functions over that schema;
* ``rightsize.reports`` - renderers (json, text, html) over one report model.

The Python API (:mod:`rightsize.api`): ``rightsize.analyze(*paths)`` and
``rightsize.open_run(run_dir)`` return an :class:`~rightsize.api.Analysis`;
``rightsize.Analysis.from_json(path)`` reads a saved document back. Importing this package is
cheap: it imports neither torch nor polars (names are imported on first use).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["Analysis", "RightsizeError", "__version__", "analyze", "open_run", "profile", "step"]

# name -> the module that defines it, imported on first use so ``import rightsize`` stays cheap
_LAZY = {
    "step": "rightsize.profiler.api",
    "profile": "rightsize.profiler.api",
    "analyze": "rightsize.api",
    "open_run": "rightsize.api",
    "Analysis": "rightsize.api",
    "RightsizeError": "rightsize.errors",
}


def __getattr__(name: str) -> object:
    """The public names of :data:`_LAZY`, imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rightsize' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
