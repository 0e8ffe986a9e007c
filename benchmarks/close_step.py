"""What the step that closes a profiling window costs, and which part of it rightsize can change.

``rightsize run`` records a window with ``torch.profiler.profile`` and a schedule; the schedule
stops the profiler inside the ``prof.step()`` that ends the window, on the job's own thread (the
profiler state is the thread's, so no other thread can stop it), and rightsize then exports the
trace on a background thread. This script times that boundary alone, in a fresh process per
variant and repeat (alternating), on the same transformer encoder + AdamW loop as
``overhead.py``:

* ``boundary``: ``prof.step()`` at the end of the window (the job's step then waits this long);
* ``disable``: the part of it inside torch's ``_disable_profiler()`` (Kineto stops tracing,
  flushes CUPTI and turns its records into the trace; torch's own figure,
  ``profiler._stats.profiler_disable_call_duration_us``);
* ``step`` / ``after``: the median step outside the window, and the first step after it.

Variants (rightsize's options unless named: shapes, memory and FLOPs recorded):

* ``teardown``: ``TEARDOWN_CUPTI=1``, what ``rightsize run`` sets with CUDA 12.6 or newer;
* ``keep-cupti``: ``TEARDOWN_CUPTI=0`` (CUPTI stays attached after the window);
* ``trace-only``: ``teardown`` plus ``_ExperimentalConfig(trace_only=True)`` where torch has it
  (pytorch#184306: the stop skips building the Python-side events no one reads when only the
  trace is exported); reported as unsupported otherwise;
* ``bare``: ``teardown`` without shapes, memory and FLOPs.

Usage: python benchmarks/close_step.py [--repeat 3] [--width 1024] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from overhead import MODEL  # the same job as overhead.py's

CHILD = r"""
import json, sys, time, torch
from torch.profiler import ProfilerActivity, profile, schedule
variant, width, device, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
""" + MODEL + r"""
options = dict(record_shapes=True, profile_memory=True, with_flops=True)
if variant == "bare":
    options = dict(record_shapes=False, profile_memory=False, with_flops=False)
supported = True
if variant == "trace-only":
    from torch._C._profiler import _ExperimentalConfig
    try:
        options["experimental_config"] = _ExperimentalConfig(trace_only=True)
    except TypeError:
        supported = False
stats = {}

def ready(prof):
    stats["disable_ms"] = prof.profiler._stats.profiler_disable_call_duration_us / 1e3

acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
prof = profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
               on_trace_ready=ready, **options)
steps_s, boundary_s = [], []
prof.start()
for _ in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x).mean(dim=1), y).backward()
    opt.step()
    sync()
    t1 = time.perf_counter()
    prof.step()
    boundary_s.append(time.perf_counter() - t1)
    steps_s.append(t1 - t0)
prof.stop()
print("RESULT " + json.dumps({"supported": supported, "steps": steps_s,
                               "boundary": boundary_s, **stats}))
"""

VARIANTS = ("teardown", "keep-cupti", "trace-only", "bare")
CLOSING = 5  # prof.step() after steps 0..4 (wait 1, warmup 1, active 3) ends the window


def one_run(script: Path, variant: str, args: argparse.Namespace) -> dict:
    env = {**os.environ, "TEARDOWN_CUPTI": "0" if variant == "keep-cupti" else "1"}
    res = subprocess.run([sys.executable, str(script), variant, str(args.width), args.device,
                          str(args.steps)], capture_output=True, text=True, check=True, env=env)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    variants = args.variants.split(",")
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD)
        for _ in range(args.repeat):
            for variant in variants:
                runs[variant].append(one_run(script, variant, args))
    print(f"closing step: {args.repeat} runs each, width {args.width}, {args.device}, "
          f"torch {_torch_version()}; medians (ms)")
    print(f"{'variant':12s} {'boundary':>9s} {'disable':>8s} {'step':>7s} {'after':>7s} "
          f"{'boundary/step':>14s}")
    for variant, rs in runs.items():
        if not all(r["supported"] for r in rs):
            print(f"{variant:12s} not supported by this torch")
            continue

        step = _median_ms(rs, lambda r: statistics.median(r["steps"][CLOSING + 2:]))
        boundary = _median_ms(rs, lambda r: r["boundary"][CLOSING - 1])
        disable = statistics.median(r.get("disable_ms", float("nan")) for r in rs)
        after = _median_ms(rs, lambda r: r["steps"][CLOSING])
        print(f"{variant:12s} {boundary:9.1f} {disable:8.1f} {step:7.2f} {after:7.2f} "
              f"{boundary / step:13.1f}x")


def _median_ms(runs: list[dict], pick) -> float:
    return statistics.median(pick(r) for r in runs) * 1e3


def _torch_version() -> str:
    res = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, check=False)
    return res.stdout.strip() or "?"


if __name__ == "__main__":
    main()
