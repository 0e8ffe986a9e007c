"""Overhead of ``rightsize run --on-demand`` on a CPU training job: between captures, and of a
capture against ``rightsize run``'s own profiling window.

1. **The step counter** (micro): a job doing nothing but ``opt.step()`` on one parameter
   (``--micro-steps`` steps), plainly and under ``rightsize run --on-demand`` (listening, never
   triggered), interleaved ``--runs`` times. The difference of the per-step medians is what the
   optimizer hook costs a step; the job's CPU time (``time.process_time``: every thread of the
   process, the control thread included) likewise.
2. **Between captures** (macro): overhead.py's job (2-layer transformer encoder, AdamW, one
   thread), ``--steps`` steps, plain ``python`` and ``rightsize run --on-demand`` interleaved
   ``--runs`` times. Per run: the median step (wall) and the CPU seconds a step of the job's
   process; the overhead of each adjacent pair (on-demand / plain - 1) is reported as the
   median and the range over pairs, beside the overhead of all runs' medians.
3. **The capture**: ``--capture-runs`` runs each of ``rightsize run --on-demand`` triggered once
   (``--capture-steps`` steps, at about a third of the job) and ``rightsize run --wait W
   --warmup 1 --active K`` (the same number of steps recorded by run's own schedule, at the same
   place). Per run: the recorded steps' median against the median of the steps outside the
   window (and one step either side): the profiler's cost on the steps it records, for both.

4. **The control thread, idle** (``--idle-s``): a job that steps three times, then sleeps; its
   process's CPU time over the sleep, plainly and under ``--on-demand``: what the thread that
   polls ``control/`` (every 0.5 s) and publishes the step times costs, per second.

5. **Between captures, no parent** (``--parts 5``): part 2 with the job started under
   ``rightsize trigger --print-env``'s environment (``RIGHTSIZE_ON_DEMAND=1``: the step counter
   and the control thread in the job, no ``rightsize run`` parent sampling the host beside
   it), against the plain script: what the job's own processes pay, apart from the parent's
   CPU on a shared machine.

The machine this runs on may be shared: wall times move with other load, CPU times much less;
that is why every comparison is interleaved and given with its spread.

Usage: python benchmarks/ondemand_overhead.py [--runs 10] [--steps 200] [--capture-runs 3]
       [--out benchmarks/ondemand_overhead.result.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import MODEL  # the same job as overhead.py's

TRAIN = """
import json, sys, time, torch
steps, width, device = int(sys.argv[1]), int(sys.argv[2]), "cpu"
""" + MODEL + """
times, cpu0 = [], time.process_time()
for _ in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x).mean(dim=1), y).backward()
    opt.step()
    times.append(time.perf_counter() - t0)
print("STEPS " + json.dumps({"wall": times, "cpu_s": time.process_time() - cpu0}), flush=True)
"""
MICRO = """
import json, sys, time, torch
steps = int(sys.argv[1])
p = torch.nn.Parameter(torch.zeros(1))
p.grad = torch.zeros(1)
opt = torch.optim.SGD([p], lr=0.0)
for _ in range(200):
    opt.step()
times, cpu0 = [], time.process_time()
for _ in range(steps):
    t0 = time.perf_counter()
    opt.step()
    times.append(time.perf_counter() - t0)
print("STEPS " + json.dumps({"wall": times, "cpu_s": time.process_time() - cpu0}), flush=True)
"""
IDLE = """
import json, sys, time, torch
p = torch.nn.Parameter(torch.zeros(1))
p.grad = torch.zeros(1)
opt = torch.optim.SGD([p], lr=0.0)
for _ in range(3):
    opt.step()
cpu0, t0 = time.process_time(), time.perf_counter()
time.sleep(float(sys.argv[1]))
print("STEPS " + json.dumps({"wall": [time.perf_counter() - t0],
                              "cpu_s": time.process_time() - cpu0}), flush=True)
