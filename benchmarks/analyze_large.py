#!/usr/bin/env python3
"""Large-trace benchmark: ``rightsize analyze`` vs HTA vs a bare ``orjson.loads``.

Every contender runs in its own child process, ``--repeat`` times, interleaved
round-robin (rightsize, hta, orjson, rightsize, ...).  For each run we record

* wall time, measured here from spawn to exit (so it includes interpreter
  start-up and imports: this is what a user waits for);
* peak RSS of that child (and of any children it waited for), from the rusage
  that ``os.wait4`` returns for exactly that pid, so runs never contaminate one
  another.  Caveat: Linux carries the spawning process's RSS high-water mark
  into a child's ``ru_maxrss`` across exec (vfork/fork + exec), so this harness
  never loads the trace and keeps its own peak at ~15 MiB, which is then the
  floor of every figure; it is recorded as ``harness_maxrss_bytes``.  ``/proc/<pid>/status`` is also polled as a guard: a child above
  ``--rss-limit-gib`` is killed and reported as such.

Contenders (``--only`` picks a subset):

* ``rightsize``: ``--rightsize-cmd`` (a template; ``{python}`` and ``{file}``
  are substituted), default ``{python} -m rightsize analyze {file} --format
  json`` with ``--rightsize-python`` (default /tmp/venv/bin/python).  Its
  stdout goes to a temporary file that is checked to be valid JSON.
* ``hta``: HolisticTraceAnalysis with ``--hta-python`` (default
  /tmp/venv-hta/bin/python): ``TraceAnalysis(trace_dir=D)`` where ``D`` is a
  temporary directory holding only a symlink to the trace (HTA loads every
  ``*.json``/``*.gz`` in the directory and takes the rank from
  ``distributedInfo.rank``, defaulting to 0), then
  ``get_temporal_breakdown(visualize=False)``.
* ``orjson``: read the file (gunzip if ``.gz``) and ``orjson.loads`` it, with
  ``--orjson-python`` (default /tmp/venv/bin/python).  The floor for any tool
  that materialises the JSON.

* ``before``: the same command with ``--before-python`` / ``--before-cmd`` (e.g. an older tree
  exported with ``git archive`` and put first on ``PYTHONPATH``); run from outside any checkout.

Above ``--contenders-max-bytes`` (default 2.5 GB uncompressed) HTA and orjson are skipped: they
hold the whole document (5-7x its size in RAM). The targets checked per file (issue 17: MB per
CPU-second, speedup vs HTA, peak RSS for that size) are in ``analyze_large_report.py``.

The page cache is warmed by reading the file once before the first run.

Results: a markdown table on stdout and JSON + markdown in benchmarks/out/.

    python benchmarks/analyze_large.py /tmp/bench/big.json
    python benchmarks/analyze_large.py /tmp/bench/big.json --only hta,orjson
    python benchmarks/analyze_large.py /tmp/bench/big.json --gzip   # also the .gz
    python benchmarks/analyze_large.py /tmp/bench/big5g.json.gz --only rightsize
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from analyze_large_report import table, targets

OUT_DIR = HERE / "out"
GIB = 1024**3

CONTENDERS = ("rightsize", "before", "hta", "orjson")
DEFAULT_RIGHTSIZE_CMD = "{python} -m rightsize analyze {file} --format json"


HTA_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
df = a.get_temporal_breakdown(visualize=False)
t3 = time.perf_counter()
print(json.dumps({
    "import_s": t1 - t0, "load_s": t2 - t1, "breakdown_s": t3 - t2,
    "steps": len(a.get_profiler_steps()),
    "breakdown": json.loads(df.to_json(orient="records")),
}))
"""

ORJSON_CHILD = r"""
import gzip, json, sys, time
import orjson
t0 = time.perf_counter()
path = sys.argv[1]
with open(path, "rb") as fh:
    raw = fh.read()
if path.endswith(".gz"):
    raw = gzip.decompress(raw)
t1 = time.perf_counter()
d = orjson.loads(raw)
t2 = time.perf_counter()
print(json.dumps({"read_s": t1 - t0, "parse_s": t2 - t1, "events": len(d["traceEvents"])}))
"""


