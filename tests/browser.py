"""Headless Chromium for the browser tests: Debian's /usr/bin/chromium driven by Playwright with
``executable_path`` (a test never lets a tool download its own browser).

``CHROMIUM`` (or ``$RIGHTSIZE_CHROMIUM``) is the binary; ``ARGS`` keep it off the network; a
module calls :func:`require_chromium` to skip cleanly where either piece is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("RIGHTSIZE_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-sync",
    "--metrics-recording-only",
]


def require_chromium() -> ModuleType:
    """Playwright's sync API, or skip the calling test module (no Playwright or no Chromium)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)", allow_module_level=True)
    return sync_api


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched browser, closed on exit."""
    sync_api = require_chromium()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def opened(path: Path) -> Iterator[tuple[Any, dict[str, list[str]], str]]:
    """The HTML file at ``path`` loaded in a fresh 1280x900 page; yields the page, what it did
    (``errors``: console errors and uncaught exceptions; ``requests``: every URL it fetched;
    ``dialogs``: the messages of dialogs it opened, each dismissed) and its own URL."""
    with chromium() as browser:
        p = browser.new_page(viewport={"width": 1280, "height": 900})
        events: dict[str, list[str]] = {"errors": [], "requests": [], "dialogs": []}
        p.on("console", lambda m: events["errors"].append(m.text) if m.type == "error" else None)
        p.on("pageerror", lambda e: events["errors"].append(str(e)))
        p.on("request", lambda r: events["requests"].append(r.url))
        p.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
        url = path.resolve().as_uri()
        p.goto(url, wait_until="load")
        yield p, events, url
