"""Object-store inputs of a fleet scan: URLs listed, keyed and fetched through fsspec.

fsspec is an optional extra (``pip install 'rightsize[fsspec]'``); the store's own package is
the user's (``s3fs`` for ``s3://``, ``gcsfs`` for ``gs://``, ``adlfs`` for ``az://``), found by
fsspec's registry; ``memory://`` and ``file://`` need nothing more. Credentials and timeouts
are the store package's own (its environment variables and config files).

Input: URLs as the user typed them (``scheme://bucket/folder``, a file, or a glob pattern;
``**`` crosses folders). Output: :class:`Listing`: run directories (a folder holding a
``manifest.json``: its manifest, ``traces/`` and ``samples/``) and input files (by name, as
under a local folder; a file named itself is always one), each with its size, ETag and
modification time as the listing gave them, under canonical URLs (``fs.unstrip_protocol``).

Keys (:class:`RemoteFiles`, a :class:`~rightsize.fleet.keys.Digests`): a file's digest comes
from the listing when the store gives an ETag (with the URL and size) or else a modification
time (with the URL and size), so a re-scan reads nothing; a store that gives neither has the
file's bytes hashed, every scan. Kineto traces have their first 256 kB read once (their rank,
for grouping), cached in the table's file cache by URL while the digest holds.

In the worker, :func:`fetch` downloads one job's files into a temporary folder (at most
``max_bytes`` in all, counted as they arrive, never outside that folder), which the caller
removes when the job's analysis is done; folders of workers that were killed are swept.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError
from rightsize.fleet.discover import Job, Probe, head_of, is_input_name, probe_head
from rightsize.fleet.keys import CHUNK, FileCache, probe_of_row

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_GLOB = re.compile(r"[*?\[]")
_RUN_PARTS = ("traces", "samples")  # with manifest.json: what a run's key covers
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")
TMP_PREFIX = "rightsize-fleet-"
EXTRA_HINT = ("pip install 'rightsize[fsspec]' (and the store's package: s3fs for s3://, "
              "gcsfs for gs://)")


class RemoteError(RightsizeError):
    """A URL that cannot be listed or read (fsspec or the store's package missing, nothing
    there, a refusal), or a job over the download cap."""


def is_url(path: str) -> bool:
    return URL.match(path) is not None


@dataclass(frozen=True, slots=True)
class RemoteFile:
    url: str
    size: int
    mtime_ns: int | None  # the store's modification time, when the listing gives one
    etag: str | None


@dataclass(frozen=True, slots=True)
class RemoteJob:
    """What the worker needs beyond the job's URLs: the listing's sizes and times, the cap."""

    sizes: tuple[int, ...]  # the job's files, in ``job.files`` order
    mtime_ns: int | None  # the newest file's modification time in the store
    max_bytes: int


@dataclass(slots=True)
class Listing:
    runs: list[tuple[str, list[RemoteFile]]] = field(default_factory=list)  # (run URL, files)
    files: list[RemoteFile] = field(default_factory=list)
    not_inputs: int = 0


def filesystem(url: str) -> tuple[Any, str]:
    """fsspec's filesystem for ``url`` and the path in it; one line when fsspec or the
    protocol's package is missing or the protocol is unknown."""
    try:
        import fsspec
    except ImportError:
        raise RemoteError(f"{url}: object-store URLs need fsspec: {EXTRA_HINT}") from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:  # fsspec's registry names the package: "Install s3fs to ..."
        raise RemoteError(f"{url}: {_line(exc)}") from None
    except ValueError as exc:  # "Protocol not known: xyz"
        raise RemoteError(f"{url}: {_line(exc)}") from None
    return fs, str(path)


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _mtime_ns(info: dict[str, Any]) -> int | None:
    for k in _MTIME_KEYS:
        v = info.get(k)
        if isinstance(v, datetime):
            return int(v.timestamp() * 1e9)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return int(v * 1e9)
        if isinstance(v, str):
            with contextlib.suppress(ValueError):
                return int(datetime.fromisoformat(v).timestamp() * 1e9)
    return None


def _etag(info: dict[str, Any]) -> str | None:
    for k, v in info.items():
        if k.lower() in ("etag", "e_tag") and isinstance(v, str) and v.strip('"'):
            return v.strip('"')
    return None


def _file(fs: Any, path: str, info: dict[str, Any]) -> RemoteFile:
    size = info.get("size")
    return RemoteFile(fs.unstrip_protocol(path), int(size) if isinstance(size, int) else 0,
                      _mtime_ns(info), _etag(info))