# --------------------------------------------------------------------------- running


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_child(
    argv: list[str], timeout_s: float, rss_limit_kib: int, stdout_path: str
) -> dict[str, Any]:
    """Spawn ``argv``, wait for it with ``os.wait4`` and return its own figures."""
    with open(stdout_path, "wb") as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        polled_peak = 0
        killed = None
        try:
            while True:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                polled_peak = max(polled_peak, _rss_kib(proc.pid))
                elapsed = time.perf_counter() - t0
                if killed is None and elapsed > timeout_s:
                    killed = f"timeout after {timeout_s:.0f} s"
                elif killed is None and polled_peak > rss_limit_kib:
                    killed = f"RSS above {rss_limit_kib / 2**20:.1f} GiB"
                if killed:
                    _kill_group(proc.pid)
                    pid, status, ru = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.05)
        except BaseException:  # Ctrl-C / SIGTERM: do not leave the child running
            _kill_group(proc.pid)
            os.wait4(proc.pid, 0)
            raise
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4 above
        err.seek(0)
        stderr_tail = err.read()[-3000:].decode("utf-8", "replace")
    return {
        "wall_s": wall,
        "maxrss_bytes": ru.ru_maxrss * 1024,  # Linux: KiB
        "polled_peak_rss_bytes": polled_peak * 1024,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "returncode": proc.returncode,
        "killed": killed,
        "ok": proc.returncode == 0 and killed is None,
        "stderr_tail": stderr_tail if (proc.returncode != 0 or killed) else "",
    }


