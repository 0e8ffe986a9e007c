"""What one analysis does with one run (runs in an engine worker: a spawned process that dies
with the server, :mod:`rightsize.engine_pool`).

Input: the run's directory and its inputs (blob path and display name each). Output:
``report.html``, ``summary.json`` (the compare page's values) then ``analysis.json`` in the run
directory, each written whole or not at all (a temporary file, fsync, rename; ``analysis.json``
last, so its presence means the run is complete and a restarted server adopts it), and a small
summary dict for the index (verdict, device, step time, seconds spent) or ``{"error": one
line}``.

:func:`analyze_task` is the engine task, :func:`init_worker` the worker's set-up. The analysis is
:func:`rightsize.pipeline.run` (in this process: the worker is the server's pool) and the page
:func:`rightsize.reports.render.write_report`, the same pipeline as ``rightsize analyze`` (the
page from the typed document read back from the JSON form, as ``rightsize report`` does); the
summary also says when the trace was recorded, by its own wall clock
(:func:`rightsize.fleet.analyze.wall_clock_start`), for the fleet row. The document's ``path``
values are the uploaded file names, not the server's blob paths.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError

ANALYSIS_JSON = "analysis.json"
REPORT_HTML = "report.html"
SUMMARY_JSON = "summary.json"  # the values the compare page shows: read without the document
TASKS_PER_WORKER = 20  # then the process exits and a fresh one replaces it (memory given back)
OUT_OF_MEMORY_ERROR = "out of memory in the analysis worker (see --worker-memory-mb)"
NO_SPACE_ERROR = ("no space left on the server's disk to store the results; "
                  "free some space and upload again")


def init_worker() -> None:
    """The worker's set-up (:class:`rightsize.engine_pool.WorkerPool` initializer, before its
    memory cap): import the analysis stack once. Importing first keeps the cap for the
    analysis: numpy's BLAS reserves its thread buffers at import and would fail there with a
    misleading error under a tight cap."""
    import numpy  # noqa: F401
    import polars  # noqa: F401
    import psutil  # noqa: F401 - the read plan asks it for the memory available

    import rightsize.analyzers.analysis
    import rightsize.reports.render
    import rightsize.traces.loader  # noqa: F401


def analyze_task(item: tuple[str, list[tuple[str, str]]]) -> dict[str, Any]:
    """The engine task: :func:`analyze_run` of ``(run_dir, inputs)``."""
    return analyze_run(*item)


def analyze_run(run_dir: str, inputs: list[tuple[str, str]]) -> dict[str, Any]:
    """Analyze one run; never raises for a bad input (the error is the summary)."""
    run = Path(run_dir)
    names = _link_inputs(run, inputs)
    start = time.perf_counter()
    try:
        from rightsize.analyzers.document import Document
        from rightsize.fleet.analyze import wall_clock_start
        from rightsize.pipeline import HERE
        from rightsize.pipeline import run as analyze
        from rightsize.reports.render import render

        result = analyze(list(names), run_on=HERE)  # this worker is the server's pool
        recorded = wall_clock_start(result.first_event_ns)  # the fleet row's day (fleet.py)
        doc = result.document.to_json()
        _rename_paths(doc, names)
        page = render(Document.from_json(doc), "html")
        write_atomic(run / REPORT_HTML, page)
        write_atomic(run / SUMMARY_JSON, json.dumps(compare_summary(doc)) + "\n")
        write_atomic(run / ANALYSIS_JSON, json.dumps(doc, indent=2, allow_nan=False) + "\n")
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return {"error": NO_SPACE_ERROR}
        return {"error": _one_line(f"cannot write the results: {exc.strerror or exc}")}
    except RightsizeError as exc:
        return {"error": _one_line(_rename_text(str(exc), names))}
    except MemoryError:
        return {"error": OUT_OF_MEMORY_ERROR}
    except ImportError as exc:  # a module first loaded under the cap: its mmap refused
        if "failed to map segment" in str(exc) or "cannot allocate memory" in str(exc).lower():
            return {"error": OUT_OF_MEMORY_ERROR}
        return {"error": _one_line(f"internal error: ImportError: {exc}")}
    except Exception as exc:  # noqa: BLE001 - a bug, not bad input: one line for the run page
        return {"error": _one_line(f"internal error: {type(exc).__name__}: "
                                   f"{_rename_text(str(exc), names)}")}
    finally:
        for link in names:
            Path(link).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (run / "inputs").rmdir()  # the links were only for the readers
    return {**summarize(doc), "analysis_s": round(time.perf_counter() - start, 3),
            "recorded_at": recorded.timestamp() if recorded is not None else None}


def compare_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The values the compare page reads (``compare.compare_rows``), from a whole document."""
    devices = doc.get("devices") or []
    primary = [d for d in devices if isinstance(d, dict) and d.get("primary")] or devices[:1]
    steps, diagnosis, sizing = (doc.get(k) or {} for k in ("steps", "diagnosis", "sizing"))
    return {
        "devices": [{"name": d.get("name"), "primary": True} for d in primary],
        "inputs": [{"format": i.get("format")} for i in doc.get("inputs") or []
                   if isinstance(i, dict)],
        "steps": {"mean_ms": steps.get("mean_ms"), "count": steps.get("count")},
        "diagnosis": {k: diagnosis.get(k) for k in ("bound", "confidence", "shares_pct")},
        "sizing": {k: sizing.get(k) for k in ("verdict", "recommended")} if sizing else None,
    }


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """The index columns of a finished analysis document."""
    diagnosis = doc.get("diagnosis") or {}
    sizing = doc.get("sizing") or {}
    return {"verdict": diagnosis.get("bound"), "sizing": sizing.get("verdict"),
            "device": primary_device(doc), "step_ms": (doc.get("steps") or {}).get("mean_ms")}


def primary_device(doc: dict[str, Any]) -> str | None:
    """The primary device's name, ``GPU`` when the trace does not name it, ``CPU`` for a
    trace without a GPU, None (unknown) when no input is a trace (an nvidia-smi/DCGM log or
    an ncu CSV alone: the document has no device list then)."""
    devices = doc.get("devices") or []
    primary = [d for d in devices if d.get("primary")] or devices
    if primary:
        return str(primary[0].get("name") or "GPU")
    inputs = [i for i in doc.get("inputs") or [] if isinstance(i, dict)]
    traces = [i for i in inputs if "rank" in i]  # a trace's entry says its rank (maybe null)
    return None if inputs and not traces else "CPU"


def _link_inputs(run: Path, inputs: list[tuple[str, str]]) -> dict[str, str]:
    """Give the analysis its own view of the blobs: ``input-N`` links in the run directory.

    Names are generated here (the readers detect formats from content); returns link -> the
    uploaded name, for error messages and the document.
    """
    folder = run / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for i, (blob, name) in enumerate(inputs):
        link = folder / f"input-{i}"
        link.unlink(missing_ok=True)
        try:
            os.link(blob, link)
        except OSError:
            link.symlink_to(Path(blob).resolve())
        names[str(link)] = name
    return names


def _rename_paths(doc: dict[str, Any], names: dict[str, str]) -> None:
    for key in ("inputs", "ranks"):
        for item in doc.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                item["path"] = _rename_text(item["path"], names)


def _rename_text(text: str, names: dict[str, str]) -> str:
    for link, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(link, name)
    return text


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def write_atomic(path: Path, text: str) -> None:
    """``text`` to ``path`` whole or not at all: a temporary file beside it, fsync, rename.
    A failure (a full disk) removes the temporary file and raises the OSError."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
