"""Receive a multipart upload straight from the request stream into the blob store.

Input: the ASGI request body (``multipart/form-data``, one or more ``file`` fields). Output:
one :class:`Received` per file, stored content-addressed under ``blobs/``. Nothing is held in
memory beyond one network chunk: each part is written to a temporary file as it arrives, hashed
(SHA-256) while writing, and checked against the cap on every chunk, so an oversized upload is
refused (:class:`TooLarge`, HTTP 413) as soon as the cap is passed, its partial file removed.
A gzip part is also decompressed as it arrives, only to count the bytes it expands to (the
readers parse those), which refuses a gzip bomb at the same cap. Client file names are kept as
display text only; they never become paths.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import unicodedata
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header

from rightsize.errors import RightsizeError
from rightsize.serve.store import blob_path

FIELD = "file"
GZIP_MAGIC = b"\x1f\x8b"
_INFLATE_STEP = 1 << 20  # bytes of decompressed output produced per step, so memory stays flat
MAX_NAME_CHARS = 200
# Blob hashes of uploads still in flight in this process: a refused upload removes the blobs
# it created only when no other request is about to use them.
_IN_FLIGHT: Counter[str] = Counter()


class UploadRefused(RightsizeError):
    """An upload the server will not store; ``status`` is the HTTP status to answer."""

    status = 400


class TooLarge(UploadRefused):
    status = 413


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


def display_name(raw: str) -> str:
    """A client's file name made safe to show: last path component, no control characters."""
    base = raw.replace("\\", "/").rsplit("/", 1)[-1]
    clean = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip()
    return clean[:MAX_NAME_CHARS] or "upload"


class InflateCheck:
    """Counts what a gzip file inflates to as its bytes arrive, for any split of those bytes.

    Fed every piece of a file from its first byte, it decides gzip or not from the first two
    bytes (the readers' test: :data:`GZIP_MAGIC` at offset 0), then inflates each member in
    :data:`_INFLATE_STEP` output steps that are counted and discarded. Between members it
    follows :class:`gzip.GzipFile`, which the readers use: zero bytes are padding, the next two
    bytes must be the magic again, anything else ends the file for them (they refuse it), and
    so ends the counting. A magic or a member split across pieces is held as state, never
    re-sniffed from the start of a piece.
    """

    _HEAD, _MEMBER, _BETWEEN, _DONE = range(4)

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.out_bytes = 0
        self.is_gzip: bool | None = None  # None: fewer than two bytes seen yet
        self._state = self._HEAD
        self._magic = b""  # the bytes of a magic seen so far (0 or 1 of them)
        self._inflate: Any = None

    def feed(self, data: bytes) -> None:
        while data and self._state != self._DONE:
            if self._state == self._MEMBER:
                data = self._inflate_some(data)
                continue
            if self._state == self._BETWEEN and not self._magic:
                data = data.lstrip(b"\0")  # GzipFile skips zero padding between members
                if not data:
                    return
            need = 2 - len(self._magic)
            self._magic, data = self._magic + data[:need], data[need:]
            if len(self._magic) < 2:
                return
            first = self._state == self._HEAD
            if self._magic != GZIP_MAGIC:
                if first:
                    self.is_gzip = False
                self._state = self._DONE  # not gzip, or trailing data the readers refuse
                return
            if first:
                self.is_gzip = True
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self._state, data, self._magic = self._MEMBER, self._magic + data, b""

    def _inflate_some(self, data: bytes) -> bytes:
        """Inflate ``data`` within the current member; the bytes left after the member."""
        try:
            out = self._inflate.decompress(data, _INFLATE_STEP)
            self._count(len(out))
            while len(out) == _INFLATE_STEP and not self._inflate.unconsumed_tail \
                    and not self._inflate.eof:  # output still held inside zlib
                out = self._inflate.decompress(b"", _INFLATE_STEP)
                self._count(len(out))
        except zlib.error:
            self._state = self._DONE  # not valid gzip: the reader reports it with the name
            return b""
        if self._inflate.eof:
            self._state = self._BETWEEN
            return bytes(self._inflate.unused_data)
        return bytes(self._inflate.unconsumed_tail)

    def _count(self, n: int) -> None:
        self.out_bytes += n
        if self.out_bytes > self.limit_bytes:
            self._state = self._DONE
            raise TooLarge(f"gzip data decompresses to more than the {_mib(self.limit_bytes)} "
                           "cap (a gzip bomb, or a trace too large for this server)")


