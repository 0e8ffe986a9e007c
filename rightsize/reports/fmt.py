"""Number formatting shared by the html and text renderers: one spelling for each unit.

Input: plain numbers (``None`` meaning unknown). Output: short strings; unknown is ``n/a``,
never 0.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rightsize.analyzers.document.diagnosis import WhatIf

NA = "n/a"

# What must never reach a terminal from data: C0 controls (but newline and tab), DEL, the C1
# range 0x80-0x9f (8-bit CSI/OSC), bidirectional overrides, and lone surrogates (which cannot
# even be encoded). Escaping ESC itself defuses every escape sequence (CSI colours, clear
# screen, OSC 52 clipboard, OSC 8 links); CR can no longer overwrite a line.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_LINE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(s: object, oneline: bool = False) -> str:
    """``s`` as text that is safe to print: every control character from data is shown as an
    escape (``\\x1b``), so only rightsize's own colour codes reach a terminal or a pipe.
    ``oneline`` escapes newlines and tabs too (names and paths inside one-line messages)."""
    return (_UNSAFE_LINE if oneline else _UNSAFE).sub(_escape, str(s))


def ms(v: float | None, nd: int = 2) -> str:
    if v is None:
        return NA
    if abs(v) >= 1000:
        return f"{v / 1000:,.{nd}f} s"
    return f"{v:,.{nd}f} ms"


def ms_range(lo: float | None, hi: float | None, nd: int = 2) -> str:
    """A range of times in one unit: "4.80-5.40 ms" (or seconds when both are >= 1 s)."""
    if lo is None or hi is None:
        return NA
    if min(abs(lo), abs(hi)) >= 1000:
        return f"{lo / 1000:,.{nd}f}-{hi / 1000:,.{nd}f} s"
    return f"{lo:,.{nd}f}-{hi:,.{nd}f} ms"


def us(v: float | None) -> str:
    return NA if v is None else f"{v:,.1f} µs"


def pct(v: float | None, nd: int = 1) -> str:
    return NA if v is None else f"{v:,.{nd}f}%"


def nbytes(n: float | None) -> str:
    if n is None:
        return NA
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{int(n)} B"


def usd(v: float | None) -> str:
    """Dollars, spelled one way in every report: whole dollars from $100 (``$1,307``), cents
    from $0.10 (``$12.35``), two significant digits below (``$0.042``, ``$0.0042``), so a
    small cost never reads as $0.00."""
    if v is None:
        return NA
    if abs(v) >= 100:
        return f"${v:,.0f}"
    if abs(v) >= 0.1 or v == 0:
        return f"${v:,.2f}"
    digits = 1 - math.floor(math.log10(abs(v)))
    return f"${v:.{digits}f}".rstrip("0")


def what_if(w: WhatIf) -> str:
    """A rule's predicted step: ``if applied: 118.3 ms per step, range 118.3 ms to 147.9 ms``."""
    return (f"if applied: {ms(w.step_ms, 1)} per step, range {ms(w.step_ms_low, 1)} to "
            f"{ms(w.step_ms_high, 1)}")


def usd_per_steps(per_1k: float | None) -> str:
    """A cost per step, always per 1k steps (the document's ``usd_per_1k_steps``):
    ``$0.27 per 1k steps``, ``$0.0088 per 1k steps``."""
    return NA if per_1k is None else f"{usd(per_1k)} per 1k steps"


def num(v: float | None, nd: int = 2) -> str:
    if v is None:
        return NA
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.{nd}f}"


def value(v: object) -> str:
    """Any JSON scalar or short list, as text (thresholds, tool versions)."""
    if v is None:
        return NA
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list | tuple):
        return ", ".join(value(x) for x in v)
    return str(v)


def short(name: str, width: int = 120) -> str:
    """Long templated kernel names, cut in the middle of nowhere: the full name goes in a title."""
    return name if len(name) <= width else name[: width - 1] + "…"


def safe_line(s: object) -> str:
    """``s`` safe to print inside a one-line message (newlines escaped too)."""
    return safe_text(s, oneline=True)
