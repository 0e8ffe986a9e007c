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
