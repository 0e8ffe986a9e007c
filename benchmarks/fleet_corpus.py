"""Make a fleet corpus: thousands of realistic jobs from the shared traces and the sample runs.

    python benchmarks/fleet_corpus.py --jobs 2000 --out /tmp/fleet-corpus [--runs-share 0.2]

Sources: the shared Kineto traces of 1-3 MB (gzip) -- A100, V100 -- and, with ``--runs-share``,
the run directories of samples/runs (CPU and H100 runs, data-loader, host, PCIe, memory and
compute bound). Each trace job is a *variant* of a source: every time scaled (0.5-2x: step times
vary), shifted to one of the last ``--days`` days (its recorded day), its GPU renamed to one of
:data:`GPUS` (deviceProperties: name, memory, SMs, compute capability), its allocator figures
scaled (peak memory varies) and no distributedInfo (each job is one trace in its own folder).
The variants are synthetic -- a V100's kernels "recorded" on an L4 -- and are meant to load the
scanner with real trace structure at real sizes, not to be sized as real jobs.

Speed: each variant is parsed and written once (a few seconds); a job is its variant's gzip
bytes plus a small second gzip member that closes the JSON object with a unique ``trace_id``
(readers inflate multi-member gzip as one stream), so every job has its own content hash and
thousands of jobs cost a copy each. Folders: ``team-<t>/job-<n>/trace.json.gz``.
``synthetic_rows`` makes fleet-table rows directly (for the report at 100,000 rows).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SOURCES = (  # shared Kineto traces of 1-3 MB gzip
    "traces/kineto/hta-df_index_resolver-df_index_resolver.json.gz",
    "traces/kineto/hta-negative_queue_length_values_check-rank0.json.gz",
    "traces/kineto/hta-trace_diff-control-control.json.gz",
    "traces/kineto/kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz",
)
# reported name, memory bytes, SMs, compute capability
GPUS = (
    ("NVIDIA H100 80GB HBM3", 85_017_493_504, 132, (9, 0)),
    ("NVIDIA A100-SXM4-80GB", 85_198_045_184, 108, (8, 0)),
    ("NVIDIA A100-SXM4-40GB", 42_505_273_344, 108, (8, 0)),
    ("NVIDIA L4", 23_580_639_232, 58, (8, 9)),
    ("NVIDIA A10G", 23_609_475_072, 80, (8, 6)),
    ("NVIDIA L40S", 48_305_799_168, 142, (8, 9)),
    ("Tesla V100-SXM2-32GB", 34_089_730_048, 80, (7, 0)),
)
TEAMS = ("vision", "nlp", "recsys", "speech", "research")
SCALES = (0.5, 0.8, 1.0, 1.5, 2.0)
MEMORY_SCALES = (0.3, 0.6, 1.0, 1.4)


def _loads(data: bytes) -> Any:
    try:
        import orjson

        return orjson.loads(data)
    except ImportError:
        return json.loads(data)


def _dumps(obj: Any) -> bytes:
    try:
        import orjson

        return orjson.dumps(obj)
    except ImportError:
        return json.dumps(obj, separators=(",", ":")).encode()


def variant(source: bytes, rng: random.Random, day_shift_us: float) -> bytes:
    """One variant of a Kineto document (gzip member without its closing brace)."""
    doc = _loads(source)
    doc.pop("distributedInfo", None)
    scale, mem = rng.choice(SCALES), rng.choice(MEMORY_SCALES)
    name, memory, sms, (major, minor) = rng.choice(GPUS)
    for dev in doc.get("deviceProperties") or []:
        dev.update(name=name, totalGlobalMem=memory, numSms=sms, computeMajor=major,
                   computeMinor=minor)
    events = doc["traceEvents"]
    starts = [e["ts"] for e in events if isinstance(e.get("ts"), int | float) and e["ts"] > 0]
    t0 = min(starts) if starts else 0.0
    for e in events:
        ts = e.get("ts")
        if isinstance(ts, int | float) and ts > 0:
            e["ts"] = t0 + (ts - t0) * scale + day_shift_us
        if isinstance(e.get("dur"), int | float):
            e["dur"] = e["dur"] * scale
        args = e.get("args")
        if e.get("name") == "[memory]" and isinstance(args, dict):
            for k in ("Total Allocated", "Total Reserved", "Bytes"):
                if isinstance(args.get(k), int | float):
                    args[k] = int(args[k] * mem)
    body = _dumps(doc).rstrip()
    return gzip.compress(body[:-1], compresslevel=6, mtime=0)  # the object left open


def _closing(tag: str) -> bytes:
    return gzip.compress(f',"trace_id":"{tag}"}}\n'.encode(), mtime=0)


def make_corpus(out: Path, jobs: int, days: int = 14, variants: int = 24, seed: int = 31,
                runs_share: float = 0.0, shared: Path = SHARED,
                progress: bool = True) -> dict[str, Any]:
    """Write ``jobs`` jobs under ``out``; returns what was made."""
    rng = random.Random(seed)
    sources = [shared / s for s in SOURCES if (shared / s).is_file()]
    runs = sorted(p for p in (REPO / "samples" / "runs").iterdir() if (p / "manifest.json")
                  .is_file()) if runs_share > 0 else []
    if not sources:
        raise SystemExit(f"no source traces under {shared} (the shared data sits beside the "
                         "checkout)")
    now_us = datetime.now(UTC).timestamp() * 1e6
    start = time.perf_counter()
    made: list[tuple[bytes, int]] = []
    for i in range(variants):
        src = sources[i % len(sources)]
        raw = gzip.decompress(src.read_bytes())
        first = _first_ts_us(raw)
        day = rng.randrange(days)
        shift = (now_us - day * 86_400e6 - first) if first else 0.0
        made.append((variant(raw, rng, shift), src.stat().st_size))
        if progress:
            print(f"\rvariant {i + 1}/{variants}", end="", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    sizes = []
    n_runs = 0
    for n in range(jobs):
        folder = out / f"team-{TEAMS[n % len(TEAMS)]}" / f"job-{n:06d}"
        if runs and rng.random() < runs_share:
            run = runs[n % len(runs)]
            shutil.copytree(run, folder, ignore=shutil.ignore_patterns("*.html", "analysis.json"))
            manifest = json.loads((folder / "manifest.json").read_text())
            manifest["corpus_job"] = n
            (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
            n_runs += 1
            continue
        data, _ = made[n % len(made)]
        folder.mkdir(parents=True, exist_ok=True)
        body = data + _closing(f"corpus-{seed}-{n}")
        (folder / "trace.json.gz").write_bytes(body)
        sizes.append(len(body))
        if progress and n % 100 == 0:
            print(f"\rjobs {n + 1}/{jobs}", end="", file=sys.stderr)
    if progress:
        print(file=sys.stderr)
    return {"jobs": jobs, "trace_jobs": len(sizes), "run_jobs": n_runs,
            "trace_mb_min": min(sizes) / 1e6 if sizes else None,
            "trace_mb_max": max(sizes) / 1e6 if sizes else None,
            "trace_mb_mean": sum(sizes) / len(sizes) / 1e6 if sizes else None,
            "variants": variants, "seconds": time.perf_counter() - start}


def _first_ts_us(raw: bytes) -> float | None:
    import re

    events = raw.find(b'"traceEvents"')
    for m in re.finditer(rb'"ts"\s*:\s*([0-9][0-9.eE+]*)', raw[events: events + 1_000_000]):
        v = float(m.group(1))
        if v > 946_684_800e6:
            return v
    return None


def synthetic_rows(n: int, seed: int = 31, days: int = 60) -> list[dict[str, Any]]:
    """``n`` fleet-table rows of plausible values (for timing the report, not its figures)."""
    from rightsize.fleet.schema import COLUMNS, SHARES

    rng = random.Random(seed)
    end = datetime(2026, 11, 27, tzinfo=UTC)
    verdicts = ("over-provisioned", "right-sized", "under-provisioned", None)
    bounds = ("compute", "memory", "dataloader", "host", "pcie", "communication",
              "inconclusive")
    rules = ("dataloader-stall", "host-bound", "host-wait", "memory-bound-kernels",
             "pageable-copies", "exposed-communication", "fp32-without-tensor-cores")
    gpus = (("H100 SXM", 2.99), ("A100 80GB SXM", 1.79), ("L4", 0.8), ("A10G", 1.0))
    out = []
    for i in range(n):
        gpu, price = gpus[i % len(gpus)]
        verdict = verdicts[rng.randrange(len(verdicts))]
        step = rng.uniform(5, 500)
        per_1k = price * step / 3600
        saves = rng.uniform(20, 85) if verdict == "over-provisioned" else 0.0
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(
            key=f"{i:064x}", job=f"job-{i:06d}", kind="file",
            paths=[f"/data/team-{i % 7}/job-{i:06d}/trace.json.gz"], files=1, bytes=2_000_000,
            recorded_at=end - timedelta(seconds=rng.uniform(0, days * 86400)),
            recorded_at_source="trace", scanned_at=end, rightsize_version="bench",
            schema_version=1, status="ok" if i % 50 else "bad-input",
            reason=None if i % 50 else "the file is empty", team=f"team-{i % 7}",
            project=f"project-{i % 41}", labels_source="labels-file", device="gpu", gpu=gpu,
            gpu_reported=gpu, gpus=rng.choice((1, 1, 1, 8)), nodes=1, steps=rng.randrange(3, 50),
            step_ms=step, bound=rng.choice(bounds), confidence=rng.uniform(0.4, 0.95),
            gpu_util_pct=rng.uniform(5, 99), sm_efficiency_pct=rng.uniform(5, 90),
            peak_memory_bytes=rng.randrange(1, 80) * 2**30, precision="bf16",
            sizing_verdict=verdict, recommended_gpu="L4" if verdict else None,
            recommended_gpus=1 if verdict else None, sizing_reason="synthetic",
            objective="time", savings_pct=saves, usd_per_gpu_hour=price,
            usd_per_1k_steps=per_1k, recommended_step_ms=step,
            recommended_usd_per_1k_steps=per_1k * (1 - saves / 100),
            run_gpu_hours=rng.uniform(0.1, 40) if i % 3 == 0 else None,
            rules=[{"id": r, "title": f"fix {r}", "step_ms": step * 0.7, "step_ms_low": step * 0.5,
                    "step_ms_high": step * 0.9} for r in rng.sample(rules, rng.randrange(0, 3))],
            document=None, analysis_s=1.0)
        for s in SHARES:
            row[f"{s}_pct"] = 100 / len(SHARES)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--variants", type=int, default=24)
    ap.add_argument("--runs-share", type=float, default=0.0,
                    help="fraction of jobs that are copies of samples/runs directories")
    ap.add_argument("--seed", type=int, default=31)
    a = ap.parse_args()
    if a.out.exists() and any(a.out.iterdir()):
        raise SystemExit(f"{a.out} is not empty")
    print(json.dumps(make_corpus(a.out, a.jobs, a.days, a.variants, a.seed, a.runs_share),
                     indent=1))


if __name__ == "__main__":
    main()