def uncompressed_size(path: Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            n += len(chunk)
    return n


def warm_cache(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(1 << 20):  # small reads: keep this process small (module docstring)
            pass


def make_gzip(path: Path) -> Path:
    gz = path.with_name(path.name + ".gz")
    if not gz.exists() or gz.stat().st_mtime < path.stat().st_mtime:
        print(f"compressing {path} -> {gz} ...", file=sys.stderr)
        tmp = gz.with_name(gz.name + ".partial")
        with open(tmp, "wb") as out:
            subprocess.run(["gzip", "-c", "-6", str(path)], stdout=out, check=True)
        os.replace(tmp, gz)
    return gz


def contender_argv(name: str, file: Path, args: argparse.Namespace, scratch: Path) -> list[str]:
    if name in ("rightsize", "before"):
        python = args.rightsize_python if name == "rightsize" else args.before_python
        template = args.before_cmd if name == "before" and args.before_cmd else args.rightsize_cmd
        cmd = template.format(python=shlex.quote(python), file=shlex.quote(str(file)))
        return shlex.split(cmd)
    if name == "hta":
        d = scratch / ("hta-" + file.name.replace(".", "_"))
        d.mkdir(exist_ok=True)
        link = d / ("rank" + ("".join(file.suffixes[-2:]) if file.suffix == ".gz" else ".json"))
        if not link.exists():
            link.symlink_to(file.resolve())
        return [args.hta_python, "-c", HTA_CHILD, str(d)]
    if name == "orjson":
        return [args.orjson_python, "-c", ORJSON_CHILD, str(file)]
    raise ValueError(name)


def bench_file(file: Path, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    size = uncompressed_size(file)
    on_disk = file.stat().st_size
    print(
        f"\n== {file}: {on_disk / 1e9:.3f} GB on disk, {size / 1e9:.3f} GB uncompressed",
        file=sys.stderr,
    )
    warm_cache(file)
    names = [n for n in CONTENDERS if n in args.only]
    skipped = [n for n in names if n in ("hta", "orjson") and size > args.contenders_max_bytes]
    names = [n for n in names if n not in skipped]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    given_up: set[str] = set()
    for rep in range(args.repeat):
        for name in names:
            if name in given_up:
                continue
            argv = contender_argv(name, file, args, scratch)
            timeout = args.hta_timeout if name == "hta" else args.timeout
            out_path = str(scratch / f"{name}.stdout")
            r = run_child(argv, timeout, int(args.rss_limit_gib * 2**20), out_path)
            r["argv"] = (
                argv
                if name != "hta" and name != "orjson"
                else argv[:1] + ["-c", "<inline>"] + argv[3:]
            )
            try:
                text = Path(out_path).read_text()
                if name in ("rightsize", "before"):
                    r["stdout_bytes"] = len(text)
                    r["stdout_is_json"] = bool(text.strip()) and _is_json(text)
                    if not r["stdout_is_json"]:
                        r["ok"] = False
                else:
                    r["child_report"] = (
                        json.loads(text.strip().splitlines()[-1]) if text.strip() else None
                    )
            except (OSError, ValueError, IndexError):
                r.setdefault("child_report", None)
            runs[name].append(r)
            status = "ok" if r["ok"] else f"FAILED rc={r['returncode']} {r['killed'] or ''}"
            print(
                f"  {name:<9} run {rep + 1}/{args.repeat}: {r['wall_s']:8.2f} s, "
                f"peak RSS {r['maxrss_bytes'] / GIB:6.2f} GiB  {status}",
                file=sys.stderr,
            )
            if not r["ok"]:
                if r["stderr_tail"]:
                    print(
                        "    stderr: " + r["stderr_tail"][-800:].replace("\n", "\n    "),
                        file=sys.stderr,
                    )
                given_up.add(name)  # a failure or a kill will not get better on a retry
    summary = {}
    for name, rs in runs.items():
        good = [r for r in rs if r["ok"]]
        summary[name] = {
            "runs": len(rs),
            "ok_runs": len(good),
            "wall_s_median": statistics.median(r["wall_s"] for r in good) if good else None,
            "wall_s_all": [round(r["wall_s"], 3) for r in rs],
            "peak_rss_bytes": max(r["maxrss_bytes"] for r in rs) if rs else None,
            "cpu_s_median": statistics.median(r["user_s"] + r["sys_s"] for r in good)
            if good else None,
            "loadavg_1min": os.getloadavg()[0],
            "failure": None
            if len(good) == len(rs)
            else next((r["killed"] or f"rc={r['returncode']}") for r in rs if not r["ok"]),
        }
    return {
        "file": str(file),
        "bytes_on_disk": on_disk,
        "bytes_uncompressed": size,
        "runs": runs,
        "summary": summary,
        "skipped": skipped,
    }


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


# --------------------------------------------------------------------------- report


def machine_info(args: argparse.Namespace) -> dict[str, Any]:
    info: dict[str, Any] = {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        with open("/proc/meminfo") as fh:
            info["mem_total_gib"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    for key, py, mod in (
        (
            "hta_version",
            args.hta_python,
            "importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))",
        ),
        (
            "orjson_version",
            args.orjson_python,
            "importlib.metadata as m; print(m.version('orjson'))",
        ),
    ):
        try:
            info[key] = (
                subprocess.run(
                    [py, "-c", "import " + mod],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                ).stdout.strip()
                or None
            )
        except (OSError, subprocess.TimeoutExpired):
            info[key] = None
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", nargs="*", default=["/tmp/bench/big.json"],
                   help="traces (several: one table each, e.g. one per layout)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--only",
        default="rightsize,hta,orjson",
        help="comma-separated subset of rightsize,before,hta,orjson",
    )
    p.add_argument("--before-python", default="",
                   help="python of a rightsize checkout to compare with (contender 'before'); "
                        "run from outside any checkout so that -m imports its own")
    p.add_argument("--rightsize-python", default="/tmp/venv/bin/python")
    p.add_argument(
        "--rightsize-cmd", default=DEFAULT_RIGHTSIZE_CMD, help="template with {python} and {file}"
    )
    p.add_argument("--before-cmd", default="",
                   help="template for 'before' (default: --rightsize-cmd), e.g. "
                        "'env PYTHONPATH=/tmp/old {python} -m rightsize analyze {file} "
                        "--format json' for an exported old tree")
    p.add_argument("--contenders-max-bytes", type=float, default=2.5e9,
                   help="HTA and orjson are skipped above this uncompressed size (they hold "
                        "the whole document: ~5-7x its size in RAM); rightsize always runs")
    p.add_argument("--hta-python", default="/tmp/venv-hta/bin/python")
    p.add_argument("--orjson-python", default="/tmp/venv/bin/python")
    p.add_argument(
        "--timeout", type=float, default=900, help="per-run limit (s) for rightsize and orjson"
    )
    p.add_argument("--hta-timeout", type=float, default=1800, help="per-run limit (s) for HTA")
    p.add_argument(
        "--rss-limit-gib", type=float, default=20.0, help="kill a child whose RSS passes this"
    )
    p.add_argument(
        "--gzip", action="store_true", help="also run on FILE.gz (created with gzip -6 if missing)"
    )
    p.add_argument("--out-dir", default=str(OUT_DIR))
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so run_child can clean up
    args.only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = args.only - set(CONTENDERS)
    if unknown:
        p.error(f"unknown contender(s): {', '.join(sorted(unknown))}")

    if "before" in args.only and not args.before_python:
        p.error("contender 'before' needs --before-python")
    files = []
    for name in args.files:
        file = Path(name)
        if not file.exists():
            p.error(f"{file} not found (make it with benchmarks/make_big_trace.py)")
        files += [file] + ([make_gzip(file)] if args.gzip else [])

    scratch = Path(tempfile.mkdtemp(prefix="rightsize-bench-"))
    try:
        results = [bench_file(f, args, scratch) for f in files]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    for res in results:
        ev = [
            r["child_report"]["events"]
            for r in res["runs"].get("orjson", [])
            if r.get("child_report") and "events" in r["child_report"]
        ]
        res["events"] = ev[0] if ev else None

    report = "\n\n".join(table(r) for r in results)
    print(report)

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    payload = {
        "benchmark": "analyze_large",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(args),
        "config": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
        "targets": {r["file"]: targets(r["bytes_uncompressed"]) for r in results},
        "harness_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "results": results,
        "markdown": report,
    }
    for name in (f"analyze_large-{stamp}", "analyze_large-latest"):
        (out_dir / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
        (out_dir / f"{name}.md").write_text(report + "\n")
    print(f"\nwrote {out_dir}/analyze_large-{stamp}.json", file=sys.stderr)
    failed = any(v["ok_runs"] < v["runs"] for r in results for v in r["summary"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
