#!/usr/bin/env python3
"""Build a large Kineto trace by repeating the body of a real one.

The source trace (default: the HTA ``trace_diff`` control trace, A100, rank 3
of 8, six ProfilerSteps) is split into

* *fixed* events, written once: metadata (``ph == "M"``), the ``cat == "Trace"``
  span and global (``"s": "g"``) instant markers;
* *body* events, everything else (CPU ops, runtime calls, kernels, memcpys,
  flows, ...), written ``n`` times.

Copy ``k`` (0-based) of the body is shifted as follows:

* ``ts``: ``+ k * P`` where ``P`` is the extent of the body
  (``max(ts + dur) - min(ts)``) plus the median gap between ProfilerSteps, so
  copies never overlap and each thread keeps a clean nesting;
* id fields (``External id``, ``correlation``, flow ``id``, ``Profiler Event
  Index``, ``Sequence number``, ``Python id``, ``Python parent id``, ``Ev Idx``):
  ``+ k * S`` with one stride ``S = max(any id field) + 1`` shared by all of
  them, so every equality between id fields of the source (flow id ==
  correlation, kernel ``External id`` == runtime ``External id``, ...) still
  holds inside a copy and never across copies; negative sentinels stay as is;
* ``ProfilerStep#N`` names: ``N + k * (max step - min step + 1)``, so step
  numbers keep increasing.

The replication is done on the *text* of each event (numbers are substituted
into a template cut from the source), so the output keeps exactly the layout
Kineto wrote (one pretty-printed object per event, same key order, same float
spelling), and bytes per event match a real trace.  The output is streamed to
disk one copy at a time; memory stays around a few times the source size.

The fixed events that sit after the body are adjusted: a span enclosing the
whole body (the ``PyTorch Profiler (0)`` Trace span) gets its ``dur`` extended
and markers after the body (``Record Window End``) move to the new end.

Usage::

    python benchmarks/make_big_trace.py --size-gb 1.1 --out /tmp/bench/big.json --verify
    python benchmarks/make_big_trace.py --size-gb 0.17 --layout lines --out /tmp/bench/l170.json
    python benchmarks/make_big_trace.py --size-gb 5 --out /tmp/bench/big5g.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

DEFAULT_SOURCE = str(Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"
                     / "hta-trace_diff-control-control.json.gz")

# Keys whose integer values are identifiers that must stay unique per copy.
ID_KEYS = (
    "External id",
    "correlation",
    "id",
    "Profiler Event Index",
    "Sequence number",
    "Python id",
    "Python parent id",
    "Ev Idx",
)
KIND_TS, KIND_ID, KIND_STEP = 0, 1, 2

_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_FIELD_RE = re.compile(
    r'"(?P<key>ts|' + "|".join(re.escape(k) for k in ID_KEYS) + r')"\s*:\s*(?P<num>-?\d+)'
    r'|"ProfilerStep#(?P<step>\d+)"'
)
_DUR_RE = re.compile(r'("dur"\s*:\s*)(\d+)')
_TS_RE = re.compile(r'("ts"\s*:\s*)(\d+)')
_STEP_NAME_RE = re.compile(r"^ProfilerStep#(\d+)$")


def read_source(path: str) -> str:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return fh.read().decode("utf-8")


def split_events(text: str) -> tuple[int, int, list[tuple[int, int]]]:
    """Locate each element of the top-level ``traceEvents`` array.

    Returns (array_open, array_close, [(start, end), ...]) as character offsets,
    ``end`` exclusive.  Only strings and brackets are tokenised, which is enough
    to track nesting in valid JSON.
    """
    depth = 0
    last_key_at_depth1 = None
    in_events = False
    array_open = array_close = -1
    spans: list[tuple[int, int]] = []
    ev_start = -1
    for m in _TOKEN_RE.finditer(text):
        tok = m.group()
        c = tok[0]
        if c == '"':
            if depth == 1:
                last_key_at_depth1 = tok
            continue
        if c in "{[":
            if depth == 1 and c == "[" and last_key_at_depth1 == '"traceEvents"' and array_open < 0:
                in_events = True
                array_open = m.start()
            elif in_events and depth == 2 and c == "{":
                ev_start = m.start()
            depth += 1
        else:
            depth -= 1
            if in_events and depth == 2 and c == "}":
                spans.append((ev_start, m.end()))
            elif in_events and depth == 1 and c == "]":
                array_close = m.start()
                in_events = False
            if depth == 1:
                last_key_at_depth1 = None
    if array_open < 0 or array_close < 0:
        raise SystemExit("source has no top-level traceEvents array")
    return array_open, array_close, spans


def _open_out(path: Path, compress: bool) -> BinaryIO:
    """The output file; a .gz name is written through gzip (level 1: fast enough at 5 GB)."""
    if compress:
        return gzip.open(path, "wb", compresslevel=1)
    return open(path, "wb", buffering=16 << 20)


def relayout(text: str, layout: str) -> str:
    """The source document in another layout: ``kineto`` (as written: one indented key block
    per event), ``lines`` (one compact event per line) or ``compact`` (the whole document on
    one line). Re-serialising may respell floats; the events stay the same values."""
    if layout == "kineto":
        return text
    doc = json.loads(text)
    if layout == "compact":
        return json.dumps(doc, separators=(",", ":"))
    events = doc.pop("traceEvents")
    rest = json.dumps(doc, separators=(",", ":"))[1:]
    body = ",\n".join(json.dumps(e, separators=(",", ":")) for e in events)
    return '{"traceEvents":[\n' + body + "\n]" + ("," + rest if rest != "}" else "}")


def is_fixed(ev: dict[str, Any]) -> bool:
    ph = ev.get("ph")
    if ph == "M" or ev.get("cat") == "Trace":
        return True
    return ph in ("i", "I") and ev.get("s") == "g"


def build(args: argparse.Namespace) -> dict[str, Any]:
    import orjson

    t0 = time.perf_counter()
    text = relayout(read_source(args.source), args.layout)
    if args.no_steps:  # a trace without steps: the step ranges renamed, nothing else changed
        text = text.replace('"ProfilerStep#', '"Iteration#')
    header = orjson.loads(text)
    src_events = header.pop("traceEvents")
    _, _, spans = split_events(text)
    if len(spans) != len(src_events):
        raise SystemExit(f"tokeniser found {len(spans)} events, orjson {len(src_events)}")
    if len(spans) < 2:
        raise SystemExit("source trace has fewer than two events")
    sep = text[spans[0][1] : spans[1][0]]  # e.g. ",\n  "
    prefix = text[: spans[0][0]]
    suffix = text[spans[-1][1] :]

    body_idx = [i for i, ev in enumerate(src_events) if not is_fixed(ev)]
    if not body_idx:
        raise SystemExit("source trace has no events to replicate")
    first_body = body_idx[0]
    head_idx = [i for i, ev in enumerate(src_events) if is_fixed(ev) and i < first_body]
    tail_idx = [i for i, ev in enumerate(src_events) if is_fixed(ev) and i > first_body]

    body_min = min(src_events[i]["ts"] for i in body_idx)
    body_end = max(src_events[i]["ts"] + src_events[i].get("dur", 0) for i in body_idx)
    steps = sorted(
        (ev["ts"], ev["ts"] + ev.get("dur", 0), int(m.group(1)))
        for i in body_idx
        if (ev := src_events[i]).get("ph") == "X"
        and ev.get("cat") == "user_annotation"
        and (m := _STEP_NAME_RE.match(str(ev.get("name", ""))))
    )
    gaps = [b[0] - a[1] for a, b in pairwise(steps) if b[0] >= a[1]]
    gap = max(1, math.ceil(statistics.median(gaps))) if gaps else 1
    period = math.ceil(body_end - body_min) + gap
    step_numbers = [s[2] for s in steps]
    step_stride = (max(step_numbers) - min(step_numbers) + 1) if step_numbers else 0

    # Body template: literal segments interleaved with numeric fields.
    segs: list[str] = []
    vals: list[int] = []
    kinds: list[int] = []
    body_text = sep.join(text[spans[i][0] : spans[i][1]] for i in body_idx)
    pos = 0
    max_id = -1
    for m in _FIELD_RE.finditer(body_text):
        if m.group("step") is not None:
            a, b = m.span("step")
            kind, v = KIND_STEP, int(m.group("step"))
        else:
            a, b = m.span("num")
            v = int(m.group("num"))
            kind = KIND_TS if m.group("key") == "ts" else KIND_ID
            if kind == KIND_ID:
                max_id = max(max_id, v)
        segs.append(body_text[pos:a])
        vals.append(v)
        kinds.append(kind)
        pos = b
    segs.append(body_text[pos:])
    id_stride = max_id + 1 if max_id >= 0 else 0

    body_bytes = len(body_text.encode("utf-8")) + len(sep)
    fixed_bytes = (
        len(prefix.encode())
        + len(suffix.encode())
        + sum(spans[i][1] - spans[i][0] + len(sep) for i in head_idx + tail_idx)
    )
    target = int(args.size_gb * 1e9)
    copies = args.copies or max(1, math.ceil((target - fixed_bytes) / body_bytes))

    def fixed_text(i: int) -> str:
        ev = src_events[i]
        t = text[spans[i][0] : spans[i][1]]
        if ev.get("ph") == "M" or copies == 1:
            return t
        shift = (copies - 1) * period
        ts, dur = ev.get("ts", 0), ev.get("dur", 0)
        if ev.get("ph") == "X" and ts <= body_min and ts + dur >= body_end:
            return _DUR_RE.sub(lambda m: m.group(1) + str(int(m.group(2)) + shift), t, count=1)
        if ts >= body_end:
            return _TS_RE.sub(lambda m: m.group(1) + str(int(m.group(2)) + shift), t, count=1)
        return t

    import numpy as np

    v_arr = np.asarray(vals, dtype=np.int64)
    k_arr = np.asarray(kinds, dtype=np.int8)
    is_ts = k_arr == KIND_TS
    is_id = (k_arr == KIND_ID) & (v_arr >= 0)
    is_step = k_arr == KIND_STEP
    parts: list[str] = [""] * (2 * len(segs) - 1)
    parts[0::2] = segs

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    written = 0
    with _open_out(tmp, out.suffix == ".gz") as fh:

        def w(s: str) -> None:
            nonlocal written
            b = s.encode("utf-8")
            fh.write(b)
            written += len(b)

        w(prefix)
        first = True
        for i in head_idx:
            w(("" if first else sep) + text[spans[i][0] : spans[i][1]])
            first = False
        for k in range(copies):
            shifted = (
                v_arr + is_ts * (k * period) + is_id * (k * id_stride) + is_step * (k * step_stride)
            )
            parts[1::2] = map(str, shifted.tolist())
            w(("" if first else sep) + "".join(parts))
            first = False
            if args.progress and (k + 1) % 5 == 0:
                print(f"  copy {k + 1}/{copies}, {written / 1e9:.2f} GB", file=sys.stderr)
        for i in tail_idx:
            w(sep + fixed_text(i))
        w(suffix)
    os.replace(tmp, out)

    n_events = len(head_idx) + len(tail_idx) + copies * len(body_idx)
    info = {
        "source": args.source,
        "out": str(out),
        "bytes": written,
        "copies": copies,
        "events": n_events,
        "body_events_per_copy": len(body_idx),
        "fixed_events": len(head_idx) + len(tail_idx),
        "period_us": period,
        "id_stride": id_stride,
        "step_stride": step_stride,
        "source_steps": step_numbers,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return info


# --------------------------------------------------------------------------- verify


def _summarise(events: list[dict[str, Any]]) -> dict[str, Any]:
    corr_rt: set[int] = set()
    corr_gpu: list[int] = []
    flow_s: set[Any] = set()
    flow_f: set[Any] = set()
    steps: list[tuple[float, int]] = []
    for ev in events:
        cat = ev.get("cat")
        a = ev.get("args") or {}
        if cat == "cuda_runtime" or cat == "cuda_driver":
            if "correlation" in a:
                corr_rt.add(a["correlation"])
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset") and "correlation" in a:
            corr_gpu.append(a["correlation"])
        ph = ev.get("ph")
        if ph == "s":
            flow_s.add((cat, ev.get("id")))
        elif ph == "f":
            flow_f.add((cat, ev.get("id")))
        if ph == "X" and cat == "user_annotation":
            m = _STEP_NAME_RE.match(str(ev.get("name", "")))
            if m:
                steps.append((ev["ts"], int(m.group(1))))
    steps.sort()
    return {
        "events": len(events),
        "gpu_events_linked": sum(c in corr_rt for c in corr_gpu),
        "gpu_events": len(corr_gpu),
        "flow_s": len(flow_s),
        "flow_f": len(flow_f),
        "flow_s_linked": len(flow_s & flow_f),
        "steps": len(steps),
        "steps_increasing": all(b[1] > a[1] for a, b in pairwise(steps)),
    }


def verify_child(path: str) -> None:
    """Run in a child process: load the whole file with orjson and summarise."""
    import orjson

    with open(path, "rb") as fh:
        data = orjson.loads(fh.read())
    s = _summarise(data["traceEvents"])
    s["top_level_keys"] = list(data)
    print(json.dumps(s))


def verify(info: dict[str, Any], source: str) -> bool:
    import orjson

    src = orjson.loads(read_source(source))
    base = _summarise(src["traceEvents"])
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--_verify-child", info["out"]],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        print("VERIFY FAILED: output does not load as JSON", file=sys.stderr)
        return False
    got = json.loads(proc.stdout)
    n = info["copies"]
    checks = {
        "event count": got["events"] == info["events"],
        "top-level keys kept": got["top_level_keys"] == list(src),
        "GPU events linked to a runtime call": got["gpu_events_linked"]
        == n * base["gpu_events_linked"],
        "flow ids unique per copy": got["flow_s"] == n * base["flow_s"]
        and got["flow_f"] == n * base["flow_f"],
        "flows still link": got["flow_s_linked"] == n * base["flow_s_linked"],
        "ProfilerStep count": got["steps"] == n * base["steps"],
        "ProfilerStep numbers increase": got["steps_increasing"],
    }
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAIL'}] {name}", file=sys.stderr)
    print(f"  source: {base}\n  output: {got}", file=sys.stderr)
    return all(checks.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--source", default=DEFAULT_SOURCE, help="Kineto trace (.json or .json.gz)")
    p.add_argument(
        "--size-gb", type=float, default=1.1, help="target uncompressed size, GB = 1e9 bytes"
    )
    p.add_argument(
        "--copies", type=int, default=0, help="number of body copies (overrides --size-gb)"
    )
    p.add_argument("--out", default="/tmp/bench/big.json",
                   help="output; a name ending in .gz is written gzip-compressed (level 1)")
    p.add_argument("--layout", choices=("kineto", "lines", "compact"), default="kineto",
                   help="kineto: as the source is written; lines: one event per line; "
                        "compact: the whole document on one line")
    p.add_argument(
        "--verify", action="store_true", help="load the output once with orjson in a child process"
    )
    p.add_argument("--progress", action="store_true")
    p.add_argument("--no-steps", action="store_true",
                   help="rename ProfilerStep#N to Iteration#N: a trace without steps")
    p.add_argument("--_verify-child", dest="verify_child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.verify_child:
        verify_child(args.verify_child)
        return 0
    info = build(args)
    print(json.dumps(info, indent=2))
    if args.verify:
        ok = verify(info, args.source)
        print("verify:", "ok" if ok else "FAILED", file=sys.stderr)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
