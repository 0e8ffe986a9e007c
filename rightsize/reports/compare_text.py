"""The text renderer of ``rightsize compare``: what changed between A and B, for a terminal.

Input: a :class:`~rightsize.analyzers.compare.Comparison`. Output: plain text wrapped to
``width`` columns (80 when piped); colors only when asked (the CLI asks on a terminal without
``NO_COLOR``). Names from traces are printed with control characters escaped, so a hostile
kernel name cannot drive the terminal.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from rightsize.analyzers.compare import Change, Comparison
from rightsize.reports import fmt
from rightsize.reports.renderer import Style

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
TOP_ROWS = 8


def clean(text: str) -> str:
    """Control characters (ESC, CR, BEL...) shown as ``\\xNN`` instead of obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def signed_pct(v: float | None) -> str:
    return fmt.NA if v is None else f"{v:+.1f}%"


def _bold(text: str, color: bool) -> str:
    return f"\033[1m{text}\033[0m" if color else text


def _name(name: str, width: int) -> str:
    name = clean(name)
    return name if len(name) <= width else name[: width - 1] + "…"


def _table(rows: tuple[Change, ...], width: int, limit: int = TOP_ROWS) -> list[str]:
    name_w = max(width - 36, 20)
    out = [f"  {'':{name_w}} {'A ms':>9} {'B ms':>9} {'change':>9}"]
    for c in rows[:limit]:
        out.append(f"  {_name(c.name, name_w):{name_w}} {c.a_ms:9.3f} {c.b_ms:9.3f} "
                   f"{signed_pct(c.change_pct):>9}")
    if len(rows) > limit:
        out.append(f"  ... {len(rows) - limit} more (--format json lists all)")
    return out


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(clean(text), width, initial_indent=indent,
                         subsequent_indent=indent + "  ") or [indent]


def _by_kernel(c: Comparison) -> str:
    k = c.kernel_matched_pct or {}
    if k.get("a") is None and k.get("b") is None:
        return ""
    return f" (by kernel name alone: {fmt.pct(k.get('a'))} and {fmt.pct(k.get('b'))})"


def render_compare_text(c: Comparison, width: int = 80, color: bool = False) -> str:
    width = max(width, 60)
    a, b, s = c.a, c.b, c.step
    lines = [_bold("rightsize compare: what changed from A to B", color), ""]
    for side in (a, b):
        lines += _wrap(f"{side.label}: {side.path} ({side.source}) - {side.device}, "
                       f"precision {side.precision or fmt.NA}, verdict "
                       f"{side.verdict or fmt.NA}, {side.steps} step(s)", width)
    lines.append("")
    noise = ("noise unknown (a side has one step)" if s.noise_ms is None else
             f"noise +/-{s.noise_ms:.2f} ms: "
             + ("a real change" if s.significant else "within noise"))
    lines += _wrap(f"Step time: {fmt.ms(s.a)} -> {fmt.ms(s.b)} "
                   f"({signed_pct(c.to_json()['step_ms']['change_pct'])}; {noise})", width, "")
    lines += _wrap(f"Matched ({c.matched_by}, {c.basis} time): "
                   f"{fmt.pct(c.matched_pct.get('a'))} of A, {fmt.pct(c.matched_pct.get('b'))}"
                   " of B" + _by_kernel(c), width, "")
    lines += _wrap(f"Peak memory: {fmt.nbytes(a.peak_memory_bytes)} -> "
                   f"{fmt.nbytes(b.peak_memory_bytes)}", width, "")
    if c.projection_check is not None:
        p = c.projection_check
        rng = (f", range {p.range_ms[0]:.2f}-{p.range_ms[1]:.2f} ms (B "
               f"{'inside' if p.within_range else 'outside'})") if p.range_ms else ""
        lines += _wrap(f"Projection check: rightsize projected A on {p.gpu} at "
                       f"{fmt.ms(p.projected_ms)}{rng}; B measured {fmt.ms(p.measured_ms)} "
                       f"(error {signed_pct(p.error_pct)})", width, "")
    elif c.differs:
        lines += _wrap(f"Projection check: not made: the runs differ in more than the GPU "
                       f"({'; '.join(c.differs)})", width, "")
    lines += ["", _bold("Top changes", color)]
    for ch in c.top_changes[:TOP_ROWS]:
        text = ch.reason or (f"{ch.kind} {ch.name}: {ch.a_ms:.3g} -> {ch.b_ms:.3g} ms/step "
                             f"({signed_pct(ch.change_pct)})")
        lines += _wrap(f"- {text}", width)
    lines += ["", _bold("Exclusive shares of the step", color),
              f"  {'':16} {'A':>8} {'B':>8}"]
    for key in dict.fromkeys([*a.shares_pct, *b.shares_pct]):
        lines.append(f"  {key:16} {fmt.pct(a.shares_pct.get(key)):>8} "
                     f"{fmt.pct(b.shares_pct.get(key)):>8}")
    lines += ["", _bold("Ops (ms per step)", color), *_table(c.ops, width)]
    if c.kernels:
        lines += ["", _bold("Kernels by normalized name (ms per step)", color),
                  *_table(c.kernels, width)]
    if c.notes:
        lines += ["", _bold("Notes", color)]
        for n in c.notes:
            lines += _wrap(f"- {n}", width)
    return "\n".join(lines) + "\n"


class CompareRenderer:
    """``rightsize compare`` (:mod:`rightsize.reports.renderer`'s protocol): a
    :class:`~rightsize.analyzers.compare.Comparison` as text, its JSON (docs/compare.md) or its
    page."""

    def text(self, model: Comparison, style: Style) -> str:
        return render_compare_text(model, style.width or 80, color=style.color)

    def json(self, model: Comparison) -> Any:
        return model.to_json()

    def html(self, model: Comparison) -> str:
        from rightsize.reports.compare_html import render_compare_html  # jinja2 for a page

        return render_compare_html(model)


COMPARE = CompareRenderer()