class _Part:
    """One file part being written to a temporary file."""

    def __init__(self, tmp_dir: Path, name: str, limit_bytes: int) -> None:
        self.name = name
        self.limit_bytes = limit_bytes
        self.path = tmp_dir / f"{secrets.token_hex(8)}.part"
        self.fh: IO[bytes] = open(self.path, "xb")  # noqa: SIM115 - closed in finish/abort
        self.sha = hashlib.sha256()
        self.size = 0
        self.inflate = InflateCheck(limit_bytes)  # fed from the first byte, whatever the split

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit_bytes:
            raise TooLarge(f"{self.name} is larger than the {_mib(self.limit_bytes)} upload cap")
        self.inflate.feed(data)
        self.sha.update(data)
        self.fh.write(data)

    def finish(self, blobs_dir: Path) -> Received:
        self.fh.close()
        if self.size == 0:
            raise UploadRefused(f"{self.name} is empty")
        digest = self.sha.hexdigest()
        target = blob_path(blobs_dir, digest)
        created = not target.exists()
        if created:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.path, target)
        else:
            self.path.unlink()  # the same content is stored already
        _IN_FLIGHT[digest] += 1
        return Received(self.name, digest, self.size, target, created)

    def abort(self) -> None:
        self.fh.close()
        self.path.unlink(missing_ok=True)


class _Receiver:
    """python-multipart callbacks that route ``file`` parts to :class:`_Part`."""

    def __init__(self, tmp_dir: Path, blobs_dir: Path, limit_bytes: int, max_files: int,
                 in_use: Callable[[str], bool]) -> None:
        self.tmp_dir, self.blobs_dir, self.in_use = tmp_dir, blobs_dir, in_use
        self.limit_bytes, self.max_files = limit_bytes, max_files
        self.received: list[Received] = []
        self.part: _Part | None = None
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
        if len(self.received) >= self.max_files:
            raise UploadRefused(f"more than {self.max_files} files in one upload")
        name = display_name(params[b"filename"].decode("utf-8", "replace"))
        self.part = _Part(self.tmp_dir, name, self.limit_bytes)

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self.part is not None:
            self.part.write(data[start:end])

    def _end(self) -> None:
        if self.part is not None:
            part, self.part = self.part, None
            try:
                self.received.append(part.finish(self.blobs_dir))
            except BaseException:
                part.abort()
                raise

    def abort(self) -> None:
        if self.part is not None:
            self.part.abort()
            self.part = None
        for r in self.received:
            release(r)
            if r.created and not _IN_FLIGHT[r.sha256] and not self.in_use(r.sha256):
                r.path.unlink(missing_ok=True)


def release(received: Received) -> None:
    """The upload of ``received`` is over (its run exists, or it was refused)."""
    _IN_FLIGHT[received.sha256] -= 1
    if _IN_FLIGHT[received.sha256] <= 0:
        del _IN_FLIGHT[received.sha256]


def in_flight(sha256: str) -> bool:
    return _IN_FLIGHT[sha256] > 0


async def receive(content_type: str, body: AsyncIterator[bytes], tmp_dir: Path,
                  blobs_dir: Path, limit_bytes: int, max_files: int,
                  in_use: Callable[[str], bool], max_body_bytes: int) -> list[Received]:
    """Stream a multipart body into the blob store; the stored files, in upload order.

    ``in_use(sha256)`` says whether a recorded run uses a blob, which a refused upload keeps.
    ``max_body_bytes`` caps the whole body (a chunked body declares no length). A body that
    is not well-formed multipart is refused in one line (400), a full disk with 507.
    """
    kind, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise Unsupported("send multipart/form-data with one or more 'file' fields "
                          "(curl -F file=@trace.json.gz URL/api/runs)")
    receiver = _Receiver(tmp_dir, blobs_dir, limit_bytes, max_files, in_use)
    total = 0
    try:
        parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
        async for chunk in body:
            total += len(chunk)
            if total > max_body_bytes:
                raise TooLarge("the upload is larger than the server's cap")
            parser.write(chunk)
        parser.finalize()
    except BaseException as exc:
        receiver.abort()
        if isinstance(exc, FormParserError):  # python-multipart's parse errors
            raise UploadRefused(f"malformed multipart body: {_one_line(str(exc))}") from None
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            raise no_space(tmp_dir.parent) from None
        raise
    if receiver.part is not None:  # the body ended inside a part
        receiver.abort()
        raise UploadRefused("the upload ended before its last file did")
    if not receiver.received:
        raise UploadRefused(f"no '{FIELD}' field with a file in the upload")
    return receiver.received  # the caller calls release() on each once its run is recorded


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


def input_key(received: list[Received]) -> str:
    """Identifies a set of inputs: the same files in the same order give the same key."""
    return hashlib.sha256(" ".join(r.sha256 for r in received).encode()).hexdigest()


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"
