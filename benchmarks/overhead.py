"""Overhead of ``rightsize run`` on a training script, with and without it, in one run.

Runs a small transformer encoder (2 layers) + AdamW training loop ``--runs`` times plainly and ``--runs`` times under
``rightsize run --no-report`` (default schedule: wait 1, warmup 1, active 3; 10 Hz sampling),
alternating, and reports medians:

* **outside the active window**: median step time of the steps after the profiler finished
  (hooks removed, only the sampler thread running in the parent) vs the same steps plainly;
* **training loop**: wall time from the first to the last step (includes Kineto start-up, the
  recorded steps and the trace export);
* **process**: wall time of the whole command (interpreter, imports, rightsize's own start and
  the final manifest);
* **the step right after the window**: the step whose optimizer step stops the profiler (the
  trace is exported on a background thread from there), against the median step of the same
  run (target: within 2x).

Usage: python benchmarks/overhead.py [--runs 5] [--steps 150] [--width 256] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The model, optimizer and batch of the job (``width`` and ``device`` set before it); shared
# with close_step.py.
MODEL = """
torch.manual_seed(0)
torch.set_num_threads(1)
layer = torch.nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width,
                                         batch_first=True)
model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=2),
                            torch.nn.Linear(width, 10)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(16, 64, width, device=device)
y = torch.randint(0, 10, (16,), device=device)
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
"""
TRAIN = """
import json, sys, time, torch
steps, width, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
""" + MODEL + """
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x).mean(dim=1), y).backward()
    opt.step()
    sync()  # a step's time includes its GPU work
    times.append(time.perf_counter() - t0)
print("STEPS " + json.dumps(times))
"""

FIRST_UNHOOKED_STEP = 8  # steps 0..6 are first step + wait 1 + warmup 1 + active 3 (+ stop)
AFTER_WINDOW_STEP = 5  # the optimizer step that ends the active window (its trace is exported)


# rightsize run options per variant: the whole thing, and each half alone
VARIANTS = {
    "rightsize": [],
    "no-gpu-samples": ["--no-gpu-samples"],
    "no-profiler": ["--no-profiler"],
    "no-memory": ["--no-profile-memory", "--no-record-shapes", "--no-with-flops"],
    "keep-cupti": [],  # TEARDOWN_CUPTI=0: CUPTI stays attached after the window
}
VARIANT_ENV = {"keep-cupti": {"TEARDOWN_CUPTI": "0"}}


def one_run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None
            ) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    wall_s = time.perf_counter() - t0
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("STEPS "))
    return wall_s, json.loads(line[len("STEPS ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (NVML sampled too)")
    parser.add_argument("--variants", default="rightsize",
                        help=f"comma-separated, of {', '.join(VARIANTS)}: what runs the job "
                        "besides plain python (alternating, one of each per run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "train.py").write_text(TRAIN)
        job = ["train.py", str(args.steps), str(args.width), args.device]
        results: dict[str, list[tuple[float, list[float]]]] = {"plain": []}
        for i in range(args.runs):
            results["plain"].append(one_run([sys.executable, *job], work))
            for name in args.variants.split(","):
                wrapped = [sys.executable, "-m", "rightsize", "run", "--no-report",
                           *VARIANTS[name]]
                out = ["--out", f"run-{name}-{i}"]
                results.setdefault(name, []).append(
                    one_run([*wrapped, *out, *job], work, VARIANT_ENV.get(name)))
    for name in args.variants.split(","):
        report(results, args, name)


def report(results: dict[str, list[tuple[float, list[float]]]], args: argparse.Namespace,
           variant: str = "rightsize") -> None:
    def med(kind: str, pick) -> float:
        return statistics.median(pick(wall, steps) for wall, steps in results[kind])

    rows = {
        "outside the active window (median step)": lambda w, s: statistics.median(
            s[FIRST_UNHOOKED_STEP:]
        ),
        "training loop (sum of steps)": lambda w, s: sum(s),
        "process wall time": lambda w, s: w,
        "step right after the window": lambda w, s: s[AFTER_WINDOW_STEP],
    }
    print(f"rightsize run overhead ({variant}): {args.runs} runs each, {args.steps} steps, "
          f"width {args.width}, {args.device}")
    print(f"{'':42s} {'plain':>10s} {'rightsize':>10s} {'overhead':>9s}")
    for label, pick in rows.items():
        plain, wrapped = med("plain", pick), med(variant, pick)
        unit, scale = ("ms", 1e3) if "window" in label else ("s", 1.0)
        print(
            f"{label:42s} {plain * scale:8.2f}{unit:>2s} {wrapped * scale:8.2f}{unit:>2s} "
            f"{(wrapped / plain - 1) * 100:+8.1f}%"
        )


    after = statistics.median(s[AFTER_WINDOW_STEP] / statistics.median(s[FIRST_UNHOOKED_STEP:])
                              for _, s in results[variant])
    print(f"step right after the window / median step under rightsize: {after:.2f}x "
          "(target <= 2x)")


if __name__ == "__main__":
    main()
