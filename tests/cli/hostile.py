"""Helpers for the hostile-input tests: the real CLI in a subprocess under a memory cap."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

MEMORY_CAP_BYTES = 3 << 30  # address space: the CLI with polars/numpy maps about 1.5 GiB


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def cli(*args: object, cwd: str | Path | None = None, timeout: float = 60,
        stdin: bytes | None = None, env: dict[str, str] | None = None,
        capped: bool = True) -> subprocess.CompletedProcess[bytes]:
    """``rightsize ARGS`` in a subprocess (bytes out), under a memory cap and a timeout."""
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", **(env or {}))
    full_env.pop("RIGHTSIZE_DEBUG", None)
    if cwd is None:  # a scratch directory for what the CLI writes, removed afterwards
        with tempfile.TemporaryDirectory(prefix="rightsize-hostile-") as scratch:
            return cli(*args, cwd=scratch, timeout=timeout, stdin=stdin, env=env, capped=capped)
    return subprocess.run(
        [sys.executable, "-m", "rightsize", *map(str, args)],
        capture_output=True, cwd=cwd, env=full_env, timeout=timeout, check=False, input=stdin,
        preexec_fn=_cap_memory if capped else None,
    )


def one_line_error(res: subprocess.CompletedProcess[bytes]) -> str:
    """The stderr of a run that must fail cleanly: exit 1 and exactly one line."""
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 1, (res.returncode, err[-2000:])
    assert err.count("\n") == 1 and err.startswith("rightsize: error: "), err[-2000:]
    return err.strip()
