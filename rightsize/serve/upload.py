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

import hashlib
import os
import secrets
import unicodedata
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from python_multipart import MultipartParser
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


class GzipCounter:
    """Decompresses a gzip stream as it arrives and counts the output, discarding it."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.out_bytes = 0
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> None:
        while data:
            try:
                out = self._inflate.decompress(data, _INFLATE_STEP)
            except zlib.error:
                return  # not valid gzip after all: the reader reports it with the file name
            self.out_bytes += len(out)
            if self.out_bytes > self.limit_bytes:
                raise TooLarge(f"gzip data decompresses to more than the {_mib(self.limit_bytes)}"
                               " cap (a gzip bomb, or a trace too large for this server)")
            if self._inflate.eof:  # a multi-member gzip file: start the next member
                data = self._inflate.unused_data
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                if not data.startswith(GZIP_MAGIC):
                    return
            else:
                data = self._inflate.unconsumed_tail


class _Part:
    """One file part being written to a temporary file."""

    def __init__(self, tmp_dir: Path, name: str, limit_bytes: int) -> None:
        self.name = name
        self.limit_bytes = limit_bytes
        self.path = tmp_dir / f"{secrets.token_hex(8)}.part"
        self.fh: IO[bytes] = open(self.path, "xb")  # noqa: SIM115 - closed in finish/abort
        self.sha = hashlib.sha256()
        self.size = 0
        self.gzip: GzipCounter | None = None

    def write(self, data: bytes) -> None:
        if self.size == 0 and data[:2] == GZIP_MAGIC:
            self.gzip = GzipCounter(self.limit_bytes)
        self.size += len(data)
        if self.size > self.limit_bytes:
            raise TooLarge(f"{self.name} is larger than the {_mib(self.limit_bytes)} upload cap")
        if self.gzip is not None:
            self.gzip.feed(data)
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
                  in_use: Callable[[str], bool]) -> list[Received]:
    """Stream a multipart body into the blob store; the stored files, in upload order.

    ``in_use(sha256)`` says whether a recorded run uses a blob, which a refused upload keeps.
    """
    kind, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise Unsupported("send multipart/form-data with one or more 'file' fields "
                          "(curl -F file=@trace.json.gz URL/api/runs)")
    tmp_dir.mkdir(parents=True, exist_ok=True)
    receiver = _Receiver(tmp_dir, blobs_dir, limit_bytes, max_files, in_use)
    parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
    try:
        async for chunk in body:
            parser.write(chunk)
        parser.finalize()
    except BaseException:
        receiver.abort()
        raise
    if receiver.part is not None:  # the body ended inside a part
        receiver.abort()
        raise UploadRefused("the upload ended before its last file did")
    if not receiver.received:
        raise UploadRefused(f"no '{FIELD}' field with a file in the upload")
    return receiver.received  # the caller calls release() on each once its run is recorded


def input_key(received: list[Received]) -> str:
    """Identifies a set of inputs: the same files in the same order give the same key."""
    return hashlib.sha256(" ".join(r.sha256 for r in received).encode()).hexdigest()


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"