"""
ON_DEMAND = [sys.executable, "-m", "rightsize", "run", "--no-gpu-samples", "--no-report"]


def run_job(cmd: list[str], cwd: Path, trigger_at: int | None = None,
            capture_steps: int = 0, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    if trigger_at is not None:
        _trigger(cwd / "run", cwd, trigger_at, capture_steps)
    out, err = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err[-2000:]}")
    line = next(ln for ln in out.splitlines() if ln.startswith("STEPS "))
    return json.loads(line[len("STEPS "):])


def _trigger(run: Path, cwd: Path, at: int, steps: int) -> None:
    while True:
        found = [json.loads(p.read_text()) for p in (run / "procs").glob("*.steps")]
        if found and found[0]["steps"] >= at:
            break
        time.sleep(0.1)
    subprocess.run([sys.executable, "-m", "rightsize", "trigger", "run", "--steps", str(steps),
                    "--no-wait"], cwd=cwd, check=True, capture_output=True)


def recorded_steps(run: Path) -> list[int]:
    """ProfilerStep numbers of the run's (or its capture's) trace: the job's 0-based loop
    iterations that were recorded."""
    traces = sorted(run.glob("**/traces/*.pt.trace.json.gz"))
    doc = json.loads(gzip.decompress(traces[0].read_bytes()))
    return sorted(int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                  if str(e.get("name", "")).startswith("ProfilerStep#"))


def pct(a: float, b: float) -> float:
    return round(100 * (b / a - 1), 3)


def spread(values: list[float]) -> dict:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) >= 2 \
        else [values[0]] * 3
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "q1": round(q[0], 3), "q3": round(q[2], 3), "max": round(max(values), 3),
            "n": len(values)}


def listening_env(run_dir: Path) -> dict[str, str]:
    """The environment ``rightsize trigger --print-env RUN_DIR`` gives a job."""
    out = subprocess.run([sys.executable, "-m", "rightsize", "trigger", "--print-env",
                          str(run_dir)], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if name == "PYTHONPATH":
            value = value.split("$", 1)[0] + (f":{env['PYTHONPATH']}" if env.get("PYTHONPATH")
                                              else "")
        env[name] = value
    return env


def paired(work: Path, script: str, args: list[str], runs: int, skip: int,
           parent: bool = True) -> dict:
    """Plain and on-demand (under ``rightsize run``, or ``parent=False``: under the
    environment alone), interleaved: per-step medians (us, wall) and CPU per step."""
    (work / "job.py").write_text(script)
    rows: dict[str, list[dict]] = {"plain": [], "on-demand": []}
    for i in range(runs):
        order = ["plain", "on-demand"] if i % 2 == 0 else ["on-demand", "plain"]
        for kind in order:
            env = None
            cmd = [sys.executable, "job.py", *args]
            if kind == "on-demand" and parent:
                cmd = [*ON_DEMAND, "--on-demand", "--out", f"od-{time.time_ns()}", "job.py",
                       *args]
            elif kind == "on-demand":
                env = listening_env(work / f"env-{time.time_ns()}")
            got = run_job(cmd, work, env=env)
            wall = got["wall"][skip:]
            rows[kind].append({"median_us": statistics.median(wall) * 1e6,
                               "cpu_us_per_step": got["cpu_s"] / len(got["wall"]) * 1e6})
            print(f"  {kind:9s} run {i}: median {rows[kind][-1]['median_us']:.1f} us, cpu "
                  f"{rows[kind][-1]['cpu_us_per_step']:.1f} us/step", flush=True)
    out: dict = {}
    for metric in ("median_us", "cpu_us_per_step"):
        plain = [r[metric] for r in rows["plain"]]
        ondemand = [r[metric] for r in rows["on-demand"]]
        out[metric] = {
            "plain": spread(plain), "on_demand": spread(ondemand),
            "pair_overhead_pct": spread([pct(a, b) for a, b in zip(plain, ondemand,
                                                                     strict=True)]),
            "overhead_of_medians_pct": pct(statistics.median(plain), statistics.median(ondemand)),
            "difference_us": round(statistics.median(ondemand) - statistics.median(plain), 3),
        }
    return out


def capture_cost(work: Path, runs: int, steps: int, width: int, k: int) -> dict:
    """The recorded steps against the others: triggered capture vs run's schedule."""
    (work / "job.py").write_text(TRAIN)
    at = steps // 3
    kinds = ("on-demand capture", "rightsize run window")
    ratios: dict[str, list[float]] = {kind: [] for kind in kinds}
    for i in range(runs):
        for kind in kinds:
            out = work / f"cap-{i}-{kind.split()[0]}"
            if kind == "on-demand capture":
                got = run_job([*ON_DEMAND, "--on-demand", "--out", "run", "job.py", str(steps),
                               str(width)], work, trigger_at=at, capture_steps=k)
                os.rename(work / "run", out)
            else:
                got = run_job([*ON_DEMAND, "--out", str(out), "--wait", str(at - 1), "--warmup",
                               "1", "--active", str(k), "job.py", str(steps), str(width)], work)
            rec = recorded_steps(out)
            wall = got["wall"]
            inside = [wall[s] for s in rec]
            near = set(range(rec[0] - 1, rec[-1] + 2))
            outside = [w for j, w in enumerate(wall[10:], start=10) if j not in near]
            ratios[kind].append(statistics.median(inside) / statistics.median(outside))
            print(f"  {kind}: steps {rec[0]}-{rec[-1]}, recorded/other median "
                  f"{ratios[kind][-1]:.3f}", flush=True)
    return {kind: spread(v) for kind, v in ratios.items()}


