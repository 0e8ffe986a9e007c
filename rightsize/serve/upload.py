"""Receive a multipart upload straight from the request stream into the blob store.

Input: the ASGI request body (``multipart/form-data``, one or more ``file`` fields). Output:
one :class:`Received` per file, stored content-addressed under ``blobs/``. Nothing is held in
memory beyond one network chunk: each part is written to a temporary file as it arrives, hashed
(SHA-256) while writing, and checked against the cap on every chunk, so an oversized upload is
refused (:class:`TooLarge`, HTTP 413) as soon as the cap is passed, its partial file removed.

Once a part is whole its hash is known: a file stored before (the index knows what it inflates
to) is not inflated again; a new one is checked by :class:`Checks` off the event loop, on a
small thread pool with a CPU budget per upload (:mod:`.gzipcheck`: gzip parsed exactly as the
readers parse it, the inflated bytes counted against the same cap), and only then moved into
the blob store. Client file names are kept as display text only; they never become paths.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import secrets
import unicodedata
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header

from rightsize.serve.gzipcheck import TooLarge, UploadRefused, check_file
from rightsize.serve.store import blob_path

FIELD = "file"
MAX_NAME_CHARS = 200
# Blob hashes of uploads still in flight in this process: a refused upload removes the blobs
# it created only when no other request is about to use them.
_IN_FLIGHT: Counter[str] = Counter()


class Unsupported(UploadRefused):
    status = 415


class NoSpace(UploadRefused):
    """The data directory's file system is full (ENOSPC, or a quota: EDQUOT)."""

    status = 507


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def no_space(where: Path) -> NoSpace:
    return NoSpace(f"no space left on the device of {where.name}/ for this upload; "
                   "free some space or delete runs")


@dataclass(frozen=True, slots=True)
class Received:
    name: str  # display only
    sha256: str
    bytes: int
    path: Path  # the blob
    created: bool  # this upload stored the content (it was not there before)
    inflated: int = 0  # what the readers parse: the gzip data inflated, else ``bytes``


@dataclass(frozen=True, slots=True)
class _Spooled:
    """A part received whole into ``tmp/``, hashed, not yet checked or stored."""

    name: str
    sha256: str
    bytes: int
    path: Path


class Checks:
    """The threads uploads use, so the event loop never waits on a file or a check: the
    inflate checks of new files (at most ``threads`` at once, more uploads wait their turn,
    each within ``cpu_budget_s`` of CPU; two uploads of the same new file share one check),
    and ``io``, the threads that write parts and move them into the blob store."""

    def __init__(self, limit_bytes: int, cpu_budget_s: float | None, threads: int = 2) -> None:
        self.limit_bytes, self.cpu_budget_s = limit_bytes, cpu_budget_s
        self._pool = ThreadPoolExecutor(max_workers=threads,
                                        thread_name_prefix="rightsize-upload-check")
        self.io = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rightsize-upload-io")
        self._running: dict[str, asyncio.Future[int]] = {}

    async def inflated(self, part: _Spooled, known: int | None) -> int:
        """What the readers will parse of ``part``: ``known`` (the same file was stored and
        checked before; its hash says so, nothing is inflated) or checked now."""
        if known is not None:
            if known > self.limit_bytes:
                raise TooLarge(f"{part.name}: gzip data decompresses to more than the "
                               f"{_mib(self.limit_bytes)} cap")
            return known
        future = self._running.get(part.sha256)
        if future is None:
            future = asyncio.get_running_loop().run_in_executor(
                self._pool, check_file, part.path, self.limit_bytes, self.cpu_budget_s,
                part.name)
            self._running[part.sha256] = future
            future.add_done_callback(lambda _: self._running.pop(part.sha256, None))
        return await asyncio.shield(future)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.io.shutdown(wait=True)


def display_name(raw: str) -> str:
    """A client's file name made safe to show: last path component, no control characters."""
    base = raw.replace("\\", "/").rsplit("/", 1)[-1]
    clean = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip()
    return clean[:MAX_NAME_CHARS] or "upload"


class _Part:
    """One file part: the bytes the parser hands over are kept until :meth:`flush`, which
    hashes and writes them to a temporary file on an I/O thread (a write can wait for the
    disk: never on the event loop)."""

    def __init__(self, tmp_dir: Path, name: str, limit_bytes: int) -> None:
        self.name = name
        self.limit_bytes = limit_bytes
        self.path = tmp_dir / f"{secrets.token_hex(8)}.part"
        self.fh: IO[bytes] | None = None
        self.sha = hashlib.sha256()
        self.size = 0
        self.pending: list[bytes] = []  # at most one network chunk's worth
        self.ended = False

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit_bytes:
            raise TooLarge(f"{self.name} is larger than the {_mib(self.limit_bytes)} upload cap")
        self.pending.append(bytes(data))

    def flush(self) -> None:
        """Hash and write what is pending (on an I/O thread); close the file at the end."""
        if self.fh is None:
            self.fh = open(self.path, "xb")  # noqa: SIM115 - closed here or in abort
        for data in self.pending:
            self.sha.update(data)
            self.fh.write(data)
        self.pending = []
        if self.ended:
            self.fh.close()

    def spooled(self) -> _Spooled:
        """The whole part, hashed (on the event loop, after its last flush)."""
        if self.size == 0:
            raise UploadRefused(f"{self.name} is empty")
        digest = self.sha.hexdigest()
        _IN_FLIGHT[digest] += 1  # from now on a DELETE keeps a stored blob of this content
        return _Spooled(self.name, digest, self.size, self.path)

    def abort(self) -> None:
        if self.fh is not None:
            self.fh.close()
        self.path.unlink(missing_ok=True)


