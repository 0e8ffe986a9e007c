"""A run's stored results served from disk, never parsed on the event loop.

Input: the files a worker wrote in ``runs/<id>/`` (``analysis.json``, ``report.html``,
``summary.json``). Output: streaming responses read in :data:`CHUNK_BYTES` pieces by a thread:
``GET /api/runs/{id}`` splices the stored document's bytes into the run's JSON as they stand
(a 72 MB document froze the server 2.3 s when it was parsed and dumped again, issue 40, 5), the
report page gets the server's bar after its ``<body>`` tag as it streams. A response waits for
the client to take each piece (the guard cuts a client that reads slower than
``--min-read-kbps``), so a slow reader holds one piece, not the document.

``summary.json`` holds the few values the compare page shows
(:func:`~rightsize.serve.worker.compare_summary`), written by the worker beside the document; a run analyzed by an older server has none, and its document is
parsed on a thread when it is small enough, else the page says so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

from starlette.responses import StreamingResponse

from rightsize.serve.worker import ANALYSIS_JSON, SUMMARY_JSON, compare_summary

CHUNK_BYTES = 256 * 1024
MAX_BODY_SEARCH = 4 * 1024 * 1024  # where a report's <body> tag must be, to put the bar after
# An older run's document parsed for the compare page (on a thread, but json.loads holds the
# interpreter: 10 MB took 240-400 ms on the shared 2-core VM; new documents are < 2 MB)
MAX_PARSED_BYTES = 2 * 1024 * 1024


class Missing(Exception):
    """The stored file is gone (the run was deleted meanwhile, or its results were lost)."""


async def _open(path: Path) -> IO[bytes]:
    try:
        return await asyncio.get_running_loop().run_in_executor(None, open, path, "rb")
    except OSError:
        raise Missing(path.name) from None


async def _chunks(fh: IO[bytes]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    try:
        while data := await loop.run_in_executor(None, fh.read, CHUNK_BYTES):
            yield data
    finally:
        fh.close()


async def run_json(head: dict[str, Any], analysis: Path | None,
                   headers: dict[str, str] | None = None) -> StreamingResponse:
    """``head`` as a JSON object with ``"analysis"`` last: the stored document's bytes as they
    stand (raises :class:`Missing` when it cannot be opened), or null."""
    fh = await _open(analysis) if analysis is not None else None
    opening = json.dumps(head)[:-1] + ', "analysis": '

    async def body() -> AsyncIterator[bytes]:
        yield opening.encode()
        if fh is None:
            yield b"null"
        else:
            async for data in _chunks(fh):
                yield data
        yield b"}"

    return StreamingResponse(body(), media_type="application/json", headers=headers)


async def report_page(path: Path, bar: str, headers: dict[str, str]) -> StreamingResponse:
    """The stored report with ``bar`` right after its ``<body>`` tag (the file on disk stays
    the self-contained page ``rightsize analyze`` writes)."""
    fh = await _open(path)

    async def body() -> AsyncIterator[bytes]:
        held = b""
        placed = False
        async for data in _chunks(fh):
            if placed:
                yield data
                continue
            held += data
            at = held.find(b"<body")
            end = held.find(b">", at) if at >= 0 else -1
            if end >= 0:
                yield held[:end + 1] + bar.encode() + held[end + 1:]
                placed, held = True, b""
            elif len(held) > MAX_BODY_SEARCH:  # no body tag where one belongs: bar first
                yield bar.encode() + held
                placed, held = True, b""
        if not placed:
            yield bar.encode() + held

    return StreamingResponse(body(), media_type="text/html; charset=utf-8", headers=headers)


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The compare values of a finished run (runs on a thread): ``summary.json``, else the
    summary of its document when that is small enough to parse; None when neither."""
    try:
        return dict(json.loads((run_dir / SUMMARY_JSON).read_text("utf-8")))
    except (OSError, ValueError):
        pass
    path = run_dir / ANALYSIS_JSON
    try:
        if path.stat().st_size > MAX_PARSED_BYTES:
            return None
        return compare_summary(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError):
        return None
