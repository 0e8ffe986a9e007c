"""Find a fleet's inputs and group them into jobs.

Input: paths as the user typed them (files, folders, glob patterns; ``**`` crosses folders).
Output: :class:`Found`: the jobs, each with the files its content key covers, and how many files
under the folders were not input names.

A job is one of:

* ``run``: a run directory (``manifest.json``), never descended into; an on-demand one is its
  captures (``captures/<id>/``, each a run directory of its own, docs/captures.md);
* ``ranks``: Kineto traces in one folder whose ``distributedInfo`` say they are ranks of one job
  (same world size and backend, distinct ranks). This module groups them itself from each
  trace's head: ``rightsize.analyzers.job`` checks summaries made after reading, and the loader
  refuses traces that are not one job; neither groups a folder of files. A folder where a rank
  appears twice (two recordings) has each file analyzed alone, and the group says why;
* ``file``: any other input file, named ``folder/file``.

Under a folder, files are inputs by name (the suffixes the readers declare), and ``.txt``/``.log``
files whose head a reader knows (an nvidia-smi, DCGM or nccl-tests log); a ``.json`` that is a whole JSON document
without ``traceEvents`` (a model config, a list of pairs) is not a trace, nor a whole CSV table
that is no GPU log or Nsight Compute export (a demand curve). Others are counted,
by why (:data:`LEFT_OUT`), and left out. A file named on the command line is always an input. What a file is (its reader, its
rank) comes from :func:`probe`, which reads its head only.
"""

from __future__ import annotations

import csv
import functools
import glob
import gzip
import io
import json
import os
import posixpath
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from rightsize import rundir
from rightsize.errors import RightsizeError

if TYPE_CHECKING:
    from rightsize.traces.readers import JobHead

# Why a file under a folder was left out, as the scan says it.
LEFT_OUT = {
    "name": "files of other names (inputs: .json, .json.gz, .sqlite, .csv, .prom, and .txt/.log"
            " GPU metrics or nccl-tests logs)",
    "json": "JSON documents that are not traces (no traceEvents: model configs, lists)",
    "text": "text files that are no nvidia-smi, DCGM or nccl-tests log",
    "csv": "CSV tables that are no nvidia-smi, DCGM or Nsight Compute export",
}
HEAD_BYTES = 256 * 1024  # what a reader's job_head reads (Kineto: distributedInfo, early)
_RUN_INPUTS = ("manifest.json", rundir.TRACES_DIR, "samples")  # what a run's key covers
SAME_JOB_S = 600.0  # ranks of one job start recording within this of each other
_GLOB = re.compile(r"[*?\[]")


class DiscoverError(RightsizeError):
    """A path that names nothing to scan."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What a file's head says: its reader and, when its format's head says, its rank."""

    reader: str | None  # None: not a supported input (``problem`` says why)
    problem: str | None = None
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    devices: str | None = None  # the device names, when the head has them
    start_us: float | None = None  # the first wall-clock event time in the head (epoch us)


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    kind: str  # run | ranks | file
    paths: tuple[str, ...]  # what the analysis reads
    files: tuple[str, ...]  # what the content key covers
    note: str | None = None  # how the grouping decided, when it had to choose


@dataclass(slots=True)
class Found:
    jobs: list[Job] = field(default_factory=list)
    not_inputs: int = 0  # files under folders whose names are not input names


def probe(path: Path) -> Probe:
    """The reader of ``path`` (by content, as the loader detects it) and what its head says of
    the job it is a rank of (``Reader.job_head``)."""
    from rightsize.traces.loader import detect

    try:
        reader = detect(path)
    except RightsizeError as exc:
        return Probe(None, problem=str(exc))
    said = reader.job_head(_head(path))
    return Probe(reader.name) if said is None else _probe(reader.name, said)


def probe_head(head: bytes) -> Probe:
    """What a file's head alone says (an object-store file, before it is downloaded): the
    reader whose format's head names a job, and what it says; ``Probe(None)`` otherwise."""
    from rightsize.traces.registry import job_head

    found = job_head(head)
    return Probe(None) if found is None else _probe(*found)


def _probe(reader: str, said: JobHead) -> Probe:
    return Probe(reader, rank=said.rank, world_size=said.world_size, backend=said.backend,
                 devices=said.devices, start_us=said.start_us)


def first_wall_clock_us(path: Path) -> float | None:
    """The first wall-clock event time (epoch us) that a file's head names, or None (a
    format whose head does not say, a relative clock, an unreadable file)."""
    return probe_head(_head(path)).start_us