def listing(urls: Iterable[str]) -> Listing:
    """Run directories and input files under ``urls`` (each once); a URL that names nothing
    stops the scan before it starts, in one line."""
    out = Listing()
    seen: set[str] = set()
    for url in urls:
        fs, path = filesystem(url)
        try:
            if _GLOB.search(path):
                entries = dict(fs.glob(path, detail=True))
                if not entries:
                    raise RemoteError(f"{url}: the pattern matches nothing")
            else:
                try:
                    entries = {path: fs.info(path)}
                except FileNotFoundError:
                    raise RemoteError(f"{url}: no such file or folder") from None
            for p, info in sorted(entries.items()):
                if info.get("type") == "directory":
                    _walk(fs, p, dict(fs.find(p, detail=True, withdirs=False)), out, seen)
                elif (u := fs.unstrip_protocol(p)) not in seen:
                    seen.add(u)
                    out.files.append(_file(fs, p, info))
        except RemoteError:
            raise
        except Exception as exc:  # noqa: BLE001 - the store's refusal, in one line
            raise RemoteError(f"{url}: cannot list it: {type(exc).__name__}: {_line(exc)}"
                              ) from None
    return out


def _walk(fs: Any, top: str, found: dict[str, dict[str, Any]], out: Listing,
          seen: set[str]) -> None:
    """A folder's files: run directories (any folder holding a manifest.json, not looked
    into beyond its run's parts), input names, hidden files and folders left out."""
    top = top.rstrip("/")
    names = {p: p[len(top) + 1:] for p in found if p.startswith(top + "/")}
    runs = sorted({posixpath.dirname(p) for p, rel in names.items()
                   if posixpath.basename(rel) == "manifest.json"
                   and not _hidden(posixpath.dirname(rel))}, key=len)
    roots: list[str] = []
    for r in runs:
        if not any(r.startswith(o + "/") for o in roots):  # a run inside a run: its files
            roots.append(r)
    members: dict[str, list[RemoteFile]] = {r: [] for r in roots}
    for p, rel in sorted(names.items()):
        root = next((r for r in roots if p.startswith(r + "/")), None)
        if root is not None:
            inner = p[len(root) + 1:]
            if inner == "manifest.json" or inner.split("/", 1)[0] in _RUN_PARTS:
                members[root].append(_file(fs, p, found[p]))
            continue
        if _hidden(rel) or not is_input_name(posixpath.basename(rel), _remote_head(fs, p)):
            out.not_inputs += 1
            continue
        f = _file(fs, p, found[p])
        if f.url not in seen:
            seen.add(f.url)
            out.files.append(f)
    for r in roots:
        url = fs.unstrip_protocol(r)
        if url not in seen:
            seen.add(url)
            out.runs.append((url, members[r]))


def _remote_head(fs: Any, path: str) -> Any:
    """A reader of an object's head, for the names only a head decides (``.txt`` logs)."""
    def read() -> bytes:
        try:
            with fs.open(path, "rb") as fh:
                return head_of(fh)
        except (OSError, ValueError):
            return b""
    return read


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/") if part)


def run_job(url: str, files: list[RemoteFile]) -> Job:
    return Job(posixpath.basename(url.rstrip("/")), "run", (url,),
               tuple(f.url for f in sorted(files, key=lambda f: f.url)))


