"""Build hook: compiles the optional Kineto batch parser (``rightsize/traces/_kscan.c``).

The C file uses only the Python C API and the C standard library. It is compiled with the
compiler and flags the running Python was built with (``sysconfig``: ``LDSHARED``, ``CCSHARED``).
When that fails -- no compiler, Windows, ``RIGHTSIZE_NO_EXTENSION=1`` -- the wheel is built
without it, a warning says so, and rightsize parses every batch with polars
(``rightsize.traces.kineto_scan``): the same frames, a slower read.

An editable install puts the module beside its source (ignored by git); a wheel gets it
through ``force_include`` and a platform tag.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "rightsize/traces/_kscan.c"
MODULE = "rightsize/traces/_kscan"
FLAGS = ["-O2", "-std=c99", "-D_GNU_SOURCE", "-Wall", "-Wno-missing-field-initializers"]


class KscanBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        link = sysconfig.get_config_var("LDSHARED")
        if os.environ.get("RIGHTSIZE_NO_EXTENSION") or not suffix or not link:
            self._skip("RIGHTSIZE_NO_EXTENSION is set" if os.environ.get(
                "RIGHTSIZE_NO_EXTENSION") else "this Python has no C build configuration")
            return
        root = Path(self.root)
        if version == "editable":
            out = root / f"{MODULE}{suffix}"
        else:
            self._tmp = tempfile.mkdtemp(prefix="rightsize-build-")
            out = Path(self._tmp) / f"_kscan{suffix}"
        cmd = [*shlex.split(link), *shlex.split(sysconfig.get_config_var("CCSHARED") or ""),
               *FLAGS, f"-I{sysconfig.get_paths()['include']}", str(root / SOURCE), "-o", str(out)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._skip(f"{cmd[0]}: {exc}")
            return
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            self._skip(lines[-1] if lines else f"{cmd[0]} exited with {done.returncode}")
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            build_data["force_include"][str(out)] = f"{MODULE}{suffix}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _skip(self, why: object) -> None:
        print(f"rightsize: building without the compiled Kineto parser ({why}); "
              "traces are parsed by polars instead (same results, slower)", file=sys.stderr)
