#!/usr/bin/env python3
"""Make an N-rank job from one rank of a real multi-rank trace: per-rank jitter and one
straggler with a stated delay and cause, and the truth about every collective call.

Source (``--source``): a rank of the shared multi-rank traces (../shared/traces/ranks/, see its
SOURCES.md): ``dlrm`` (param-dlrm-8rank-v100 worker0: 8 V100s on NVLink, 5 all-to-all and 3
all-reduce NCCL kernels a step) or ``hta`` (hta-trace_filter-2of128 rank 0). Every generated rank
is that one rank's timeline, its step repeated ``--steps`` times, warped in time:

* before each collective kernel, rank r arrives ``j`` later, ``j`` uniform in 0..``--jitter-us``
  whole microseconds (seeded): its events from the collective's start on move by ``j``;
* the straggler (``--straggler``) loses ``--delay-ms`` per step more, by ``--cause``:
  ``dataloader`` inserts an ``enumerate(DataLoader)#...__next__`` wait of the whole delay at the
  start of each step; ``compute`` inserts a kernel of delay/K before each of the step's K
  collectives (more GPU work than the others); ``host`` inserts a host op of delay/K there
  (the GPU idles);
* every collective ends for all ranks at the last arrival + the source's kernel duration: the
  last rank's kernel is that long (the transfer), the others' are longer by their wait; after
  it, all ranks' timelines move alike (the collective synchronizes them).

Host events spanning an inserted delay stretch, GPU events move whole. Rank r runs on device
``r % --gpus-per-node`` with its own host pid; ``distributedInfo`` says rank r of N. ``--sizes``
adds collective args (Collective name, message sizes, process group, Seq) to the kernels so
they can be matched by sequence number and their bus bandwidth checked. ``truth/job.json``
beside the traces holds the truth: per call, each rank's arrival, the end, the transfer, the last rank, its
lateness (last - second-last arrival) and each rank's wait.

Usage::

    python benchmarks/make_job.py /tmp/job16 --ranks 16 --straggler 5 --delay-ms 5 \\
        --cause dataloader --steps 3
    rightsize analyze /tmp/job16
"""

from __future__ import annotations

import argparse
import bisect
import copy
import json
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

SHARED = Path(os.environ.get("RIGHTSIZE_SHARED",
                             Path(__file__).resolve().parents[2] / "shared")) / "traces" / "ranks"
SOURCES = {"dlrm": "param-dlrm-8rank-v100/worker0_step_12.1694128201545.pt.trace.json",
           "hta": "hta-trace_filter-2of128/sampled_rank-0.json.gz"}
CAUSES = ("dataloader", "compute", "host")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync"}
ID_ARGS = ("External id", "external id", "correlation")
NCCL = re.compile(r"(?i)^(nccl|rccl)")
STEP = re.compile(r"^ProfilerStep#(\d+)$")
LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
HOST_STALL = "rightsize_benchmark::host_stall"
KINDS = {"AllReduce": ("allreduce", "Float"), "SendRecv": ("all_to_all", "Float"),
         "AllGather": ("_allgather_base", "Float"), "Broadcast": ("broadcast", "Float")}


def load(source: str) -> dict[str, Any]:
    import gzip

    path = Path(source) if Path(source).exists() else SHARED / SOURCES[source]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def repeat_steps(doc: dict[str, Any], steps: int) -> list[dict[str, Any]]:
    """The events with their step repeated ``steps`` times (ids and step numbers kept unique)."""
    events = [e for e in doc["traceEvents"] if isinstance(e.get("ts"), int | float)]
    lo = min(int(e["ts"]) for e in events)
    hi = max(int(e["ts"]) + int(e.get("dur", 0)) for e in events)
    period = hi - lo + 1000
    stride = _id_strides(events)
    out = []
    for m in range(steps):
        for e in events:
            if m and (e.get("ph") == "M" or e.get("cat") == "Trace"):
                continue
            c = copy.deepcopy(e)
            c["ts"] = int(e["ts"]) + m * period
            if "dur" in c:
                c["dur"] = int(c["dur"])
            args = c.get("args") or {}
            for key in ID_ARGS:
                if isinstance(args.get(key), int) and args[key] >= 0:
                    args[key] += m * stride[key]
            if c.get("ph") in ("s", "f") and isinstance(c.get("id"), int):
                c["id"] += m * stride["correlation"]
            step = STEP.match(str(c.get("name", "")))
            if step:
                c["name"] = f"ProfilerStep#{int(step.group(1)) + m}"
            out.append(c)
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    return meta + sorted(out, key=lambda e: e["ts"])


def _id_strides(events: list[dict[str, Any]]) -> dict[str, int]:
    """Each id's offset per repeated step: the span of the ids the step holds, so a repeat
    numbers on from where the step before it ended. The External ids then stay as dense as the
    profiler wrote them (a fixed stride of millions made the job read as a cut-down trace keeping
    0.03% of the ids it numbers); correlation ids and the flow ids that share them, alike."""
    seen: dict[str, list[int]] = {"External id": [], "correlation": []}
    for e in events:
        args = e.get("args") or {}
        for key in ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                seen["correlation" if key == "correlation" else "External id"].append(args[key])
        if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
            seen["correlation"].append(e["id"])
    span = {k: (max(v) - min(v) + 1 if v else 1) for k, v in seen.items()}
    return {"External id": span["External id"], "external id": span["External id"],
            "correlation": span["correlation"]}


