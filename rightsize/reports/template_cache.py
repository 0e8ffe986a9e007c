"""Compiled report templates kept between runs, so a page is not recompiled by every command.

Compiling ``report.html.j2`` (and what it includes) costs ~50 ms of CPU, a seventh of what
``rightsize analyze`` spends on a small trace; loading the compiled code back costs ~1 ms.
This is Jinja2's own ``FileSystemBytecodeCache``: an entry is keyed by the template's name and
file and holds the SHA-1 of the source it was compiled from, so an edited template is
recompiled, never served stale. The directory is per Jinja2 and Python version, and the file
names carry a digest of the environment settings that change the generated code (autoescape,
whitespace control), so two setups never share an entry.

Where: :func:`rightsize.cachedir.cache_root` (``$RIGHTSIZE_CACHE_DIR``, else the XDG cache
directory), under ``templates/``. A directory that cannot be created or written just means no
cache: the page is still rendered from the freshly compiled template.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from typing import Any

import jinja2
from jinja2.bccache import Bucket

from rightsize.cachedir import cache_root


class TolerantFileCache(jinja2.FileSystemBytecodeCache):
    """Jinja2's file cache, except that failing to store an entry is not an error."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            # Read-only or full disk: this run already has the compiled template; the next run
            # compiles it again. Nothing is lost but time.
            return


def bytecode_cache(settings: Mapping[str, Any]) -> jinja2.BytecodeCache | None:
    """A bytecode cache for an environment built with ``settings`` (None when there is no
    usable directory)."""
    root = cache_root()
    if root is None:
        return None
    version = f"jinja2-{jinja2.__version__}-py{sys.version_info[0]}{sys.version_info[1]}"
    directory = root / "templates" / version
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # see the module docstring: no cache, same page
    digest = hashlib.sha1(repr(sorted(settings.items())).encode(), usedforsecurity=False)
    return TolerantFileCache(str(directory), f"%s-{digest.hexdigest()[:12]}.cache")
