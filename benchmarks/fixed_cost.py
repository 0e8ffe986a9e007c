#!/usr/bin/env python3
"""Fixed cost of ``rightsize analyze`` on a small trace: what a user waits for before any real
reading (issue 17 target: <= 0.4 s on a 1 MB Kineto trace).

Runs the CLI ``--repeat`` times in fresh child processes (the default command: text to stdout
plus the HTML report file; ``--json`` adds ``--format json -o FILE``) and prints the median wall
time and the median CPU time (user + sys of the child, from ``os.wait4``), then the top entries
of one ``python -X importtime`` run of the same command. With ``--before PATH`` (a tree exported
with ``git archive`` and put first on ``PYTHONPATH``) the two trees run alternately, so both see
the same machine load, and the ratio is printed.

Bytecode: the children get ``PYTHONPYCACHEPREFIX`` (a temporary directory) and no
``PYTHONDONTWRITEBYTECODE``, and one warm-up run per tree fills it, as a pip install would have
(otherwise every run recompiles rightsize's modules from source, ~0.1 s); it also fills
rightsize's cache (``RIGHTSIZE_CACHE_DIR``, a temporary directory per tree) of compiled report
templates (``rightsize/reports/template_cache.py``), as the user's second run would find it.

Start-up tuning (``rightsize/cli/startup.py``, which only the console entry point calls): with
``--tuning both`` (the default) the "after" tree runs twice, as ``python -m rightsize`` (the
console entry point, tuned) and as ``python -c 'from rightsize.cli import main; main()'`` (the
same command without it, "after, untuned"); ``--tuning on`` or ``off`` runs one of them.
``--after PATH`` takes the "after" tree from PATH (an exported tree) instead of the installed
rightsize, so that edits elsewhere in a shared working tree do not reach the measurement.

Two floors: ``floor`` is ``python -c 'import polars, numpy, click, jinja2'`` as it is;
``floor, lean`` imports the same with one OpenBLAS thread and rightsize's start-up tuning (see
``rightsize.cli.startup`` and ``import_numpy_lean``): what no change to rightsize can remove.

    python benchmarks/fixed_cost.py /work/shared
    python benchmarks/fixed_cost.py /work/shared --repeat 15 --before /tmp/base
    python benchmarks/fixed_cost.py /work/shared --before /tmp/t/b68d0d4 --before /tmp/t/c682717
    python benchmarks/fixed_cost.py /work/shared --repeat 15 --before /tmp/base --after /tmp/new
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = "import polars, numpy, click, jinja2"
# the floor with what rightsize.cli.startup does (threshold first, freeze at the end)
LEAN_FLOOR = f"import gc; gc.set_threshold(150_000, 10, 10); {FLOOR}; gc.freeze()"
# the console entry point without its start-up tuning
UNTUNED = "import sys; from rightsize.cli import main; sys.argv[0] = 'rightsize'; main()"
TRACE = "traces/kineto/tracelens-h100-gaunernst_bert-small-uncased__1016001.json.gz"


def unpacked_mb(trace: Path) -> float:
    opener = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rb") as fh:
        return len(fh.read()) / 1e6


def child_env(pycache: Path, tree: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(pycache),
               RIGHTSIZE_CACHE_DIR=str(pycache.with_name(pycache.name + "-cache")))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def command(trace: Path, out: Path, as_json: bool, tuned: bool = True) -> list[str]:
    entry = ["-m", "rightsize"] if tuned else ["-c", UNTUNED]
    cmd = [sys.executable, *entry, "analyze", str(trace), "--force"]
    if as_json:
        cmd += ["--format", "json", "-o", str(out / "out.json")]
    return cmd


def run_once(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one child run; raises if it fails."""
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=devnull, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode(errors='replace')[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def importtime_top(cmd: list[str], env: dict[str, str], cwd: Path, top: int) -> list[str]:
    """The sum of the top-level imports' times and the ``top`` slowest imports (cumulative,
    nested ones included), from one ``-X importtime`` run."""
    proc = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]],
        check=False,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum_us, name = line.split("|", 2)
        if cum_us.strip().isdigit():
            rows.append((int(cum_us), name.rstrip()))
    rows.sort(reverse=True)
    total = sum(c for c, name in rows if not name[1:].startswith(" "))
    lines = [f"imports, top-level total {total / 1e6:.3f} s (one run)"]
    lines += [f"  {c / 1e6:6.3f} s  {name.strip()}" for c, name in rows[:top]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shared", type=Path, help="the shared data directory (holds traces/)")
    ap.add_argument("--trace", default=TRACE, help=f"relative to SHARED (default {TRACE})")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--json", action="store_true", help="--format json -o FILE instead of text")
    ap.add_argument("--before", type=Path, action="append",
                    help="another tree to run alternately (repeatable: one column per tree)")
    ap.add_argument("--after", type=Path,
                    help="the tree to measure as 'after' (default: the installed rightsize)")
    ap.add_argument("--tuning", choices=("both", "on", "off"), default="both",
                    help="the after tree with rightsize.cli.startup (on), without (off), or both")
    ap.add_argument("--top", type=int, default=12, help="importtime entries to print")
    args = ap.parse_args()
    trace = args.shared / args.trace
    after = args.after.resolve() if args.after else None
    trees: dict[str, Path | None] = {"this tree": after}
    if args.before:
        named = len(args.before) > 1  # several: each by its directory name
        trees = {(p.name if named else "before"): p.resolve() for p in args.before}
        trees["after"] = after
    last = list(trees)[-1]  # the tree under test
    with tempfile.TemporaryDirectory(prefix="rightsize-fixed-") as tmp:
        work = Path(tmp)
        cmd = command(trace, work, args.json)
        envs = {k: child_env(work / f"pyc-{i}", t) for i, (k, t) in enumerate(trees.items())}
        contenders = {name: (cmd, envs[name]) for name in trees}
        untuned = f"{last}, untuned"
        if args.tuning != "on":
            contenders[untuned] = (command(trace, work, args.json, tuned=False), envs[last])
        if args.tuning == "off":
            del contenders[last]
        # What no change to rightsize can remove: the interpreter and the libraries it needs.
        contenders["floor"] = ([sys.executable, "-c", FLOOR], envs[last])
        contenders["floor, lean"] = ([sys.executable, "-c", LEAN_FLOOR],
                                     dict(envs[last], OPENBLAS_NUM_THREADS="1"))
        runs = measure(contenders, work, args.repeat)
        print(
            f"trace {trace.name} ({trace.stat().st_size / 1e6:.2f} MB on disk, "
            f"{unpacked_mb(trace):.2f} MB of JSON)"
        )
        print(
            f"command: rightsize analyze TRACE --force{' --format json -o F' if args.json else ''}"
            f"; floor: python -c {FLOOR!r} (lean: one OpenBLAS thread, the GC tuning)"
        )
        print(f"load average when the runs ended: {os.getloadavg()[0]:.2f}")
        medians = {}
        for name, rs in runs.items():
            wall = statistics.median(r[0] for r in rs)
            medians[name] = cpu = statistics.median(r[1] for r in rs)
            print(f"{name:>20}: median of {len(rs)}: wall {wall:.3f} s, CPU (user+sys) {cpu:.3f} s")
        for name in trees:
            if name != last and last in medians:
                print(f"CPU {last} / {name}: {medians[last] / medians[name]:.2f}")
        if last in medians and untuned in medians:
            gain = medians[untuned] - medians[last]
            print(f"start-up tuning saves {gain:.3f} CPU-s ({last} vs {untuned})")
        print("\n".join(importtime_top(cmd, envs[last], work, args.top)))


def measure(
    contenders: dict[str, tuple[list[str], dict[str, str]]], work: Path, repeat: int
) -> dict[str, list[tuple[float, float]]]:
    """``repeat`` (wall, CPU) runs per contender, round-robin, after one warm-up run each."""
    for cmd, env in contenders.values():  # warm-up: bytecode, template cache, page cache
        run_once(cmd, env, work)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, (cmd, env) in contenders.items():
            runs[name].append(run_once(cmd, env, work))
    return runs


if __name__ == "__main__":
    main()
