"""Kernel-name normalization: one join key for Kineto, nsys and Nsight Compute names.

Role: the tools spell the same kernel differently. Kineto and nsys record the full demangled
name (``void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<...>,
std::array<char *, (unsigned long)1>>(int, T2, T3)``); Nsight Compute strips namespaces
(``void vectorized_elementwise_kernel<4, FillFunctor<...>, array<char *, 1>>(int, T2, T3)``).
:func:`normalize_kernel_name` maps both to ``vectorized_elementwise_kernel<4>``.

Rule: drop the parameter list and the return type, drop namespaces, then keep the base name
plus its leading *simple* template arguments (identifiers and numbers, stopping at the first
argument that is itself a template, pointer, lambda or expression), with casts such as
``(int)4``/``(bool)0`` and ``true``/``false`` reduced to numbers and whitespace removed.
So ``void cutlass::Kernel2<cutlass_80_tensorop_..._align8>(Params)`` and ncu's
``Kernel2<cutlass_80_tensorop_..._align8>(Params)`` both give ``Kernel2<cutlass_80_..._align8>``.

Inputs: a name string. Outputs: the key string (never raises; an empty name gives "").
"""

from __future__ import annotations

import re

_CAST = re.compile(r"\(\s*(?:unsigned |signed )?(?:bool|char|short|int|long|long long|size_t)\s*\)")
_NUM_SUFFIX = re.compile(r"^(-?\d+)(?:u|l|ul|ull|ll)?$", re.IGNORECASE)
_SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$|^-?\d+$")
_BOOLS = {"true": "1", "false": "0"}


def _strip_params(name: str) -> str:
    """Remove a trailing balanced ``(...)`` parameter list."""
    name = name.rstrip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i].rstrip()
    return name


_OPEN, _CLOSE = "<([{", ">)]}"
_TOKENS = {sep: re.compile(r"[<(\[{>)\]}]|" + re.escape(sep)) for sep in (" ", "::", ",")}


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside <>, () and [] brackets (only brackets and separators are
    visited: a regex finds them, no Python step per character)."""
    if not any(ch in text for ch in _OPEN + _CLOSE):
        return text.split(sep)
    tokens = _TOKENS.get(sep) or re.compile(r"[<(\[{>)\]}]|" + re.escape(sep))
    parts, depth, start = [], 0, 0
    for m in tokens.finditer(text):
        ch = m.group()
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(text[start:m.start()])
            start = m.end()
    parts.append(text[start:])
    return parts


def _simple_arg(arg: str) -> str | None:
    """A template argument reduced to a plain token, or None when it is not simple."""
    arg = _CAST.sub("", arg).strip()
    arg = _split_top(arg, "::")[-1].strip()  # drop namespaces
    arg = _BOOLS.get(arg, arg)
    match = _NUM_SUFFIX.match(arg)
    if match:
        return match.group(1)
    return arg if _SIMPLE.match(arg) else None


def normalize_kernel_name(name: str) -> str:
    """The tool-independent key of a kernel name (rule in the module docstring)."""
    text = " ".join((name or "").split())
    text = _strip_params(text)
    # The function is the last top-level word ("enable_if<...>::type kernel<...>" -> "kernel<...>").
    words = [w for w in _split_top(text, " ") if w]
    if not words:
        return ""
    func = _split_top(words[-1], "::")[-1]
    base, _, rest = func.partition("<")
    base = base.strip()
    if not rest:
        return base
    inner = rest[: rest.rfind(">")] if ">" in rest else rest
    kept = []
    for arg in _split_top(inner, ","):
        simple = _simple_arg(arg)
        if simple is None:
            break
        kept.append(simple)
    return f"{base}<{','.join(kept)}>" if kept else base
