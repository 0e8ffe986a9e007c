"""Time every regex of the package on the inputs :mod:`tests.fuzz.regexes` builds for it, in a
child process (``python -m tests.fuzz.regex_timing``): a regex that never ends must not hang the
test. One JSON line per slow case or per pattern's worst time, then a summary line."""

from __future__ import annotations

import re
from typing import Any

from tests.fuzz.regexes import Use, attacks, collect, encode

SCREEN_CHARS = 64 * 1024  # every input, at this size first
FULL_CHARS = 1024 * 1024  # then the slowest ones of each pattern at this size
# Bounds on CPU time (the process's own, so a machine busy with other work does not move them):
SCREEN_BOUND_S = 2.0  # a quadratic pattern takes many seconds on 64 kB; a linear one, ms
FULL_BOUND_S = 10.0  # ... and hours on 1 MB; a linear one, well under a second
RECHECK = 2  # inputs per pattern run again at FULL_CHARS


class _Slow(Exception):
    pass


def _run(use: Use, compiled: Any, data: Any, bound_s: float) -> float:
    """CPU seconds one use of the pattern takes on ``data`` (each method the code calls);
    raises :class:`_Slow` past ``bound_s`` of CPU (SIGPROF: the regex engine checks for
    signals)."""
    import signal
    import time

    start = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, bound_s)
    try:
        for method in sorted(use.methods):
            if method == "polars":
                import polars as pl

                pl.Series([data]).str.contains(use.pattern)
            elif method in ("sub", "subn"):
                getattr(compiled, method)(data[:0], data)
            elif method == "finditer":
                for _ in compiled.finditer(data):
                    pass
            else:
                getattr(compiled, method)(data)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    return time.process_time() - start


def main() -> None:
    """One JSON line per slow case or per pattern's worst time; then a summary line."""
    import json
    import signal

    def alarm(*_: Any) -> None:
        raise _Slow

    signal.signal(signal.SIGPROF, alarm)
    uses, _ = collect()
    cases = 0
    for use in uses:
        compiled = None if use.methods == {"polars"} else re.compile(use.pattern, use.flags)
        try:
            inputs = attacks(use, SCREEN_CHARS)
        except (re.error, ValueError, OverflowError):  # a polars (Rust) pattern Python's
            inputs = [c * SCREEN_CHARS for c in " a0-_\"\\{<\n"]  # parser does not read
        timed: list[tuple[float, str]] = []
        for text in inputs:
            cases += 1
            try:
                timed.append((_run(use, compiled, encode(use, text), SCREEN_BOUND_S), text))
            except _Slow:
                _print_slow(use, text, SCREEN_BOUND_S)
                break
        else:
            worst = 0.0
            for _, text in sorted(timed, reverse=True)[:RECHECK]:
                big = (text * (FULL_CHARS // len(text) + 1))[:FULL_CHARS] \
                    if text.count(text[:1]) == len(text) else _grow(use, text)
                cases += 1
                try:
                    worst = max(worst, _run(use, compiled, encode(use, big), FULL_BOUND_S))
                except _Slow:
                    _print_slow(use, big, FULL_BOUND_S)
                    break
            else:
                print(json.dumps({"where": use.where, "worst_s": round(worst, 4)}), flush=True)
    print(json.dumps({"patterns": len(uses), "cases": cases}), flush=True)


def _print_slow(use: Use, text: str, bound_s: float) -> None:
    """The JSON line of a pattern that took over ``bound_s`` on ``text``."""
    import json

    print(json.dumps({"where": use.where, "pattern": repr(use.pattern), "chars": len(text),
                      "input": repr(text[:60]), "slow": f"over {bound_s} s"}), flush=True)


def _grow(use: Use, text: str) -> str:
    """The same attack at :data:`FULL_CHARS`: it is rebuilt at that size (same seed)."""
    for candidate in attacks(use, FULL_CHARS):
        if candidate[:256] == text[:256] and candidate[-64:] == text[-64:]:
            return candidate
    return (text * (FULL_CHARS // len(text) + 1))[:FULL_CHARS]


if __name__ == "__main__":
    main()