def idle_cost(work: Path, runs: int, idle_s: float) -> dict:
    """CPU seconds per second of the job's process while it sleeps (ms/s)."""
    (work / "idle.py").write_text(IDLE)
    rows: dict[str, list[float]] = {"plain": [], "on-demand": []}
    for i in range(runs):
        for kind in (["plain", "on-demand"] if i % 2 == 0 else ["on-demand", "plain"]):
            cmd = [sys.executable, "idle.py", str(idle_s)] if kind == "plain" else \
                [*ON_DEMAND, "--on-demand", "--out", f"idle-{time.time_ns()}", "idle.py",
                 str(idle_s)]
            got = run_job(cmd, work)
            rows[kind].append(got["cpu_s"] / got["wall"][0] * 1e3)
            print(f"  {kind:9s} run {i}: {rows[kind][-1]:.3f} ms CPU per s", flush=True)
    return {"cpu_ms_per_s": {kind: spread(v) for kind, v in rows.items()},
            "difference_ms_per_s": round(statistics.median(rows["on-demand"])
                                         - statistics.median(rows["plain"]), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--micro-steps", type=int, default=20000)
    parser.add_argument("--capture-runs", type=int, default=3)
    parser.add_argument("--capture-steps", type=int, default=10)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--parts", default="1,2,3,4",
                        help="which parts to run (1,2,3,4,5)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
                    "args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        parts = set(args.parts.split(","))
        if "1" in parts:
            print("1. the step counter (opt.step() of one parameter)", flush=True)
            result["step_counter"] = paired(work, MICRO, [str(args.micro_steps)], args.runs, 100)
        if "2" in parts:
            print("2. between captures (the training job)", flush=True)
            result["between_captures"] = paired(work, TRAIN, [str(args.steps), str(args.width)],
                                                args.runs, 10)
        if "3" in parts:
            print("3. the capture's own cost", flush=True)
            result["capture"] = capture_cost(work, args.capture_runs, args.steps, args.width,
                                             args.capture_steps)
        if "5" in parts:
            print("5. between captures, no parent (the environment alone)", flush=True)
            result["between_captures_env"] = paired(
                work, TRAIN, [str(args.steps), str(args.width)], args.runs, 10, parent=False)
        if "4" in parts:
            print("4. the control thread, idle", flush=True)
            result["control_thread"] = idle_cost(work, args.runs, args.idle_s)
    result["machine"]["load_avg_end"] = os.getloadavg()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