def _head(path: Path) -> bytes:
    """The file's first :data:`HEAD_BYTES` (inflated when gzip; empty when unreadable: the
    analysis reports the file's problem in its own words)."""
    try:
        with path.open("rb") as fh:
            return head_of(fh)
    except OSError:
        return b""


def head_of(fh: BinaryIO) -> bytes:
    """The first :data:`HEAD_BYTES` of an open binary file, inflated when it is gzip (empty
    when it cannot be read)."""
    try:
        magic = fh.read(2)
        fh.seek(0)
        if magic == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=fh) as gz:
                return gz.read(HEAD_BYTES)
        return fh.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return b""


def expand(paths: Iterable[str]) -> list[Path]:
    """Each path, or what a glob pattern matches (sorted); a path that names nothing is an
    error before anything is scanned."""
    out: list[Path] = []
    for p in paths:
        if os.path.lexists(p):
            out.append(Path(p))
            continue
        if _GLOB.search(p):
            matched = sorted(glob.glob(p, recursive=True))
            if not matched:
                raise DiscoverError(f"{p}: the pattern matches nothing")
            out.extend(Path(m) for m in matched)
            continue
        raise DiscoverError(f"{p}: no such file or directory")
    return out


def run_files(run_dir: Path) -> tuple[str, ...]:
    """The files a run directory's key covers: its manifest, traces and samples (not the
    reports rightsize writes into it, which change without the run changing)."""
    files = [run_dir / "manifest.json"]
    for sub in _RUN_INPUTS[1:]:
        base = run_dir / sub
        if base.is_dir():
            files += sorted(f for f in base.rglob("*") if f.is_file())
    return tuple(str(f.absolute()) for f in files)


def is_input_name(name: str, head: Callable[[], bytes] | None = None) -> bool:
    """Whether a file under a folder is an input (:func:`why_not_input`)."""
    return why_not_input(name, head) is None


def why_not_input(name: str, head: Callable[[], bytes] | None = None) -> str | None:
    """Why a file under a folder is not an input (a key of :data:`LEFT_OUT`), or None: by its
    name; a ``.txt``/``.log`` file by its head (``head``: reads it) unless that is an
    nvidia-smi, DCGM or nccl-tests log (``nvidia-smi --query-gpu ... > gpu.txt``,
    ``all_reduce_perf ... > nccl.log``); a ``.json`` that is a whole JSON document in its head
    without ``traceEvents``. A damaged trace (empty, cut, not JSON) is still an input: its
    row says what is wrong with it."""
    from rightsize.traces.registry import BY_HEAD_SUFFIXES, input_suffixes
    from rightsize.traces.registry import is_input_name as by_readers

    lower = name.lower()
    if lower.endswith(BY_HEAD_SUFFIXES):
        return None if by_readers(name, head) else "text"
    if not lower.endswith(input_suffixes()):
        return "name"
    if lower.endswith(".json") and head is not None and _other_json(head()):
        return "json"
    if lower.endswith(".csv") and head is not None and _other_csv(head()):
        return "csv"
    return None


def _other_csv(head: bytes) -> bool:
    """A whole, well-formed CSV table (a demand curve, a label list) whose header is neither
    an Nsight Compute export nor a GPU metrics log."""
    from rightsize.traces.metrics_logs import looks_like_metrics_log
    from rightsize.traces.ncu import looks_like_ncu

    if len(head) >= HEAD_BYTES or looks_like_ncu(head) or looks_like_metrics_log(head.lstrip()):
        return False
    try:
        rows = [r for r in csv.reader(io.StringIO(head.decode("utf-8"))) if r]
    except (UnicodeDecodeError, csv.Error):
        return False  # not text: a damaged input, reported as such
    return bool(rows) and len(rows[0]) >= 2 and all(len(r) == len(rows[0]) for r in rows)


def _other_json(head: bytes) -> bool:
    """A whole JSON document (shorter than the head) that carries no ``traceEvents``."""
    if len(head) >= HEAD_BYTES or b'"traceEvents"' in head:
        return False
    try:
        json.loads(head)
    except ValueError:
        return False  # cut or not JSON: a damaged input, reported as such
    return True



