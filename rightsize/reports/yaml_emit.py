"""A small, safe YAML emitter for the manifests ``rightsize plan`` writes (no PyYAML needed).

Input: mappings, lists, strings, whole numbers, floats, booleans and ``None``, with
:class:`Note` wrapping a scalar that carries a trailing ``# comment``. Output: block-style YAML
1.2 text. Every string is written double-quoted with JSON escapes (a valid YAML flow scalar), so
no value can turn into another type or break the structure; mapping keys are written plain only
when they are plain-safe (``[A-Za-z0-9_./-]``). Tests read the output back with PyYAML.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


@dataclass(frozen=True, slots=True)
class Note:
    """A scalar with a comment written after it on the same line."""

    value: Any
    comment: str


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} to YAML")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write a {type(value).__name__} to YAML")


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError("YAML mapping keys here are strings")
    return key if _PLAIN_KEY.match(key) and key.lower() not in _RESERVED else json.dumps(key)


def _comment(text: str) -> str:
    return " # " + " ".join(text.split())  # one line: a newline would end the comment


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            note = ""
            if isinstance(v, Note):
                note, v = _comment(v.comment), v.value
            if isinstance(v, Mapping | list | tuple) and v:
                out.append(f"{pad}{_key(k)}:{note}")
                out.extend(_lines(v, indent + 2))
            else:
                empty = "{}" if isinstance(v, Mapping) else "[]" if isinstance(v, list | tuple) \
                    else _scalar(v)
                out.append(f"{pad}{_key(k)}: {empty}{note}")
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            body = _lines(item, indent + 2) if isinstance(item, Mapping | list | tuple) \
                else [f"{pad}  {_scalar(item.value)}{_comment(item.comment)}"
                      if isinstance(item, Note) else f"{pad}  {_scalar(item)}"]
            out.append(f"{pad}- {body[0].lstrip()}")
            out.extend(body[1:])
        return out
    return [pad + _scalar(value)]


def dump(doc: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """One YAML document: ``header`` lines as comments, then ``doc``."""
    head = [_comment(h).lstrip() for h in header]
    return "\n".join([*head, *_lines(doc, 0)]) + "\n"


def plain(value: Any) -> Any:
    """``value`` without its :class:`Note` wrappers (what a YAML reader returns)."""
    if isinstance(value, Note):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
