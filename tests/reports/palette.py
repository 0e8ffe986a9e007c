"""The page palette as the browser sees it: style.css's ``:root`` custom properties, by name.

The test helper that turns a palette name (what the chart data carries, e.g. ``--c-memory``)
into the colour a chart draws, so browser tests can compare drawn colours with the palette.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

ROOT = re.compile(r":root\s*\{(?P<body>[^}]*)\}")
PROPERTY = re.compile(r"(--[\w-]+)\s*:\s*([^;]+);")


def style_css() -> str:
    return (resources.files("rightsize.reports") / "templates" / "style.css").read_text("utf-8")


def root_block(text: str) -> str:
    """The one ``:root { ... }`` rule of a stylesheet or page (an error when there is none or
    more than one)."""
    found = ROOT.findall(text)
    assert len(found) == 1, f"{len(found)} :root rules"
    return str(found[0])


@functools.cache
def palette() -> dict[str, str]:
    """``{"--c-memory": "#16a2b8", ...}``: every custom property style.css's :root defines."""
    body = re.sub(r"/\*.*?\*/", "", root_block(style_css()), flags=re.DOTALL)
    return {k: v.strip() for k, v in PROPERTY.findall(body)}
