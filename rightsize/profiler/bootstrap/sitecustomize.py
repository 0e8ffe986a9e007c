"""Startup hook that ``rightsize run`` puts first on the job's PYTHONPATH.

Python imports ``sitecustomize`` at startup in every interpreter of the job (the script, torchrun
ranks, spawned workers). When ``RIGHTSIZE_RUN`` (or ``RIGHTSIZE_ON_DEMAND``) is set this arms
:mod:`_rightsize_inject`, which does nothing until the process imports torch. It then takes this
directory off ``sys.path`` (the job's own ``sys.path`` stays as plain Python makes it) and runs
the ``sitecustomize`` that would have run without rightsize, if there is one, so a site's own
startup code keeps working.

Stdlib only: this runs inside the user's interpreter, which may not have rightsize installed.
"""

import os
import sys


def _arm() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("RIGHTSIZE_RUN") or os.environ.get("RIGHTSIZE_ON_DEMAND"):
        try:
            import _rightsize_inject

            _rightsize_inject.arm()
        except Exception as exc:  # noqa: BLE001 - never break the user's interpreter at startup
            sys.stderr.write(f"rightsize: profiler hook not armed: {exc!r}\n")
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    _chain(here)


def _chain(here: str) -> None:
    """Run the next ``sitecustomize`` on the path, as Python would have without us."""
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None or not spec.origin:
        return
    if os.path.dirname(os.path.abspath(spec.origin)) == here:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - what site.py itself does with a failing sitecustomize
        sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}\n")


_arm()
