"""Where rightsize may keep caches between runs (compiled report templates):
``$RIGHTSIZE_CACHE_DIR`` when set (an empty value turns every cache off), else
``$XDG_CACHE_HOME/rightsize`` or ``~/.cache/rightsize``. A cache only saves time: the callers
treat a directory that cannot be created or written as no cache. Standard library only, so any
layer may ask.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

CACHE_ENV = "RIGHTSIZE_CACHE_DIR"


def cache_root() -> Path | None:
    """The directory rightsize may keep caches in, or None when turned off or unknown."""
    from pathlib import Path  # not at import: `rightsize --help` needs none of this

    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if base.startswith("~"):  # no home directory to expand to
        return None
    return Path(base) / "rightsize"
