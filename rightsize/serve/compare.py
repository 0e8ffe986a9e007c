"""A minimal side-by-side of two finished runs, read from their analysis documents.

Input: two analysis documents (the ``rightsize analyze --format json`` contract). Output:
rows of (label, a, b, change) for the compare page: step time, the diagnosis shares, the
verdict and the device. The compare issue replaces this with a full comparison; it is kept in
this one module so that swap stays small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rightsize.serve.worker import primary_device

SHARES = ("compute", "memory", "pcie", "dataloader", "communication", "host", "idle")


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    a: str
    b: str
    change: str  # b relative to a, for numbers; "" otherwise
    unit: str = ""


def compare_rows(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> list[Row]:
    steps_a, steps_b = doc_a.get("steps") or {}, doc_b.get("steps") or {}
    diag_a, diag_b = doc_a.get("diagnosis") or {}, doc_b.get("diagnosis") or {}
    size_a, size_b = doc_a.get("sizing") or {}, doc_b.get("sizing") or {}
    rows = [
        _text("Device", _device(doc_a), _device(doc_b)),
        _text("Verdict (what bounds the step)", diag_a.get("bound"), diag_b.get("bound")),
        _number("Verdict confidence", diag_a.get("confidence"), diag_b.get("confidence"), "", 2),
        _number("Step time (mean)", steps_a.get("mean_ms"), steps_b.get("mean_ms"), "ms", 2,
                relative=True),
        _number("Steps", steps_a.get("count"), steps_b.get("count"), "", 0),
    ]
    shares_a, shares_b = diag_a.get("shares_pct") or {}, diag_b.get("shares_pct") or {}
    rows += [_number(f"Share: {k}", shares_a.get(k), shares_b.get(k), "%", 1) for k in SHARES]
    rows += [
        _text("Sizing verdict", size_a.get("verdict"), size_b.get("verdict")),
        _text("Recommended GPU", size_a.get("recommended"), size_b.get("recommended")),
    ]
    return rows


def _device(doc: dict[str, Any]) -> str | None:
    return primary_device(doc)


def _text(label: str, a: object, b: object) -> Row:
    sa, sb = ("—" if a is None else str(a)), ("—" if b is None else str(b))
    return Row(label, sa, sb, "same" if sa == sb else "changed")


def _number(label: str, a: float | None, b: float | None, unit: str, digits: int,
            relative: bool = False) -> Row:
    fa = "—" if a is None else f"{a:,.{digits}f}"
    fb = "—" if b is None else f"{b:,.{digits}f}"
    if a is None or b is None:
        change = ""
    elif relative and a:
        change = f"{(b - a) / a * 100:+.1f}%"  # b against a, percent of a
    else:
        change = f"{b - a:+,.{digits}f}{' pt' if unit == '%' else ''}"
    return Row(label, fa, fb, change, unit)
