"""Stream the events of a Chrome-trace JSON document as NDJSON batches, in bounded memory.

A Kineto trace is one JSON object whose ``traceEvents`` array holds millions of events. Parsing
it whole (``json.loads``) costs several times the file size in Python objects. Instead this
module reads the file in chunks, finds the array's element boundaries (the compiled ``cut``
where it was built, else a vectorized scan of the structural characters: :mod:`jsonbytes`,
strings and escapes honoured) and yields each run of whole events as a batch. Everything
outside the array (the small top-level keys: ``deviceProperties``, ``distributedInfo``,
``baseTimeNanoseconds``...) is kept and returned as the "envelope".

Inputs: a binary file object. Outputs: :class:`Scan` with ``batches()`` (:class:`Batch`: the
run of document bytes or NDJSON) and,
once exhausted, ``envelope`` (the document with an empty event array) and ``events``.
Problems raise :class:`ScanError` with a one-line reason; the caller adds the file name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np

from rightsize.traces import jsonbytes, kscan, limits
from rightsize.traces.jsonbytes import BACKSLASH, COMMA, QUOTE

# Read size: bounds memory (a parse holds several times its batch while it runs, and the Kineto
# reader parses two batches at once: 4 MiB reads peak at 190 MiB on a 35 MB trace and 266 MiB on
# 175 MB, 8 MiB ones at 244 and 316), large enough for numpy to pay off.
CHUNK_BYTES = 4 * 1024 * 1024

_OPEN = (0x7B, 0x5B)  # { [
_CLOSE = (0x7D, 0x5D)  # } ]
_KEY_BEFORE = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*$')


class Batch:
    """Whole events in file order: ``ndjson`` (one per line), or the run of the event array they
    are in the document (``raw``: objects, commas and whitespace, from the first ``{`` to the
    last ``}``), from which NDJSON is made (``make``) only when asked for: the compiled parser
    reads ``raw`` as it is."""

    __slots__ = ("_make", "_ndjson", "count", "raw")

    def __init__(self, ndjson: bytes | None, raw: bytes | bytearray | None, count: int,
                 make: Callable[[bytes | bytearray], bytes | bytearray] | None = None) -> None:
        self._ndjson = ndjson
        self.raw = raw
        self.count = count  # events in the batch; -1 when not counted (the parser counts)
        self._make = make

    @property
    def ndjson(self) -> bytes:
        if self._ndjson is None:
            assert self.raw is not None and self._make is not None
            made = self._make(self.raw)
            self._ndjson = made if isinstance(made, bytes) else bytes(made)
        return self._ndjson


class ScanError(ValueError):
    """The bytes are not a Chrome-trace JSON document (reason in the message)."""


def _over(c: limits.Cap) -> ScanError:
    return ScanError(str(limits.LimitError(c)))


class Scan:
    """One pass over a trace document; iterate :meth:`batches` exactly once."""

    def __init__(self, stream: BinaryIO, chunk_bytes: int = CHUNK_BYTES) -> None:
        self._stream: BinaryIO | _Prepend = stream
        self._chunk_bytes = chunk_bytes
        self._head = bytearray()  # document bytes up to and including the array's "["
        self._tail = bytearray()  # document bytes from the array's "]" on
        self.events = 0  # events split by the structural scan (fast-path batches are not counted)
        self._after = False  # the next bytes follow a whole element (a comma comes first)
        self._uncounted = False  # a fast-path batch was cut: its events are not in ``events``
        self.bytes_read = 0
        # Caps (rightsize.traces.limits): memory stays bounded whatever the file holds.
        self._input_cap = limits.cap(limits.INPUT_BYTES)
        self._event_cap = limits.cap(limits.EVENT_BYTES)
        self._envelope_cap = limits.cap(limits.ENVELOPE_BYTES)
        self._nesting_cap = limits.cap(limits.NESTING)

    @property
    def envelope(self) -> bytes:
        """The document with its event array emptied (valid JSON once the scan is done)."""
        return bytes(self._head) + bytes(self._tail)

    def batches(self) -> Iterator[Batch]:
        """Yield batches of whole events as NDJSON (one event per line), in file order.

        Fast path: a pretty-printed trace (Kineto's own layout, ``json.dump(indent=...)``) puts
        each event at one indentation, so the byte pattern ``\n<indent>},\n<indent>{`` can only
        be a separator between events (raw newlines never occur inside JSON strings). Such
        batches carry their raw bytes: should polars reject a line (a document indented some
        other way), :meth:`resplit` splits them again with the structural scan.
        """
        self._element_depth = self._find_array()
        pending = b""
        sep: bytes | None = None
        first = True
        while True:
            data = self._read()
            if not data and not pending:
                raise ScanError("truncated: the event array is never closed")
            buf: bytes | bytearray
            if sep is not None and data:  # the batch is cut from it in place, not copied
                buf = bytearray(pending)
                buf += data
            else:
                buf = pending + data
            more = bool(data)
            del data  # its bytes are in buf now
            if first:
                assert isinstance(buf, bytes)  # no separator known yet: joined as bytes
                sep = jsonbytes.separator(buf, self._element_depth)
                first = False
            if sep is not None and more:
                at = buf.rfind(sep)
                if at >= 0:
                    end = at + sep.index(b"}") + 1  # just past the last whole event's "}"
                    pending = bytes(buf[at + len(sep) - 1:])  # from the next event's "{"
                    if isinstance(buf, bytearray):
                        del buf[end:]  # the chunk is the batch: one copy of it, not two
                        raw: bytes | bytearray = buf
                    else:
                        raw = buf[:end]
                    del buf  # only one copy of the chunk stays alive with its NDJSON
                    self._after = False  # pending starts at the next event's "{"
                    self._uncounted = True
                    yield Batch(None, raw, -1, functools.partial(jsonbytes.join, sep=sep))
                    del raw
                    if len(pending) <= self._event_cap:
                        continue
                    # The last event runs on for long: it may be the array's end followed by
                    # big metadata, which only the structural scan can tell.
                    buf = pending
            done, batch, rest = self._cut(bytes(buf) if isinstance(buf, bytearray) else buf)
            del buf
            if batch is not None:
                yield batch
            if done:
                self._tail += rest
                self._tail += self._read_all()
                return
            if not more:
                raise ScanError(f"truncated: the file ends inside the event array "
                                f"{self._where()} (copied or written only in part?)")
            pending = rest
            self._check_pending(pending)

    def resplit(self, batch: Batch) -> bytes:
        """NDJSON of a raw batch by the structural scan (the fallback when polars refuses the
        NDJSON a fast cut made)."""
        if batch.raw is None:
            return batch.ndjson
        return self.resplit_raw(batch.raw)

    # -- internals ---------------------------------------------------------------------------

    def _where(self) -> str:
        """Where a truncated array ends: after N events when all were counted, else the byte."""
        if self._uncounted:
            return f"at byte {self.bytes_read:,} of its JSON"
        return f"after {self.events:,} events"

    def _cut(self, buf: bytes) -> tuple[bool, Batch | None, bytes]:
        """The whole elements at the start of ``buf``: (array closed?, their batch, the bytes
        after them). The compiled module finds them (a raw batch; it checks nothing but the
        structure between elements); without it, or where it sees anything but objects, commas
        and whitespace there, the structural scan does (NDJSON, and its errors)."""
        module = kscan.module()
        found = module.cut(buf, self._after) if module is not None else None
        if found is None:
            before = self.events
            done, ndjson, rest = self._split(buf, self._element_depth)
            self._after = self._after or bool(ndjson)
            return done, Batch(ndjson, None, self.events - before) if ndjson else None, rest
        closed, first, last, end, count = found
        rest = buf[end:] if closed else buf[last:] if count else buf
        if not count:
            return closed, None, rest
        self.events += count
        self._after = True
        return closed, Batch(None, buf[first:last], count, self.resplit_raw), rest

    def resplit_raw(self, raw: bytes | bytearray) -> bytes:
        """NDJSON of a run of whole elements, by the structural scan."""
        _done, ndjson, rest = self._split(bytes(raw) + b"\n", self._element_depth)
        if rest.strip(b" \t\r\n,"):
            raise ScanError("malformed event array (an element is not a JSON object)")
        return ndjson

    def _read(self) -> bytes:
        data = self._stream.read(self._chunk_bytes)
        self.bytes_read += len(data)
        if self.bytes_read > self._input_cap:
            raise _over(limits.INPUT_BYTES)
        return data

    def _read_all(self) -> bytes:
        """The rest of the document after the event array (metadata: a few KiB in practice)."""
        out = bytearray()
        while data := self._read():
            out += data
            if len(out) + len(self._head) > self._envelope_cap:
                raise _over(limits.ENVELOPE_BYTES)
        return bytes(out)

    def _check_pending(self, pending: bytes) -> None:
        """The unfinished event carried to the next read: one event must fit its cap."""
        if len(pending) > self._event_cap:
            raise _over(limits.EVENT_BYTES)

    def _find_array(self) -> int:
        """Consume the head up to the event array's "["; return the depth of its elements."""
        depth, in_string, escaped = 0, False, False
        scanned = 0
        while True:
            data = self._read()
            if not data:
                if not self._head.strip():
                    raise ScanError("the file is empty")
                if depth > 0 or in_string:
                    raise ScanError("truncated JSON: the file ends before the traceEvents array")
                raise ScanError("no traceEvents array (not a Chrome/Kineto trace)")
            if scanned == 0 and not self._head:
                data = data.removeprefix(limits.BOM)  # a UTF-8 BOM some editors write
            start = len(self._head)
            self._head += data
            if scanned == 0:
                first = bytes(self._head).lstrip()[:1]
                if first and first not in b"{[":
                    raise ScanError("not JSON (a trace starts with '{' or '[')")
            at = jsonbytes.key_array(bytes(self._head), max(0, start - len(jsonbytes.KEY)),
                                     self._nesting_cap)
            if at is not None and at < self._envelope_cap:  # found without the byte loop
                return self._cut_head(at, 2) + 1
            # Byte-by-byte only over the head, which is small (metadata keys before the array).
            for i in range(start, len(self._head)):
                c = self._head[i]
                if in_string:
                    if escaped:
                        escaped = False
                    elif c == BACKSLASH:
                        escaped = True
                    elif c == QUOTE:
                        in_string = False
                    continue
                if c == QUOTE:
                    in_string = True
                elif c in _OPEN:
                    depth += 1
                    if depth > self._nesting_cap:
                        raise _over(limits.NESTING)
                    if c == 0x5B and self._is_event_array(i, depth):
                        return self._cut_head(i, depth) + 1
                elif c in _CLOSE:
                    depth -= 1
                    if depth == 0:
                        raise ScanError("no traceEvents array (not a Chrome/Kineto trace)")
            scanned += len(data)
            if scanned > self._envelope_cap:
                raise _over(limits.ENVELOPE_BYTES)

    def _cut_head(self, i: int, depth: int) -> int:
        """The head ends at the array's "[" (at ``i``); what was read after it is read again."""
        rest = bytes(self._head[i + 1:])
        del self._head[i + 1:]
        self.bytes_read -= len(rest)  # read again through _Prepend
        self._stream = _Prepend(rest, self._stream)
        return depth

    def _is_event_array(self, i: int, depth_after: int) -> bool:
        if depth_after == 1:  # the JSON Array Format: the document itself is the event list
            return True
        if depth_after != 2:
            return False
        m = _KEY_BEFORE.search(bytes(self._head[max(0, i - 256):i]))
        return m is not None and m.group(1) == b"traceEvents"

    def _split(self, buf: bytes, element_depth: int) -> tuple[bool, bytes, bytes]:
        """Find whole elements in ``buf`` (which starts between elements).

        Returns (array closed?, NDJSON of the whole elements, the bytes after them).
        """
        base = element_depth - 1  # depth inside the array, between elements
        struct_pos, is_close, depth_after = jsonbytes.brackets(
            np.frombuffer(buf, dtype=np.uint8), base)
        closes = struct_pos[is_close & (depth_after == base)]  # an element ends here
        array_end = struct_pos[is_close & (depth_after == base - 1)]
        end = int(array_end[0]) if len(array_end) else -1
        if end >= 0:
            closes = closes[closes < end]
        if len(closes) == 0:
            if end >= 0:
                if buf[:end].strip(b" \t\r\n,"):
                    raise ScanError("malformed event array (an element is not a JSON object)")
                return True, b"", buf[end:]
            return False, b"", buf
        last = int(closes[-1]) + 1
        opens = struct_pos[~is_close & (depth_after == base + 1)]
        first = int(opens[0])
        if len(opens[opens < last]) != len(closes) or buf[:first].strip(b" \t\r\n,"):
            raise ScanError("malformed event array (an element is not a JSON object)")
        body = bytearray(memoryview(buf)[first:last])  # one copy, edited in place
        view = np.frombuffer(body, dtype=np.uint8)
        if b"\n" in body or b"\r" in body:  # not in one-line documents: skip the pass there
            view[(view == 0x0A) | (view == 0x0D)] = 0x20
        # The separator after each element but the last becomes the line break.
        seps = closes[:-1] + 1 - first
        not_comma = view[seps] != COMMA
        if not_comma.any():  # whitespace before the comma (not Kineto's layout): find it
            for i in np.flatnonzero(not_comma).tolist():
                j = int(seps[i])
                while view[j] in b" \t":
                    j += 1
                if view[j] != COMMA:
                    raise ScanError("malformed event array (a separator is missing)")
                seps[i] = j
        view[seps] = 0x0A
        self.events += len(closes)
        if end >= 0:
            return True, bytes(body), buf[end:]
        return False, bytes(body), buf[last:]


class _Prepend:
    """A read-only stream that first returns ``prefix``, then the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream: BinaryIO | _Prepend) -> None:
        self._prefix = prefix
        self._stream = stream

    def read(self, n: int = -1) -> bytes:
        if self._prefix:
            out, self._prefix = self._prefix, b""
            return out
        return self._stream.read(n)
