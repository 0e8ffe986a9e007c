"""``rightsize serve``: the upload-and-report server (needs the ``serve`` extra)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from rightsize.errors import RightsizeError

EXTRA_HINT = "rightsize serve needs its extra: pip install 'rightsize[serve]'"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback requires a token.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("rightsize-data"), show_default=True,
              help="Uploads, the run index (runs.sqlite) and each run's analysis and report.")
@click.option("--max-upload-mb", type=click.IntRange(min=1), default=2048, show_default=True,
              help="Cap per file, on the bytes received and on what a gzip file expands to.")
@click.option("--workers", type=click.IntRange(min=1, max=64), default=2, show_default=True,
              help="Analysis processes running at once.")
@click.option("--worker-memory-mb", type=click.IntRange(min=0), default=None,
              help="Address-space limit of each analysis process (default: 0.6 x the memory "
                   "available at start, divided by --workers; 0: no limit).")
@click.option("--max-analysis-s", type=click.FloatRange(min=1), default=None,
              help="Time limit of one analysis, and its CPU time on each CPU (default: 60 s "
                   "plus 1 s per MB the readers parse).")
@click.option("--max-concurrent-uploads", type=click.IntRange(min=1), default=16,
              show_default=True, help="Beyond this, uploads get 503 with Retry-After.")
@click.option("--max-queued", type=click.IntRange(min=1), default=64, show_default=True,
              help="Queued plus running analyses; beyond this, uploads get 503.")
@click.option("--token", default=None, envvar="RIGHTSIZE_SERVE_TOKEN",
              help="Required on every request (generated when binding beyond loopback); "
                   "16 characters or more, no white space.")
@click.option("--timeout-s", type=click.FloatRange(min=0.5), default=10.0, show_default=True,
              help="Deadline for a request's head, for each window of its body, and for an "
                   "idle connection.")
@click.option("--min-upload-kbps", type=click.IntRange(min=0), default=16, show_default=True,
              help="An upload slower than this (KiB/s, over each --timeout-s window) is cut.")
@click.option("--min-read-kbps", type=click.IntRange(min=0), default=16, show_default=True,
              help="A client reading a response slower than this (KiB/s, over each "
                   "--timeout-s window) is cut.")
@click.option("--upload-check-cpu-s", type=click.FloatRange(min=0.1), default=None,
              help="CPU seconds the inflate check of one upload may take (default: 10 s, or "
                   "1 s per 32 MiB of --max-upload-mb when more).")
@click.option("--max-connections", type=click.IntRange(min=8), default=None,
              help="Open connections beyond which new ones get 503 (default: the descriptor "
                   "limit less 64, at most 4096).")
@click.option("--grace-s", type=click.FloatRange(min=1), default=10.0, show_default=True,
              help="On SIGTERM, how long open requests may take before they are cut.")
@click.option("--min-free-mb", type=click.IntRange(min=0), default=256, show_default=True,
              help="Uploads get 507 while the data directory has less free space than this.")
@click.option("--public-url", default=None,
              help="Behind a reverse proxy: the URL users open (https://host[:port]); its "
                   "host and origin pass the Host and CSRF checks.")
@click.option("--forwarded-allow-ips", default=None,
              help="Behind a reverse proxy: the proxy's addresses (comma-separated), whose "
                   "X-Forwarded-Proto/For are believed.")
@click.option("--regression-pct", type=click.FloatRange(min=0), default=10.0,
              show_default=True,
              help="A job's capture this much slower than its previous capture is a "
                   "regression (/jobs/NAME).")
@click.option("--webhook", default=None, metavar="URL",
              help="POST each regression of a job's capture here as JSON (docs/serve.md, "
                   "\"Jobs\").")
def serve(host: str, port: int, data_dir: Path, max_upload_mb: int, workers: int,
          worker_memory_mb: int | None, max_analysis_s: float | None,
          max_concurrent_uploads: int, max_queued: int, token: str | None, timeout_s: float,
          min_upload_kbps: int, min_read_kbps: int, upload_check_cpu_s: float | None,
          max_connections: int | None, grace_s: float, min_free_mb: int,
          public_url: str | None, forwarded_allow_ips: str | None, regression_pct: float,
          webhook: str | None) -> None:
    """Serve uploads and reports over HTTP: drop a trace, get the verdict and a link.

    \b
    Examples:
      rightsize serve
      rightsize serve --data-dir /srv/rightsize --workers 4
      rightsize serve --host 0.0.0.0 --token "$TOKEN"
      rightsize serve --public-url https://rightsize.example.org --forwarded-allow-ips 127.0.0.1
      rightsize serve --webhook https://hooks.example.org/rightsize --regression-pct 15
    """
    try:
        import uvicorn  # noqa: F401

        from rightsize.serve import guard
        from rightsize.serve.app import create_app
    except ImportError as exc:
        raise RightsizeError(f"{EXTRA_HINT} ({exc.name} is missing)") from None
    from rightsize.serve.config import (
        MIB,
        ServeConfig,
        check_token,
        listen_backlog,
        max_connections_for,
        resolve_token,
    )

    if token is not None and (weak := check_token(token)) is not None:
        raise click.BadParameter(weak, param_hint="'--token'")
    token, generated = resolve_token(host, token)
    public_url = _public_url(public_url)
    if webhook is not None:
        from rightsize.serve.webhook import check_url

        try:
            check_url(webhook)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--webhook'") from None
    nofile = _descriptor_limit()
    if worker_memory_mb is not None and 0 < worker_memory_mb < 256:
        raise click.UsageError("--worker-memory-mb below 256 leaves no room to start Python")
    memory_note = None
    if worker_memory_mb is None:
        worker_memory_mb, memory_note = _default_worker_memory_mb(workers)
    config = ServeConfig(data_dir=data_dir.resolve(), host=host, port=port, token=token,
                         max_upload_bytes=max_upload_mb * MIB, workers=workers,
                         worker_memory_bytes=worker_memory_mb * MIB if worker_memory_mb else None,
                         max_analysis_s=max_analysis_s, check_cpu_s=upload_check_cpu_s,
                         min_read_bytes_per_s=min_read_kbps * 1024,
                         max_concurrent_uploads=max_concurrent_uploads,
                         max_queued_runs=max_queued, min_free_bytes=min_free_mb * MIB,
                         timeout_s=timeout_s, min_upload_bytes_per_s=min_upload_kbps * 1024,
                         max_connections=max_connections or max_connections_for(nofile),
                         backlog=listen_backlog(nofile),
                         grace_s=grace_s, public_url=public_url,
                         forwarded_allow_ips=forwarded_allow_ips,
                         regression_pct=regression_pct, webhook_url=webhook)
    # Caches (compiled report templates) beside the data, unless RIGHTSIZE_CACHE_DIR says.
    os.environ.setdefault("RIGHTSIZE_CACHE_DIR", str(config.cache_dir))
    import sqlite3

    guard.configure_logging()  # before the app: start-up says what it swept and adopted
    try:
        app = create_app(config)
    except (OSError, sqlite3.Error) as exc:
        raise RightsizeError(f"cannot use the data directory {data_dir}: {exc}") from None
    _check_port(host, port)
    _announce(config, generated, memory_note)
    guard.run(app, config)


def _default_worker_memory_mb(workers: int) -> tuple[int, str]:
    """Each worker's address-space limit when none is given: the engine's share of the memory
    available now (``LOCAL_MEMORY_FRACTION``, 0.6) split between the workers, so the limits
    together leave room for the server and the rest of the machine (total / workers, the old
    default, added up to all of it); and the line that says so at start."""
    import psutil

    from rightsize.engine import LOCAL_MEMORY_FRACTION
    from rightsize.serve.config import MIB

    available = psutil.virtual_memory().available
    each = max(256, int(available * LOCAL_MEMORY_FRACTION / workers) // MIB)
    return each, (f"workers: {workers} x {each:,} MiB address space ({LOCAL_MEMORY_FRACTION:g} "
                  f"x {available // MIB:,} MiB available / {workers}; --worker-memory-mb)")


def _public_url(url: str | None) -> str | None:
    """``--public-url`` as ``scheme://host[:port]``; a path or another scheme is refused."""
    if url is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") \
            or parts.query or parts.fragment or "@" in parts.netloc:
        raise click.BadParameter("give the origin users open, e.g. https://rightsize.example.org"
                                 " (no path: serve the proxy's location at /)",
                                 param_hint="'--public-url'")
    return f"{parts.scheme}://{parts.netloc.lower()}"


def _descriptor_limit() -> int:
    """The descriptor limit, raised to its hard limit first (allowed to any process)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 16


def _check_port(host: str, port: int) -> None:
    """Say in one line when the address is taken, instead of uvicorn's log after start-up."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(infos[0][4])
    except OSError as exc:
        raise RightsizeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _announce(config: object, generated: bool, memory_note: str | None) -> None:
    from rightsize.serve.config import MIB, ServeConfig

    assert isinstance(config, ServeConfig)
    click.echo(f"rightsize serve: {config.url}  (data in {config.data_dir})")
    if memory_note is not None:
        click.echo(memory_note)
    elif config.worker_memory_bytes:
        click.echo(f"workers: {config.workers} x {config.worker_memory_bytes // MIB:,} MiB "
                   "address space (--worker-memory-mb)")
    else:
        click.echo(f"workers: {config.workers}, no memory limit (--worker-memory-mb 0)")
    auth = ""
    if config.token:
        if generated:
            click.echo(f"token (generated): {config.token}")
        click.echo(f"open {config.url}/?token={config.token} in a browser")
        auth = f' -H "Authorization: Bearer {config.token}"'
    click.echo(f"next: curl{auth} -F file=@trace.json.gz {config.url}/api/runs")
