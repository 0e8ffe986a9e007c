"""rightsize: what holds a PyTorch job back, and which GPU should it run on.

Subpackages, in the one direction data flows:

* ``rightsize.profiler`` - wraps a job with PyTorch Profiler and NVML/host sampling (the only
  code that imports torch or NVML) and writes a run directory;
* ``rightsize.traces`` - readers that turn vendor files into one normalized schema;
* ``rightsize.analyzers`` - pure functions over that schema;
* ``rightsize.reports`` - renderers (json, text, html) over one report model.

Importing this package is cheap: it imports neither torch nor polars.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "profile", "step"]


def __getattr__(name: str) -> object:
    """``rightsize.step`` and ``rightsize.profile``, imported on first use (see
    :mod:`rightsize.profiler.api`), so ``import rightsize`` stays cheap."""
    if name in ("step", "profile"):
        from rightsize.profiler import api

        return getattr(api, name)
    raise AttributeError(f"module 'rightsize' has no attribute {name!r}")