def _store(part: _Spooled, inflated: int, blobs_dir: Path) -> Received:
    """Move a checked part into the blob store (or drop it: the same content is there); on an
    I/O thread."""
    target = blob_path(blobs_dir, part.sha256)
    created = not target.exists()
    if created:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part.path, target)
    else:
        part.path.unlink(missing_ok=True)
    return Received(part.name, part.sha256, part.bytes, target, created, inflated)


class _Receiver:
    """python-multipart callbacks that route ``file`` parts to :class:`_Part`; the file work
    they leave is done by :meth:`settle`, off the event loop."""

    def __init__(self, tmp_dir: Path, limit_bytes: int, max_files: int) -> None:
        self.tmp_dir, self.limit_bytes, self.max_files = tmp_dir, limit_bytes, max_files
        self.spooled: list[_Spooled] = []
        self.parts: list[_Part] = []  # begun and not yet spooled, in order
        self.part: _Part | None = None  # the part being parsed
        self._headers: dict[bytes, bytes] = {}
        self._field = b""

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._begin,
            "on_header_field": lambda d, s, e: setattr(self, "_field", self._field + d[s:e]),
            "on_header_value": self._header_value,
            "on_header_end": lambda: setattr(self, "_field", b""),
            "on_headers_finished": self._headers_done,
            "on_part_data": self._data,
            "on_part_end": self._end,
        }

    def _begin(self) -> None:
        self._headers, self._field, self.part = {}, b"", None

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        key = self._field.lower()
        self._headers[key] = self._headers.get(key, b"") + data[start:end]

    def _headers_done(self) -> None:
        _, params = parse_options_header(self._headers.get(b"content-disposition", b""))
        if params.get(b"name") != FIELD.encode() or b"filename" not in params:
            return  # another form field: its data is discarded
        if len(self.spooled) + len(self.parts) >= self.max_files:
            raise UploadRefused(f"more than {self.max_files} files in one upload")
        name = display_name(params[b"filename"].decode("utf-8", "replace"))
        self.part = _Part(self.tmp_dir, name, self.limit_bytes)
        self.parts.append(self.part)

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self.part is not None:
            self.part.write(data[start:end])

    def _end(self) -> None:
        if self.part is not None:
            self.part.ended, self.part = True, None

    async def settle(self, io: ThreadPoolExecutor) -> None:
        """Write what the parser left pending, and spool the parts that ended."""
        loop = asyncio.get_running_loop()
        while self.parts:
            part = self.parts[0]
            if part.pending or part.fh is None or part.ended:
                await loop.run_in_executor(io, part.flush)
            if not part.ended:
                return
            self.parts.pop(0)
            try:
                self.spooled.append(part.spooled())
            except BaseException:
                part.abort()
                raise

    def _doomed(self) -> list[Any]:
        """The partial and spooled files of a refused upload, its in-flight marks released."""
        doomed: list[Any] = [*self.parts, *(s.path for s in self.spooled)]
        for spooled in self.spooled:
            _release(spooled.sha256)
        self.parts, self.spooled, self.part = [], [], None
        return doomed

    def abort(self, io: ThreadPoolExecutor) -> None:
        """The request is cancelled: its files go on the I/O thread, not awaited."""
        doomed = self._doomed()
        try:
            asyncio.get_running_loop().run_in_executor(io, _remove, doomed)
        except RuntimeError:  # the threads are gone (the server is stopping): here, then
            _remove(doomed)

    async def discard(self, io: ThreadPoolExecutor) -> None:
        """The upload is refused: its files are gone (on the I/O thread) before the reply."""
        doomed = self._doomed()
        try:
            await asyncio.get_running_loop().run_in_executor(io, _remove, doomed)
        except RuntimeError:  # the threads are gone (the server is stopping): here, then
            _remove(doomed)


def _remove(doomed: list[Any]) -> None:
    for item in doomed:
        if isinstance(item, _Part):
            item.abort()
        else:
            item.unlink(missing_ok=True)


def release(received: Received) -> None:
    """The upload of ``received`` is over (its run exists, or it was refused)."""
    _release(received.sha256)


