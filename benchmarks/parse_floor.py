"""How fast can Python read Kineto events into columns? Parsers on the same event bytes.

    python benchmarks/parse_floor.py TRACE [--mb 32] [--repeat 3]

Takes the first ``--mb`` MB of TRACE's events as rightsize's splitter hands them to the
parser (NDJSON, one event per line) and as a JSON array, then times, in this process, each
way of turning them into columns that is available here (MB of NDJSON per CPU-second, best of
``--repeat``):

* polars ``read_ndjson`` with rightsize's event schema (what ``read_kineto`` runs without its
  compiled parser), and with the ``args`` struct left out (one struct less to fill);
* rightsize's compiled parser (``_kscan``, where it was built): the same fields as columns polars
  adopts, times as exact ns;
* msgspec (if installed) decoding the array into typed structs with only the needed keys,
  unknown keys skipped in C, then the Python loops that make columns of them;
* pyarrow's JSON reader (if installed) with the numeric columns rightsize needs;
* ``orjson.loads`` of the array (if installed): a bare parse to Python objects, no columns.

The figures bound what a reader built from these libraries can reach: rightsize's whole
command also splits the file, builds its frames and runs the analyzers on the same CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from rightsize.traces import kineto_frames as kf
from rightsize.traces import kineto_scan
from rightsize.traces.jsonscan import Scan


def events(path: Path, mb: float) -> bytes:
    """The first ``mb`` MB of the trace's events as NDJSON (split by rightsize's scanner)."""
    import gzip
    raw = path.open("rb")
    stream = gzip.GzipFile(fileobj=raw) if raw.read(2) == b"\x1f\x8b" else raw
    raw.seek(0)
    parts, size = [], 0
    for batch in Scan(stream).batches():
        parts.append(batch.ndjson.rstrip(b"\n"))
        size += len(parts[-1])
        if size >= mb * 1e6:
            break
    return b"\n".join(parts) + b"\n"


def best(fn: Callable[[], Any], repeat: int) -> float:
    cpu = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        cpu = min(cpu, time.process_time() - start)
    return cpu


def msgspec_columns(array: bytes) -> Callable[[], Any]:
    import msgspec

    raw, none = msgspec.Raw, msgspec.Raw()
    fields = {f: raw for f in kf.ARG_FIELDS}
    args_t = msgspec.defstruct("Args", [(f"a{i}", raw, msgspec.field(name=f, default=none))
                                        for i, f in enumerate(fields)], frozen=True)
    event_t = msgspec.defstruct("Event", [
        ("ph", str | None, None), ("cat", str | None, None), ("name", str | None, None),
        ("pid", raw, none), ("tid", raw, none), ("ts", raw, none), ("dur", raw, none),
        ("id", raw, none), ("args", args_t, msgspec.field(default_factory=args_t))])
    decoder = msgspec.json.Decoder(list[event_t])  # type: ignore[valid-type]

    def run() -> pl.DataFrame:
        evs = decoder.decode(array)
        cols: dict[str, Any] = {k: [getattr(e, k) for e in evs] for k in ("ph", "cat", "name")}
        for k in ("pid", "tid", "ts", "dur", "id"):
            cols[k] = [bytes(getattr(e, k)) or None for e in evs]
        args = [e.args for e in evs]
        for i in range(len(fields)):
            cols[f"a{i}"] = [bytes(getattr(a, f"a{i}")) or None for a in args]
        return pl.DataFrame(cols)
    return run


def pyarrow_columns(ndjson: bytes) -> Callable[[], Any]:
    import pyarrow as pa
    import pyarrow.json as pj

    s, i = pa.string(), pa.int64()
    args = pa.struct([(f, i) for f in ("External id", "correlation", "device", "stream")])
    schema = pa.schema([("ph", s), ("cat", s), ("name", s), ("pid", i), ("tid", i),
                        ("ts", pa.float64()), ("dur", pa.float64()), ("args", args)])
    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    return lambda: pj.read_json(io.BytesIO(ndjson), parse_options=opts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--mb", type=float, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    ndjson = events(a.trace, a.mb)
    array = b"[" + ndjson.rstrip(b"\n").replace(b"\n", b",") + b"]"
    mb = len(ndjson) / 1e6
    full = kf.event_schema()
    no_args = {k: v for k, v in full.items() if k != "args"}
    runs: dict[str, Callable[[], Any]] = {
        "polars read_ndjson, rightsize's schema": lambda: pl.read_ndjson(ndjson, schema=full),
        "polars read_ndjson, without args": lambda: pl.read_ndjson(ndjson, schema=no_args),
    }
    if kineto_scan.available():  # rightsize's compiled parser: columns polars adopts
        runs["rightsize _kscan -> polars frame"] = lambda: kineto_scan.read(ndjson, False)
    if importlib.util.find_spec("msgspec"):
        runs["msgspec typed decode + columns"] = msgspec_columns(array)
    if importlib.util.find_spec("pyarrow"):
        runs["pyarrow read_json, 4 args, int pids"] = pyarrow_columns(ndjson)
    if importlib.util.find_spec("orjson"):
        import orjson
        runs["orjson.loads (objects, no columns)"] = lambda: orjson.loads(array)
    count = ndjson.count(b"\n")
    print(f"{a.trace.name}: {mb:.1f} MB of events, {count:,} events; "
          f"best of {a.repeat}, CPU-s of this process")
    print("| parser | CPU-s | MB per CPU-s |\n|---|---:|---:|")
    for label, fn in runs.items():
        try:
            cpu = best(fn, a.repeat)
        except Exception as exc:  # noqa: BLE001  (each library raises its own types)
            print(f"| {label} | refused: {str(exc).splitlines()[0][:60]} | - |")
            continue
        print(f"| {label} | {cpu:.3f} | {mb / cpu:.0f} |")


if __name__ == "__main__":
    main()
