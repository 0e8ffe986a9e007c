"""JSON structure found in bytes, vectorized with numpy: what :mod:`jsonscan` cuts by.

Pure functions of bytes: the quotes that are not escaped, the brackets and braces outside
strings (and the nesting after each), the deepest nesting, where the top object's
``traceEvents`` array starts, and the separator between two events of a pretty-printed
document (with the NDJSON made by replacing it).
"""

from __future__ import annotations

import numpy as np

QUOTE, BACKSLASH, COMMA = 0x22, 0x5C, 0x2C
KEY = b'"traceEvents"'
_SPACE = b" \t\r\n"
_NEWLINES = bytes.maketrans(b"\r\n", b"  ")


def real_quotes(arr: np.ndarray) -> np.ndarray:
    """Positions of quote bytes that are not escaped by an odd run of backslashes."""
    quotes = np.flatnonzero(arr == QUOTE)
    if len(quotes) == 0:
        return quotes
    suspect = quotes[(quotes > 0) & (arr[np.maximum(quotes - 1, 0)] == BACKSLASH)]
    if len(suspect) == 0:
        return quotes
    escaped = []
    for q in suspect.tolist():  # rare: only quotes right after a backslash
        run = 0
        j = q - 1
        while j >= 0 and arr[j] == BACKSLASH:
            run += 1
            j -= 1
        if run % 2 == 1:
            escaped.append(q)
    if not escaped:
        return quotes
    return np.setdiff1d(quotes, np.asarray(escaped, dtype=quotes.dtype), assume_unique=True)


def brackets(arr: np.ndarray, depth_before: int = 0,
             quotes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``{ [ } ]`` outside strings: their positions, whether each closes, and the nesting
    after each (starting from ``depth_before``). ``quotes``: :func:`real_quotes` of ``arr``
    when the caller has them."""
    if quotes is None:
        quotes = real_quotes(arr)
    # "{" and "[" are 0x7B/0x5B, "}" and "]" 0x7D/0x5D: one mask folds each pair together.
    folded = arr & 0xDF
    pos = np.flatnonzero((folded == 0x5B) | (folded == 0x5D))
    # A bracket is inside a string when an odd number of quotes precede it.
    pos = pos[(np.searchsorted(quotes, pos) & 1) == 0]
    is_close = folded[pos] == 0x5D
    depth = depth_before + np.cumsum(np.where(is_close, -1, 1), dtype=np.int64)
    return pos, is_close, depth


def max_depth(buf: bytes) -> int:
    """The deepest nesting of objects/arrays in a JSON text (strings honoured), in one
    vectorized pass: checked before ``json.loads``, whose recursion a deep document exhausts."""
    _pos, _is_close, depth = brackets(np.frombuffer(buf, dtype=np.uint8))
    return int(depth.max()) if len(depth) else 0


def key_array(head: bytes, start: int, nesting_cap: int) -> int | None:
    """Where the ``traceEvents`` array starts ("[" position), when its key is a key of the top
    object (outside any string, at depth 1, nothing closed the object before it) and the head
    up to it stays within the nesting cap; None otherwise (the byte loop decides, and raises).
    The key is looked for from ``start`` on (the bytes read last)."""
    i = head.find(KEY, start)
    if i < 0 or head.lstrip(_SPACE)[:1] != b"{":
        return None
    j = i + len(KEY)
    while j < len(head) and head[j] in _SPACE:
        j += 1
    if head[j:j + 1] != b":":
        return None
    j += 1
    while j < len(head) and head[j] in _SPACE:
        j += 1
    if head[j:j + 1] != b"[":
        return None
    arr = np.frombuffer(head, dtype=np.uint8, count=i)
    quotes = real_quotes(arr)
    if len(quotes) % 2:  # the key's quote is inside a string
        return None
    _pos, _is_close, depth = brackets(arr, quotes=quotes)
    if len(depth) == 0 or depth[-1] != 1 or depth[1:].min(initial=1) < 1 \
            or depth.max() + 1 > nesting_cap:
        return None
    return j


def separator(buf: bytes, element_depth: int) -> bytes | None:
    """The bytes between the first two events, from the whitespace before the first one's
    closing ``}`` to the second one's ``{``: ``\n<indent>},\n<indent>{`` in Kineto's layout,
    ``},\n{`` with one event per line. Only a separator with a raw newline is used (a newline
    never occurs inside a JSON string, while ``},{`` may): one-line documents, and the first MiB
    not holding two whole events, give None (the structural scan then does all the work)."""
    head = buf[:1 << 20]
    base = element_depth - 1
    pos, is_close, depth = brackets(np.frombuffer(head, dtype=np.uint8), base)
    closes = pos[is_close & (depth == base)]
    opens = pos[~is_close & (depth == base + 1)]
    if len(closes) < 2 or len(opens) < 2 or head[:int(opens[0])].strip(b" \t\r\n,"):
        return None
    close, nxt = int(closes[0]), int(opens[1])
    if head[close] != 0x7D or head[nxt] != 0x7B or head[close + 1:nxt].strip(b" \t\r\n") != b",":
        return None
    start = close
    while start > 0 and head[start - 1] in b" \t\r\n":
        start -= 1
    sep = head[start:nxt + 1]
    if b"\n" not in sep:  # "},{" can occur inside a string: only a raw newline cannot
        return None
    if b"\n" not in head[start:close] and b"\n" in head[int(opens[0]):close]:
        return None  # "},\n{" but the first event spans lines: nested objects could match
    return sep


def join(raw: bytes | bytearray, sep: bytes) -> bytes | bytearray:
    """NDJSON of a fast-path run of events: each separator becomes one line break. With one
    event per line (``},\n{``) the other bytes are kept as they are; otherwise newlines
    become spaces first, so that every event is one line. The separator is replaced by one of
    the same length (``}``, spaces, newline, ``{``): CPython then copies the buffer once and
    patches it in place instead of building it piece by piece."""
    if sep == b"},\n{" or sep == b"},\r\n{":
        body = raw.replace(sep, _line_break(len(sep)))
    else:
        body = raw.translate(_NEWLINES).replace(sep.translate(_NEWLINES), _line_break(len(sep)))
    if body[:1] != b"{":  # the array's start
        body = body.lstrip(b" \t\r\n,")
    return body


def _line_break(n: int) -> bytes:
    """``}`` + spaces + ``\n{``, ``n`` bytes: a separator's replacement of equal length."""
    return b"}" + b" " * (n - 3) + b"\n{"