def walk(paths: Iterable[str]) -> tuple[list[Path], list[Path], Counter[str]]:
    """Run directories and input files under ``paths`` (each once), and the files left out
    by why (:data:`LEFT_OUT`)."""
    runs: dict[str, Path] = {}
    files: dict[str, Path] = {}
    left_out: Counter[str] = Counter()
    for top in expand(paths):
        if top.is_dir():
            if rundir.is_run_dir(top):
                for run in _recordings(top):
                    runs.setdefault(os.path.realpath(run), run.absolute())
                continue
            for folder, dirs, names in os.walk(top):
                here = Path(folder)
                keep = []
                for d in sorted(dirs):
                    if rundir.is_run_dir(here / d):
                        for run in _recordings(here / d):
                            runs.setdefault(os.path.realpath(run), run.absolute())
                    elif not d.startswith("."):
                        keep.append(d)
                dirs[:] = keep  # run directories and hidden folders are not walked into
                for n in sorted(names):
                    f = here / n
                    why = "name" if n.startswith(".") or not f.is_file() else \
                        why_not_input(n, functools.partial(_head, f))
                    if why is not None:
                        left_out[why] += 1
                        continue
                    files.setdefault(os.path.realpath(f), f.absolute())
        elif not top.exists():
            raise DiscoverError(f"{top}: no such file or directory (a broken link)")
        elif not top.is_file():
            raise DiscoverError(f"{top}: not a regular file (a pipe, device or socket)")
        else:
            files.setdefault(os.path.realpath(top), top.absolute())
    return list(runs.values()), list(files.values()), left_out


def _recordings(run_dir: Path) -> list[Path]:
    """A run directory, or the captures of an on-demand one (``captures/<id>/``, each a run
    directory of its own; the on-demand run itself holds no trace)."""
    return rundir.capture_dirs(run_dir) or [run_dir]


def file_job(f: str | Path, note: str | None = None) -> Job:
    """A job of one file, named ``folder/file`` (a fleet's files often share a name)."""
    name = str(f)
    return Job(f"{posixpath.basename(posixpath.dirname(name))}/{posixpath.basename(name)}",
               "file", (name,), (name,), note)


def group(runs: list[Path], files: Sequence[str | Path],
          probe_of: Callable[[str], Probe]) -> list[Job]:
    """Jobs: each run directory, the ranks of one job per folder, each other file."""
    jobs = [Job(r.name, "run", (str(r),), run_files(r)) for r in runs]
    return jobs + group_files([str(f) for f in files], probe_of)


def group_files(files: list[str], probe_of: Callable[[str], Probe]) -> list[Job]:
    """The ranks of one job per folder, and each other file alone. ``files`` are local paths
    or object-store URLs (``scheme://bucket/folder/file``): folders are what precedes the last
    ``/`` either way."""
    jobs = []
    ranked: dict[tuple[str, int, str | None, str | None], list[tuple[Probe, str]]] = \
        defaultdict(list)
    for f in files:
        pr = probe_of(f)
        if pr.rank is not None and pr.world_size is not None and pr.world_size > 1:
            ranked[(posixpath.dirname(f), pr.world_size, pr.backend, pr.devices)].append((pr, f))
        else:
            jobs.append(file_job(f))
    for (folder, world, _, _), members in ranked.items():
        for cluster in _by_time(members):
            jobs += _rank_job(folder, world, cluster)
    return jobs


def _by_time(members: list[tuple[Probe, str]]) -> list[list[tuple[Probe, str]]]:
    """Traces of one folder, world size, backend and device split into recordings: ranks of
    one job start within :data:`SAME_JOB_S` of the first one (a trace without a wall-clock
    start joins the others without one)."""
    timed = sorted((m for m in members if m[0].start_us is not None),
                   key=lambda m: (m[0].start_us or 0.0, str(m[1])))
    clusters: list[list[tuple[Probe, str]]] = []
    for m in timed:
        if clusters and (m[0].start_us or 0.0) - (clusters[-1][0][0].start_us or 0.0) \
                <= SAME_JOB_S * 1e6:
            clusters[-1].append(m)
        else:
            clusters.append([m])
    untimed = [m for m in members if m[0].start_us is None]
    return clusters + ([untimed] if untimed else [])


def _rank_job(folder: str, world: int, members: list[tuple[Probe, str]]) -> list[Job]:
    members = sorted(members, key=lambda m: (m[0].rank or 0, str(m[1])))
    ranks = [pr.rank for pr, _ in members]
    if len(members) == 1:
        f = members[0][1]
        return [file_job(f)]
    if len(set(ranks)) < len(ranks):
        dup = next(r for r in ranks if ranks.count(r) > 1)
        note = (f"rank {dup} of world size {world} appears twice in {folder} in one recording: "
                "its traces are analyzed one at a time")
        return [file_job(f, note) for _, f in members]
    paths = tuple(str(f) for _, f in members)
    return [Job(posixpath.basename(folder), "ranks", paths, paths)]
