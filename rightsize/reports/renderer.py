"""The one renderer protocol of every report family: a model drawn as text, JSON or HTML.

A report family (the analysis report, ``compare``, ``plan``, ``fleet report``, ``fleet
metrics``, serving) is one object with three methods over its model (the frozen result the
command built): ``text(model, style)``, ``json(model)`` (plain JSON types: this module writes
them, one way for every family) and ``html(model)`` (one self-contained page). What a page
shows beyond its model (links to other pages, the next command to run) is given to the
renderer's constructor. A family may add a format of its own as one more method of the same
shape as ``text`` (fleet metrics' ``csv``). Renderers are pure: no I/O, nothing printed.

Input: a renderer, its model, a format name and a :class:`Style`. Output: the text to write
(:func:`render_as`); an unknown format is one :class:`~rightsize.errors.RightsizeError` line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rightsize.errors import RightsizeError

M_contra = TypeVar("M_contra", contravariant=True)
M = TypeVar("M")

FORMATS = ("text", "json", "html")  # what every family draws


@dataclass(frozen=True, slots=True)
class Style:
    """How text is drawn: ANSI bold/dim when ``color``, lines wrapped at ``width`` columns
    (``None``: the terminal's when a family wraps, else 80)."""

    color: bool = False
    width: int | None = None


class Renderer(Protocol[M_contra]):
    """One report family's model as text, JSON types and an HTML page."""

    def text(self, model: M_contra, style: Style) -> str: ...

    def json(self, model: M_contra) -> Any: ...

    def html(self, model: M_contra) -> str: ...


def dumps(data: Any) -> str:
    """JSON types as the text every family writes: indented, no NaN, a final newline."""
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def formats(renderer: Renderer[Any]) -> tuple[str, ...]:
    """The formats ``renderer`` draws: :data:`FORMATS` and its own (``csv``)."""
    own = getattr(renderer, "extra_formats", ())
    return (*FORMATS, *own)


def render_as(renderer: Renderer[M], model: M, fmt: str, style: Style = Style()) -> str:
    """``model`` drawn by ``renderer`` in ``fmt``."""
    if fmt == "json":
        return dumps(renderer.json(model))
    if fmt == "html":
        return renderer.html(model)
    if fmt == "text":
        return renderer.text(model, style)
    if fmt in formats(renderer):
        out: str = getattr(renderer, fmt)(model, style)
        return out
    raise RightsizeError(f"unknown report format {fmt!r} (choose from "
                         f"{', '.join(formats(renderer))})")
