"""``rightsize upload RUN_DIR``: send the captures an on-demand run still has queued.

Thin: each entry of ``RUN_DIR/uploads/queue/`` is posted by :mod:`rightsize.profiler.upload`
(the same request ``rightsize run --upload`` makes), oldest first, retried with backoff until
``--timeout-s``; exit 1 with one line when some stay queued.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from rightsize.errors import RightsizeError


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--to", "url", metavar="URL", default=None,
              help="Send to this rightsize serve instead of the one each capture was queued for.")
@click.option("--timeout-s", default=120.0, show_default=True, type=click.FloatRange(0),
              help="Keep retrying an unreachable server this long.")
def upload(run_dir: Path, url: str | None, timeout_s: float) -> None:
    """Send the captures RUN_DIR has queued (rightsize run --on-demand --upload) to its
    rightsize serve; the token is $RIGHTSIZE_TOKEN."""
    import os

    from rightsize.profiler import upload as uploads
    from rightsize.rundir import read_json_file, write_json_atomic

    if not run_dir.is_dir():
        raise RightsizeError(f"{run_dir}: no such run directory")
    to = uploads.check_url(url) if url else None
    token = os.environ.get(uploads.TOKEN_ENV) or None
    deadline = time.monotonic() + timeout_s
    backoff_s = uploads.FIRST_BACKOFF_S
    sent = 0
    while entries := uploads.queued(run_dir):
        entry = read_json_file(entries[0])
        if not isinstance(entry, dict):
            raise RightsizeError(f"{entries[0]}: unreadable queue entry")
        if to and entry.get("url") != to:
            entry["url"] = to
            write_json_atomic(entries[0], entry)
        outcome = uploads.send(entry, token)
        uploads.settle(run_dir, entries[0], outcome)
        if outcome.sent:
            sent += 1
            click.echo(f"rightsize: capture {entry.get('id')} sent: {outcome.message}", err=True)
            backoff_s = uploads.FIRST_BACKOFF_S
        elif outcome.final:
            click.echo(f"rightsize: warning: capture {entry.get('id')} refused: "
                       f"{outcome.message}", err=True)
        elif time.monotonic() + backoff_s > deadline:
            raise RightsizeError(f"{len(entries)} capture(s) still queued in {run_dir}/uploads/"
                                 f"queue/: {outcome.message}")
        else:
            time.sleep(max(backoff_s, outcome.retry_after_s or 0.0))
            backoff_s = min(backoff_s * 2, uploads.MAX_BACKOFF_S)
    click.echo(f"rightsize: {sent} capture(s) sent; none queued", err=True)