def _release(sha256: str) -> None:
    _IN_FLIGHT[sha256] -= 1
    if _IN_FLIGHT[sha256] <= 0:
        del _IN_FLIGHT[sha256]


def in_flight(sha256: str) -> bool:
    return _IN_FLIGHT[sha256] > 0


async def receive(content_type: str, body: AsyncIterator[bytes], tmp_dir: Path,
                  blobs_dir: Path, limit_bytes: int, max_files: int,
                  in_use: Callable[[str], Awaitable[bool]], max_body_bytes: int,
                  checks: Checks, known: Callable[[str], Awaitable[int | None]]
                  ) -> list[Received]:
    """Stream a multipart body into ``tmp/``, then check each file and store it as a blob; the
    stored files, in upload order.

    ``in_use(sha256)`` says whether a recorded run uses a blob, which a refused upload keeps;
    ``known(sha256)`` what a stored blob inflates to, when it was checked before (both
    awaited: the index is read off the event loop).
    ``max_body_bytes`` caps the whole body (a chunked body declares no length). A body that
    is not well-formed multipart is refused in one line (400), a full disk with 507.
    """
    kind, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise Unsupported("send multipart/form-data with one or more 'file' fields "
                          "(curl -F file=@trace.json.gz URL/api/runs)")
    receiver = _Receiver(tmp_dir, limit_bytes, max_files)
    total = 0
    try:
        parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
        async for chunk in body:
            total += len(chunk)
            if total > max_body_bytes:
                raise TooLarge("the upload is larger than the server's cap")
            parser.write(chunk)
            await receiver.settle(checks.io)
        parser.finalize()
        await receiver.settle(checks.io)
        if receiver.part is not None:  # the body ended inside a part
            raise UploadRefused("the upload ended before its last file did")
        if not receiver.spooled:
            raise UploadRefused(f"no '{FIELD}' field with a file in the upload")
        return await _check_and_store(receiver, blobs_dir, checks, known, in_use)
    except BaseException as exc:
        if isinstance(exc, Exception):  # refused: the 4xx is sent once its files are gone
            await receiver.discard(checks.io)
        else:  # cancelled (the client left, the server stops): not awaited
            receiver.abort(checks.io)
        if isinstance(exc, FormParserError):  # python-multipart's parse errors
            raise UploadRefused(f"malformed multipart body: {_one_line(str(exc))}") from None
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            raise no_space(tmp_dir.parent) from None
        raise


async def _check_and_store(receiver: _Receiver, blobs_dir: Path, checks: Checks,
                           known: Callable[[str], Awaitable[int | None]],
                           in_use: Callable[[str], Awaitable[bool]]) -> list[Received]:
    """Each spooled part checked (or known by its hash) and moved into the blob store; a
    refusal removes the blobs this upload created that nothing else uses (a request cut off
    leaves them to the start-up sweep of blobs no run names)."""
    loop = asyncio.get_running_loop()
    stored: list[Received] = []
    try:
        for spooled in receiver.spooled:
            before = await known(spooled.sha256)  # None when not stored, or not checked
            if before is not None and not await loop.run_in_executor(
                    checks.io, blob_path(blobs_dir, spooled.sha256).is_file):
                before = None  # a row whose file went: check it again
            inflated = await checks.inflated(spooled, before)
            stored.append(await loop.run_in_executor(checks.io, _store, spooled, inflated,
                                                     blobs_dir))
    except UploadRefused:
        for r in stored:
            if r.created and _IN_FLIGHT[r.sha256] <= 1 and not await in_use(r.sha256):
                await loop.run_in_executor(checks.io, r.path.unlink, True)
        raise
    receiver.spooled = []  # stored: the caller releases them once the run is recorded
    return stored


def sweep_tmp(tmp_dir: Path) -> int:
    """Remove what uploads cut short by a killed server left in ``tmp/``; how many files.

    Called once at start-up, before the first request: nothing in ``tmp/`` is in flight then.
    """
    tmp_dir.mkdir(parents=True, exist_ok=True)
    swept = 0
    for path in tmp_dir.iterdir():
        if path.is_file() or path.is_symlink():
            path.unlink(missing_ok=True)
            swept += 1
    return swept


def sweep_blobs(blobs_dir: Path, in_use: set[str]) -> int:
    """Remove the stored files no run names -- what a server killed between storing an upload
    and recording it leaves -- and how many. Called once at start-up, before the first
    request: no upload is in flight then."""
    removed = 0
    for folder in (blobs_dir.iterdir() if blobs_dir.is_dir() else ()):
        for path in (folder.iterdir() if folder.is_dir() else ()):
            if path.name not in in_use and (path.is_file() or path.is_symlink()):
                path.unlink(missing_ok=True)
                removed += 1
    return removed


def input_key(received: list[Received]) -> str:
    """Identifies a set of inputs: the same files in the same order give the same key."""
    return hashlib.sha256(" ".join(r.sha256 for r in received).encode()).hexdigest()


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"
