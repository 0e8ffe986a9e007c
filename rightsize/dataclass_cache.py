"""Compiled dataclass methods kept between runs, so a command does not compile them again.

``@dataclass`` writes each method it adds (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
the frozen ``__setattr__`` and ``__delattr__``) as Python source and runs it with ``exec``. For
rightsize's ~120 frozen result classes that is ~700 compilations at every start, ~60 ms of
CPU: more than the analysis of a small trace costs. Inside :func:`compiled_dataclasses` the
``exec`` the ``dataclasses`` module calls looks the source up first, and runs the code object
compiled from exactly that text before: only the compilation is skipped. The classes are the
same, because the code is the same: the source text is the key, compiled as ``exec`` compiles
it (file name ``<string>``, no ``__future__`` flags inherited, this interpreter's optimization
level), for this interpreter's bytecode (its magic number names the directory).

Only the methods of rightsize's own modules are kept (another library's dataclass defined
meanwhile is compiled as usual). One marshal file per module, under
:func:`rightsize.cachedir.cache_root` ``/dataclasses/``: importing a module defines all its
classes, so when a module's file missed a source (the module was edited) it is rewritten with
exactly the sources this import used, and stale entries never pile up. A file that is missing,
unreadable or not a cache is no cache; one that cannot be written is skipped. Marshal data is
trusted here as Python trusts its own ``__pycache__``: the directory is the user's own.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import marshal
import os
import sys
from collections.abc import Iterator
from types import CodeType
from typing import TYPE_CHECKING, Any

from rightsize.cachedir import cache_root

if TYPE_CHECKING:
    from pathlib import Path

OWN_PREFIX = "rightsize."  # modules whose dataclass methods are kept


def version_tag() -> str:
    """The directory name: interpreter, bytecode magic number and optimization level (-O)."""
    magic = importlib.util.MAGIC_NUMBER.hex()
    return f"{sys.implementation.cache_tag}-{magic}-O{sys.flags.optimize}"


class CodeCache:
    """The compiled method sources of one process, per module, read from and written to one
    file per module in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.stored: dict[str, dict[str, CodeType]] = {}  # module -> source -> code, from disk
        self.used: dict[str, dict[str, CodeType]] = {}  # module -> what this process asked for
        self.missed: set[str] = set()  # modules with a source their file did not hold

    def exec(self, source: Any, /, *args: Any, **kwargs: Any) -> None:
        """``exec`` for the ``dataclasses`` module: the same, from compiled code when known."""
        namespace = args[0] if args else kwargs.get("globals")
        module = namespace.get("__name__") if isinstance(namespace, dict) else None
        if isinstance(source, str) and isinstance(module, str) and module.startswith(OWN_PREFIX):
            source = self.code(module, source)
        builtins.exec(source, *args, **kwargs)  # noqa: S102 - what dataclasses runs anyway

    def code(self, module: str, source: str) -> CodeType:
        stored = self.stored.get(module)
        if stored is None:
            stored = self.stored[module] = self._read(module)
        code = stored.get(source)
        if code is None:
            # What exec(source) does: compile as "<string>", inheriting no __future__ flags
            # (the dataclasses module, exec's caller, has none; this module has annotations).
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.missed.add(module)
        self.used.setdefault(module, {})[source] = code
        return code

    def _path(self, module: str) -> Path:
        return self.directory / f"{module}.marshal"

    def _read(self, module: str) -> dict[str, CodeType]:
        try:
            data = marshal.loads(self._path(module).read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, CodeType) for k, v in data.items()):
            return {}
        return data

    def save(self) -> None:
        """Rewrite the file of every module that missed a source (atomically: a reader sees the
        old file or the new one). Failing to write loses nothing but time."""
        import tempfile  # only when something is written: ~4 ms of imports otherwise

        for module in sorted(self.missed):
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{module}.")
                try:
                    with os.fdopen(fd, "wb") as fh:
                        marshal.dump(self.used[module], fh)
                    os.replace(tmp, self._path(module))
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
            except OSError:
                continue
        self.missed.clear()


@contextlib.contextmanager
def compiled_dataclasses() -> Iterator[CodeCache | None]:
    """Within the block, rightsize's dataclasses are built from cached compiled methods (see the
    module docstring); yields the cache, or None when caching is off or already in place."""
    import dataclasses

    root = cache_root()
    if root is None or "exec" in vars(dataclasses):  # turned off, or an outer block has it
        yield None
        return
    cache = CodeCache(root / "dataclasses" / version_tag())
    dataclasses.exec = cache.exec  # type: ignore[attr-defined]  # found before the builtin
    try:
        yield cache
    finally:
        if vars(dataclasses).get("exec") == cache.exec:
            delattr(dataclasses, "exec")
        cache.save()
