"""``rightsize serve --webhook URL``: each regression a job's capture shows, posted as JSON.

A daemon thread posts each payload (``Content-Type: application/json``) with a 10 s timeout,
retrying a connection failure, a timeout, 5xx, 408 or 429 up to :data:`ATTEMPTS` times with
backoff (1 s, doubling); any answer 2xx is sent, anything else final. The outcome goes to the
job index (``checks.webhook``: ``sent``, or ``failed: <why>``). Nothing here runs on the event
loop: :meth:`Webhook.post` only queues.

The payload (documented in docs/serve.md, "Jobs")::

    {"event": "regression", "job": NAME, "capture": ID, "upload": ID, "run": ID,
     "previous": {"upload": ID, "capture": ID}, "basis": "job_step_ms" | "step_ms",
     "step_ms": [previous, this], "change_pct": X, "threshold_pct": T, "verdict": BOUND,
     "attribution": [compare's top changes], "job_url": URL, "report_url": URL}
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rightsize.serve")
ATTEMPTS = 5
TIMEOUT_S = 10.0


def check_url(url: str) -> str:
    """``http(s)://host[:port][/path][?query]``; raises ValueError (one line) otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http(s) URL, not {url!r}")
    return url


def post_once(url: str, payload: dict[str, Any]) -> tuple[bool, bool, str]:
    """(sent, final, what happened) of one POST."""
    parts = urllib.parse.urlsplit(url)
    body = json.dumps(payload).encode()
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "", parts.port, timeout=TIMEOUT_S)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        return False, False, f"{exc.__class__.__name__}: {exc}"
    finally:
        conn.close()
    if 200 <= status < 300:
        return True, True, "sent"
    return False, not (status >= 500 or status in (408, 429)), f"HTTP {status}"


class Webhook:
    """The sending thread (see the module docstring)."""

    def __init__(self, url: str, on_outcome: Callable[[str, str], None]) -> None:
        self.url = url
        self._on_outcome = on_outcome  # (upload id, "sent" | "failed: ...")
        self._queue: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="rightsize-webhook",
                                        daemon=True)
        self._thread.start()

    def post(self, upload_id: str, payload: dict[str, Any]) -> None:
        self._queue.put((upload_id, payload))

    def close(self, timeout_s: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while (item := self._queue.get()) is not None:
            upload_id, payload = item
            outcome = "failed: not tried"
            for attempt in range(ATTEMPTS):
                sent, final, what = post_once(self.url, payload)
                outcome = "sent" if sent else f"failed: {what}"
                if final:
                    break
                if attempt + 1 < ATTEMPTS:
                    time.sleep(2.0 ** attempt)
            if outcome != "sent":
                log.warning("webhook for %s (job %s): %s", upload_id, payload.get("job"), outcome)
            try:
                self._on_outcome(upload_id, outcome)
            except Exception as exc:  # noqa: BLE001 - the thread serves the next one
                log.warning("webhook outcome not recorded: %s", exc)