class RemoteFiles:
    """Digests and probes of listed files (see the module docstring); ``read`` counts the
    files whose bytes were read this time."""

    def __init__(self, files: Iterable[RemoteFile], cache: FileCache) -> None:
        self.files = {f.url: f for f in files}
        self.cache = cache
        self.read = 0
        self._digests: dict[str, str] = {}

    def digest(self, url: str) -> str:
        if url not in self._digests:
            self._digests[url] = self._digest(self.files[url])
        return self._digests[url]

    def _digest(self, f: RemoteFile) -> str:
        if f.etag is not None:
            return _sha(f"rightsize-remote\0etag\0{f.url}\0{f.size}\0{f.etag}")
        if f.mtime_ns is not None:
            return _sha(f"rightsize-remote\0mtime\0{f.url}\0{f.size}\0{f.mtime_ns}")
        fs, path = filesystem(f.url)
        h = hashlib.sha256()
        self.read += 1
        try:
            with fs.open(path, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    h.update(chunk)
        except Exception as exc:  # noqa: BLE001 - an unreadable file is a row, not a stop
            return _sha(f"rightsize-remote\0unreadable\0{f.url}\0{type(exc).__name__}")
        return h.hexdigest()

    def probe(self, url: str) -> Probe:
        """A trace's rank as its head says (read once per digest); nothing for files not
        named as traces (``registry.trace_suffixes``)."""
        from rightsize.traces.registry import trace_suffixes

        f = self.files[url]
        name = posixpath.basename(url).lower()
        if not name.endswith(trace_suffixes()):
            return Probe(None)
        digest = self.digest(url)
        row = self.cache.get(url)
        if row is not None and row.get("sha256") == digest and row.get("size") == f.size:
            return probe_of_row(row)
        fs, path = filesystem(url)
        self.read += 1
        try:
            with fs.open(path, "rb") as fh:
                head = head_of(fh)
        except Exception:  # noqa: BLE001 - unreadable: its analysis says why, as a row
            head = b""
        pr = probe_head(head)
        self.cache.put(FileCache.row(url, f.size, f.mtime_ns or -1, digest, pr))
        return pr


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def remote_job(job: Job, files: dict[str, RemoteFile], max_bytes: int) -> RemoteJob:
    listed = [files[u] for u in job.files]
    stamps = [f.mtime_ns for f in listed if f.mtime_ns is not None]
    return RemoteJob(tuple(f.size for f in listed), max(stamps) if stamps else None, max_bytes)


# --- in the worker ----------------------------------------------------------------------------

def fetch(job: Job, remote: RemoteJob, dest: Path) -> tuple[Job, list[tuple[str, str]]]:
    """Download ``job``'s files under ``dest``: the same job on local paths, and the
    (local, URL) prefixes that turn one into the other. :class:`RemoteError` for a job over
    its cap (as listed, or as it arrives) or a name that would leave ``dest``."""
    total = sum(remote.sizes)
    if total > remote.max_bytes:
        raise RemoteError(f"{job.paths[0]}: the job's files are {_mb(total)}, over the "
                          f"download cap of {_mb(remote.max_bytes)} (--max-download-mb)")
    free = shutil.disk_usage(dest).free
    if free < total:
        raise OSError(errno.ENOSPC, f"{_mb(free)} free in {dest.parent} for a job of "
                                    f"{_mb(total)}")
    budget = [remote.max_bytes]
    if job.kind == "run":
        root = job.paths[0].rstrip("/")
        local_root = dest / _safe_name(posixpath.basename(root))
        local_files = []
        for url in job.files:
            rel = url[len(root) + 1:] if url.startswith(root + "/") else ""
            parts = rel.split("/")
            if not rel or any(p in ("", ".", "..") for p in parts):
                raise RemoteError(f"{url}: not a plain path inside its run directory {root}")
            target = local_root.joinpath(*parts)
            _download(url, target, budget)
            local_files.append(str(target))
        local = Job(job.name, "run", (str(local_root),), tuple(local_files), job.note)
        return local, [(str(local_root), root)]
    renames = []
    local_paths = []
    for i, url in enumerate(job.files):
        target = dest / str(i) / _safe_name(posixpath.basename(url))
        _download(url, target, budget)
        local_paths.append(str(target))
        renames.append((str(target), url))
    paths = tuple(local_paths)
    return Job(job.name, job.kind, paths, paths, job.note), renames


def _download(url: str, target: Path, budget: list[int]) -> None:
    fs, path = filesystem(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with fs.open(path, "rb") as src, open(target, "wb") as out:
            while chunk := src.read(CHUNK):
                budget[0] -= len(chunk)
                if budget[0] < 0:
                    raise RemoteError(f"{url}: more bytes arrived than the download cap "
                                      "allows (the file grew since it was listed?)")
                out.write(chunk)
    except FileNotFoundError:
        raise RemoteError(f"{url}: gone since it was listed") from None


def _safe_name(name: str) -> str:
    return name if name not in ("", ".", "..") and "/" not in name else "input"


def _mb(n: int) -> str:
    return f"{n:,} bytes" if n < 1 << 20 else f"{n / (1 << 20):,.1f} MiB"


def tmp_folder() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for one job's files, named by this process's pid; folders of
    processes that are gone (a worker killed mid-download) are removed first."""
    base = Path(tempfile.gettempdir())
    for old in base.glob(f"{TMP_PREFIX}*-*"):
        pid = old.name[len(TMP_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: not ours to judge
    return True


def relabel(text: str, renames: list[tuple[str, str]], json_text: bool = False) -> str:
    """``text`` with each local prefix replaced by its URL (longest first); ``json_text``:
    as they are written inside JSON strings."""
    import json

    for local, url in sorted(renames, key=lambda r: -len(r[0])):
        if json_text:
            text = text.replace(json.dumps(local)[1:-1], json.dumps(url)[1:-1])
        else:
            text = text.replace(local, url)
    return text
