"""The fuzz suite's oracle: run the real CLI in-process and judge the outcome (issue 12).

Every input must end in exit 0 with strict JSON on stdout, or exit 1 with exactly one line on
stderr; never exit 2 (an internal error) or an exception; the input files are unchanged; peak
memory stays under a cap. In-process (``rightsize.cli.main``) so a case costs milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import resource
from collections.abc import Iterable
from pathlib import Path

from hypothesis import HealthCheck, settings

from rightsize.cli import main

MAX_RSS_BYTES = 3 << 30  # the whole fuzz run, polars and numpy included

# Bounded in time: the whole suite stays under a minute on a CI runner.
FUZZ = settings(max_examples=int(os.environ.get("RIGHTSIZE_FUZZ_EXAMPLES", "40")),
                deadline=None, database=None,
                derandomize=not os.environ.get("RIGHTSIZE_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def _digest(paths: Iterable[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def run_cli(args: list[str], inputs: Iterable[Path]) -> tuple[int, str, str]:
    """``rightsize ARGS`` in this process: (exit code, stdout, stderr), after the checks."""
    inputs = list(inputs)
    before = _digest(inputs)
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
    stdout, stderr = out.getvalue(), err.getvalue()
    assert code in (0, 1), f"exit {code}: {stderr[-800:]}"
    if code == 1:
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rightsize: error: "), stderr[-800:]
    assert _digest(inputs) == before, "an input changed"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert rss < MAX_RSS_BYTES, f"peak RSS {rss >> 20} MiB"
    return int(code or 0), stdout, stderr


def strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def analyze_json(path: Path, *extra: str) -> object | None:
    """``analyze PATH --format json``: the document, or None after a clean one-line error."""
    code, stdout, _ = run_cli(["analyze", str(path), *extra, "--format", "json", "-q",
                               "--no-report"], [path])
    return strict_json(stdout) if code == 0 else None