def _collectives(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((e for e in events if e.get("cat") == "kernel" and NCCL.match(e["name"])),
                  key=lambda e: e["ts"])


def _steps(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return sorted((int(e["ts"]), int(e["ts"]) + int(e["dur"])) for e in events
                  if e.get("cat") == "user_annotation" and STEP.match(e["name"]))


class Warp:
    """A rank's time shift: a step function of the source time (breakpoint -> shift from
    there on), applied to host events end to end and to GPU events at their start."""

    def __init__(self) -> None:
        self.points: list[int] = []
        self.shifts: list[int] = []

    def add(self, at: int, shift: int) -> None:
        self.points.append(at)
        self.shifts.append(shift)

    def __call__(self, t: int) -> int:
        i = bisect.bisect_right(self.points, t) - 1
        return t + (self.shifts[i] if i >= 0 else 0)


def plan(events: list[dict[str, Any]], ranks: int, straggler: int, delay_us: int, cause: str,
         jitter_us: int, seed: int) -> tuple[list[Warp], list[list[dict[str, Any]]], dict]:
    """Each rank's warp, the events inserted into each rank, and the truth per call."""
    rng = random.Random(seed)
    calls = _collectives(events)
    steps = _steps(events)
    step_of = [max(0, bisect.bisect_right([s for s, _ in steps], c["ts"]) - 1) for c in calls]
    per_step = {s: step_of.count(s) for s in set(step_of)}
    host = next(e for e in events if e.get("cat") == "user_annotation" and STEP.match(e["name"]))
    compute = max((e for e in events if e.get("cat") == "kernel" and not NCCL.match(e["name"])),
                  key=lambda e: e["dur"])
    warps = [Warp() for _ in range(ranks)]
    inserted: list[list[dict[str, Any]]] = [[] for _ in range(ranks)]
    shift = [0] * ranks
    truth = []
    first_of_step = {}
    for k, s in enumerate(step_of):
        first_of_step.setdefault(s, k)
    for k, call in enumerate(calls):
        a_k, dur_k = int(call["ts"]), int(call["dur"])
        if k and a_k < int(calls[k - 1]["ts"]) + int(calls[k - 1]["dur"]):
            raise ValueError("the source's collectives overlap (two streams at once): the "
                             "warp needs them one at a time")
        arrivals = []
        for r in range(ranks):
            if r == straggler and cause == "dataloader" and first_of_step[step_of[k]] == k:
                p = steps[step_of[k]][0] + 1  # inside the step: the step's own span stretches
                if warps[r].points and p < warps[r].points[-1]:
                    raise ValueError("the step starts before the previous collective ends")
                inserted[r].append({"ph": "X", "cat": "user_annotation", "name": LOADER,
                                    "pid": host["pid"], "tid": host["tid"],
                                    "ts": p + shift[r], "dur": delay_us, "args": {}})
                shift[r] += delay_us
                warps[r].add(p, shift[r])
            jitter = rng.randint(0, jitter_us)
            extra = 0
            if r == straggler and cause in ("compute", "host"):
                extra = delay_us // per_step[step_of[k]]
                at = a_k + shift[r] + jitter
                inserted[r].append(_extra(cause, compute, host, at, extra))
            shift[r] += jitter + extra
            warps[r].add(a_k, shift[r])
            arrivals.append(a_k + shift[r])
        last = max(arrivals)
        end = last + dur_k
        for r in range(ranks):
            shift[r] = last - a_k
            warps[r].add(a_k + dur_k, shift[r])
        order = sorted(range(ranks), key=lambda r: (-arrivals[r], r))
        truth.append({"index": k, "step": step_of[k], "kernel": call["name"].split("(")[0],
                      "arrival_ns": [a * 1000 for a in arrivals], "end_ns": end * 1000,
                      "transfer_ns": dur_k * 1000, "last_rank": order[0],
                      "late_ns": (arrivals[order[0]] - arrivals[order[1]]) * 1000,
                      "wait_ns": [(last - a) * 1000 for a in arrivals]})
    return warps, inserted, {"calls": truth, "collectives_per_step": per_step,
                             "steps_total": len(steps)}


def _extra(cause: str, compute: dict[str, Any], host: dict[str, Any], at: int,
           dur: int) -> dict[str, Any]:
    if cause == "compute":
        e = copy.deepcopy(compute)
        e.update(ts=at, dur=dur)
        e["args"] = {k: v for k, v in e.get("args", {}).items() if k not in ID_ARGS}
        return e
    return {"ph": "X", "cat": "cpu_op", "name": HOST_STALL, "pid": host["pid"],
            "tid": host["tid"], "ts": at, "dur": dur, "args": {}}


def rank_trace(doc: dict[str, Any], events: list[dict[str, Any]], warp: Warp,
               extra: list[dict[str, Any]], rank: int, ranks: int, per_node: int,
               sizes: bool) -> dict[str, Any]:
    device = rank % per_node
    calls = {id(c): i for i, c in enumerate(_collectives(events))}
    out = []
    for e in events:
        c = copy.deepcopy(e)
        if c.get("ph") == "M" or not isinstance(c.get("ts"), int | float):
            out.append(c)
            continue
        start = int(e["ts"])
        gpu = e.get("cat") in GPU_CATS or (e.get("ph") == "f")
        c["ts"] = warp(start)
        if "dur" in e and not gpu:
            c["dur"] = warp(start + int(e["dur"])) - c["ts"]
        if id(e) in calls:  # every rank's collective ends at the call's common end
            c["dur"] = warp(start + int(e["dur"])) - c["ts"]
            if sizes:
                c["args"].update(_comm_args(e["name"], calls[id(e)], ranks))
        _place(c, e, device, rank)
        out.append(c)
    for e in extra:
        c = copy.deepcopy(e)
        _place(c, e, device, rank)
        out.append(c)
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    head["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": ranks}
    return {**head, "traceEvents": sorted(out, key=lambda e: (e.get("ph") != "M",
                                                              e.get("ts", 0)))}


def _place(c: dict[str, Any], e: dict[str, Any], device: int, rank: int) -> None:
    """The event on this rank's device (GPU events) or host process (host events)."""
    gpu = e.get("cat") in GPU_CATS or (e.get("ph") == "f")
    if gpu and isinstance(e.get("pid"), int):
        c["pid"] = device
        if isinstance(c.get("args"), dict) and "device" in c["args"]:
            c["args"]["device"] = device
    elif isinstance(e.get("pid"), int) and e["pid"] > 64:  # a host pid, not a device index
        c["pid"] = e["pid"] + rank
        if e.get("tid") == e["pid"]:
            c["tid"] = c["pid"]


def _comm_args(kernel: str, index: int, ranks: int) -> dict[str, Any]:
    m = re.match(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)", kernel)
    name, dtype = KINDS.get(m.group(1) if m else "", ("allreduce", "Float"))
    nelems = 1 << (16 + index % 5)  # 256 KiB .. 4 MiB of floats
    out = nelems * ranks if name == "_allgather_base" else nelems
    return {"Collective name": name, "In msg nelems": nelems, "Out msg nelems": out,
            "dtype": dtype, "Group size": ranks, "Process Group Name": "0",
            "Process Group Ranks": json.dumps(list(range(ranks))), "Seq": index}


def make_job(out: Path, ranks: int, straggler: int, delay_ms: float, cause: str,
             steps: int = 3, jitter_us: int = 20, per_node: int = 8, seed: int = 0,
             source: str = "dlrm", sizes: bool = False) -> dict[str, Any]:
    """Write the job's traces and ``job.json`` into ``out``; return the truth."""
    if cause not in CAUSES:
        raise ValueError(f"cause must be one of {', '.join(CAUSES)}")
    if not 0 <= straggler < ranks:
        raise ValueError(f"straggler must be a rank of 0..{ranks - 1}")
    doc = load(source)
    events = repeat_steps(doc, steps)
    delay_us = round(delay_ms * 1000)
    warps, inserted, truth = plan(events, ranks, straggler, delay_us, cause, jitter_us, seed)
    out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        trace = rank_trace(doc, events, warps[r], inserted[r], r, ranks, per_node, sizes)
        (out / f"rank{r}.pt.trace.json").write_text(json.dumps(trace))
    truth.update(ranks=ranks, straggler=straggler, cause=cause, delay_ms_per_step=delay_ms,
                 steps=steps, jitter_us_max=jitter_us, gpus_per_node=per_node, seed=seed,
                 source=source, sizes=sizes)
    (out / "truth").mkdir(exist_ok=True)  # beside the traces, not among them
    (out / "truth" / "job.json").write_text(json.dumps(truth, indent=1))
    return truth


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--straggler", type=int, default=5)
    p.add_argument("--delay-ms", type=float, default=5.0, help="per step")
    p.add_argument("--cause", choices=CAUSES, default="dataloader")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--jitter-us", type=int, default=20)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", default="dlrm", help="dlrm, hta or a trace path")
    p.add_argument("--sizes", action="store_true", help="collective args with sizes and Seq")
    a = p.parse_args(argv)
    if a.out.exists() and any(a.out.iterdir()):
        print(f"make_job: {a.out} is not empty", file=sys.stderr)
        return 1
    truth = make_job(a.out, a.ranks, a.straggler, a.delay_ms, a.cause, a.steps, a.jitter_us,
                     a.gpus_per_node, a.seed, a.source, a.sizes)
    late = sum(c["late_ns"] for c in truth["calls"] if c["last_rank"] == a.straggler)
    steps = truth["steps_total"]
    print(f"{a.ranks} ranks in {a.out}: rank {a.straggler} late {late / 1e6 / steps:.3f} ms "
          f"per step ({a.cause}, stated {a.delay_ms} ms); truth in {a.out / 'truth' / 'job.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
