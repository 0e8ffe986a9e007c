"""What an uploaded gzip file inflates to, parsed exactly as the readers parse it, or refused.

Input: a file's bytes, in pieces split anywhere (:meth:`GzipCheck.feed`, then
:meth:`GzipCheck.finish`). Output: ``is_gzip`` and ``out_bytes``, the bytes the readers will
parse; or a refusal (:class:`UploadRefused` and its kinds, each with its HTTP status).

The readers open gzip with python-isal's ``IGzipFile`` when it is installed, else
``gzip.GzipFile`` (traces/kineto.py); the first two bytes decide gzip or not. The check follows
both and accepts only what both accept:

- a member: the magic ``1f 8b``, method 8, any flag bits -- both readers ignore the reserved
  bits ``0xE0``, which zlib's own gzip mode refuses (that is how a gzip bomb with ``FLG=0xE0``
  went uncounted and was inflated whole by the reader, issue 40, 3) -- then ``FEXTRA`` (a
  length and that many bytes), ``FNAME`` and ``FCOMMENT`` (up to a zero byte), ``FHCRC``
  (verified, as isal does; GzipFile skips it: a wrong one is refused);
- raw deflate, inflated in :data:`INFLATE_STEP` output steps that are counted and discarded,
  then the member's CRC-32 and length, checked as both readers check them;
- between members zero bytes are padding; then the magic again, or the end of the file.

Anything else -- the file ends inside a member, bytes after a member that are not one, a wrong
checksum, another method -- is refused with 400 (the readers would fail on it too). The
inflated total is capped (413), and so is the CPU time the check may take (413: a check that
costs more than the server allows), measured on the thread that runs it.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from pathlib import Path

from rightsize.errors import RightsizeError

GZIP_MAGIC = b"\x1f\x8b"
INFLATE_STEP = 1 << 20  # decompressed bytes produced per step: memory stays flat
_FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 2, 4, 8, 16
(_HEAD, _EXTRA_LEN, _EXTRA, _NAME, _COMMENT, _HCRC, _DEFLATE, _TRAILER, _BETWEEN,
 _PLAIN) = range(10)
# the optional header fields in the order they follow the fixed header: (flag, state)
_FIELDS = ((_FEXTRA, _EXTRA_LEN), (_FNAME, _NAME), (_FCOMMENT, _COMMENT), (_FHCRC, _HCRC))


class UploadRefused(RightsizeError):
    """An upload the server will not store; ``status`` is the HTTP status to answer."""

    status = 400


class TooLarge(UploadRefused):
    status = 413


class Unreadable(UploadRefused):
    """gzip data the readers would fail on (400)."""


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


class GzipCheck:
    """Counts what a file inflates to as its pieces arrive (see the module docstring)."""

    def __init__(self, limit_bytes: int, cpu_budget_s: float | None = None,
                 name: str = "the file") -> None:
        self.limit_bytes = limit_bytes
        self.cpu_budget_s = cpu_budget_s
        self.name = name
        self.out_bytes = 0
        self.is_gzip: bool | None = None  # None: fewer than two bytes seen yet
        self._state = _HEAD
        self._first = True  # the first member: its magic decides gzip or not
        self._buf = b""  # a fixed-size field being gathered
        self._skip = 0  # FEXTRA bytes still to skip
        self._flags = 0
        self._hcrc = 0  # CRC-32 of the member's header so far (FHCRC)
        self._inflate: zlib._Decompress | None = None
        self._crc = 0  # CRC-32 of the member's output
        self._size = 0  # the member's output bytes
        self._cpu_start = time.thread_time()

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        while data and self._state != _PLAIN:
            data = self._step(data)

    def finish(self) -> None:
        """The file ended: refuse a file that ends inside a member."""
        if self._state == _HEAD and self._first and len(self._buf) < 2:
            self.is_gzip = False  # under two bytes: not gzip for the readers either
            return
        if self._state == _PLAIN or (self._state in (_BETWEEN, _HEAD) and not self._buf):
            return
        raise self._unreadable("ends inside a gzip member (cut short?)")

    def _step(self, data: bytes) -> bytes:
        state = self._state
        if state == _HEAD:
            return self._head(data)
        if state in (_EXTRA_LEN, _HCRC, _TRAILER):
            need = {_EXTRA_LEN: 2, _HCRC: 2, _TRAILER: 8}[state]
            data = self._gather(data, need, header=state == _EXTRA_LEN)
            if len(self._buf) == need:
                field, self._buf = self._buf, b""
                self._field_done(state, field)
            return data
        if state == _EXTRA:
            taken, data = data[:self._skip], data[self._skip:]
            self._hcrc = zlib.crc32(taken, self._hcrc)
            self._skip -= len(taken)
            if self._skip == 0:
                self._after_header_field(_FEXTRA)
            return data
        if state in (_NAME, _COMMENT):
            end = data.find(b"\0")
            taken, data = (data, b"") if end < 0 else (data[:end + 1], data[end + 1:])
            self._hcrc = zlib.crc32(taken, self._hcrc)
            if end >= 0:
                self._after_header_field(_FNAME if state == _NAME else _FCOMMENT)
            return data
        if state == _DEFLATE:
            return self._inflate_some(data)
        # _BETWEEN: zero bytes are padding (GzipFile and isal skip them); then a member
        data = data.lstrip(b"\0")
        if data:
            self._state = _HEAD
        return data

    def _gather(self, data: bytes, need: int, header: bool) -> bytes:
        taken = data[:need - len(self._buf)]
        self._buf += taken
        if header:
            self._hcrc = zlib.crc32(taken, self._hcrc)
        return data[len(taken):]

    def _head(self, data: bytes) -> bytes:
        if not self._buf:
            self._hcrc = 0
        data = self._gather(data, 10, header=True)
        if len(self._buf) >= 2 and self._buf[:2] != GZIP_MAGIC:
            if self._first:
                self.is_gzip, self._state = False, _PLAIN  # not gzip: nothing to inflate
                return b""
            raise self._unreadable("has bytes after a gzip member that are not another one")
        if len(self._buf) >= 2 and self._first:
            self.is_gzip = True
        if len(self._buf) < 10:
            return data
        method, self._flags = self._buf[2], self._buf[3]
        self._buf = b""
        if method != 8:
            raise self._unreadable(f"is gzip of an unknown compression method ({method})")
        self._first = False
        self._after_header_field(0)
        return data

    def _after_header_field(self, done: int) -> None:
        """The next state after the fixed header (``done`` 0) or after one optional field."""
        flags = [flag for flag, _ in _FIELDS]
        after = flags.index(done) + 1 if done else 0
        later = [state for flag, state in _FIELDS[after:] if self._flags & flag]
        if later:
            self._state = later[0]
            return
        self._state, self._crc, self._size = _DEFLATE, 0, 0
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)

    def _field_done(self, state: int, field: bytes) -> None:
        if state == _EXTRA_LEN:
            (self._skip,) = struct.unpack("<H", field)
            self._state = _EXTRA
            if self._skip == 0:
                self._after_header_field(_FEXTRA)
        elif state == _HCRC:
            if struct.unpack("<H", field)[0] != self._hcrc & 0xFFFF:
                raise self._unreadable("has a gzip header checksum that does not match")
            self._after_header_field(_FHCRC)
        else:  # the trailer: CRC-32 and length of the member's output
            crc, size = struct.unpack("<II", field)
            if crc != self._crc or size != self._size & 0xFFFFFFFF:
                raise self._unreadable("fails the gzip CRC or length check (damaged?)")
            self._state = _BETWEEN

    def _inflate_some(self, data: bytes) -> bytes:
        """Inflate ``data`` within the current member; the bytes left after the member."""
        inflate = self._inflate
        assert inflate is not None
        try:
            out = inflate.decompress(data, INFLATE_STEP)
            self._count(out)
            # at the end of the stream the bytes after it are in unused_data (zlib may leave a
            # stale copy in unconsumed_tail): stop there
            while not inflate.eof and (inflate.unconsumed_tail or len(out) == INFLATE_STEP):
                out = inflate.decompress(inflate.unconsumed_tail, INFLATE_STEP)
                self._count(out)
                if not out:
                    break
        except zlib.error as exc:
            raise self._unreadable(f"is not valid gzip ({exc})") from None
        if inflate.eof:
            self._state = _TRAILER
            return bytes(inflate.unused_data)
        return b""

    def _count(self, out: bytes) -> None:
        self.out_bytes += len(out)
        self._size += len(out)
        self._crc = zlib.crc32(out, self._crc)
        if self.out_bytes > self.limit_bytes:
            raise TooLarge(f"{self.name}: gzip data decompresses to more than the "
                           f"{_mib(self.limit_bytes)} cap (a gzip bomb, or a trace too large "
                           "for this server)")
        if self.cpu_budget_s is not None and \
                time.thread_time() - self._cpu_start > self.cpu_budget_s:
            raise TooLarge(f"{self.name}: checking what the gzip data decompresses to took "
                           f"more than the server's {self.cpu_budget_s:g} s of CPU per upload")

    def _unreadable(self, why: str) -> Unreadable:
        return Unreadable(f"{self.name} {why}; the readers cannot read it")


READ_BYTES = 1 << 20


def check_file(path: Path, limit_bytes: int, cpu_budget_s: float | None,
               name: str = "the file") -> int:
    """What the readers will parse of the stored file at ``path``: the bytes it inflates to
    when it is gzip, else its size. Raises :class:`TooLarge` or :class:`Unreadable`. Runs on
    the thread that calls it (the server calls it off its event loop)."""
    check = GzipCheck(limit_bytes, cpu_budget_s, name)
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(READ_BYTES):
            size += len(chunk)
            check.feed(chunk)
            if check.is_gzip is False:
                size += os.fstat(fh.fileno()).st_size - fh.tell()
                break
    check.finish()
    return check.out_bytes if check.is_gzip else size
