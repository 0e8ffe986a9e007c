"""The console entry point: :func:`rightsize.cli.main` and then the interpreter's normal exit
(output flushed, exit handlers run, the status passed through, running threads waited for)."""

from __future__ import annotations

import os
import subprocess
import sys

from rightsize import __version__


def run(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


PRELUDE = "import atexit, sys, threading, time\nimport rightsize.cli as c\n"


def test_output_flushed_and_exit_handlers_run():
    res = run(PRELUDE + "atexit.register(lambda: print('handler ran'))\n"
              "print('buffered', end=' ')\n"
              "sys.argv = ['rightsize', '--version']\nc.entry()\n")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"buffered rightsize, version {__version__}\nhandler ran\n"


def test_status_passes_through():
    res = run(PRELUDE + "c.main = lambda: sys.exit(3)\nc.entry()\n")
    assert (res.returncode, res.stdout, res.stderr) == (3, "", "")
    res = run(PRELUDE + "c.main = lambda: None\nprint('x', end='')\nc.entry()\n")
    assert (res.returncode, res.stdout) == (0, "x")


def test_text_status_printed_as_sys_exit_does():
    res = run(PRELUDE + "c.main = lambda: sys.exit('rightsize: something')\nc.entry()\n")
    assert (res.returncode, res.stderr) == (1, "rightsize: something\n")


def test_waits_for_a_running_thread():
    res = run(PRELUDE + "def late():\n    time.sleep(0.3)\n    print('thread done')\n"
              "threading.Thread(target=late).start()\n"
              "c.main = lambda: None\nc.entry()\n")
    assert (res.returncode, res.stdout) == (0, "thread done\n")


def test_module_and_error_boundary(tmp_path):
    res = subprocess.run([sys.executable, "-m", "rightsize", "analyze", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 1
    assert res.stderr == f"rightsize: error: {tmp_path / 'nope'}: no such file or directory\n"


NUMPY_LEAN = """
import os, sys
from rightsize.cli.startup import import_numpy_lean
import_numpy_lean()
print('numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'))
"""


def test_numpy_imported_with_the_environment_unchanged():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    res = subprocess.run([sys.executable, "-c", NUMPY_LEAN], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert res.stdout == "True None\n"  # imported; the variable was set for the import only
    res = subprocess.run([sys.executable, "-c", NUMPY_LEAN],
                         env=dict(env, OPENBLAS_NUM_THREADS="3"), capture_output=True,
                         text=True, timeout=120, check=True)
    assert res.stdout == "True 3\n"  # the user's own setting is kept
